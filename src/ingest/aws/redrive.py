"""Move what is in the dead-letter queue back to the ingest queue, once the cause is fixed.

On AWS this is SQS's redrive (StartMessageMoveTask), whose progress is polled with ListMessageMoveTasks.
The local AWS (moto) does not implement those two calls, so against it the messages are moved by hand:
receive from the DLQ, send the same body to the ingest queue, delete from the DLQ. It says which it does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from kb_core.words import counted


@dataclass(frozen=True)
class RedriveReport:
    method: str  # 'message-move-task' | 'receive-send-delete'
    moved: int
    status: str


def redrive(
    sqs: Any,
    *,
    dlq_url: str,
    dlq_arn: str,
    queue_url: str,
    queue_arn: str,
    local: bool,
    say: Callable[[str], None] = print,
    poll_s: float = 2.0,
    timeout_s: float = 900,
) -> RedriveReport:
    if local:
        say(
            "the local AWS does not implement StartMessageMoveTask: moving the messages one by one "
            "(receive from the DLQ, send to the ingest queue, delete from the DLQ)"
        )
        return _move_by_hand(sqs, dlq_url, queue_url, say)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=queue_arn)["TaskHandle"]
    say(f"started the redrive from the DLQ to the ingest queue (task {handle})")
    deadline = time.monotonic() + timeout_s
    while True:
        tasks = sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=1)["Results"]
        task = tasks[0] if tasks else {}
        status = task.get("Status", "UNKNOWN")
        moved, total = task.get("ApproximateNumberOfMessagesMoved", 0), task.get("ApproximateNumberOfMessagesToMove")
        say(f"redrive {status.lower()}: {moved} of {counted(total, 'message') if total is not None else '?'} moved")
        if status in ("COMPLETED", "FAILED", "CANCELLED"):
            if status == "FAILED":
                say(f"redrive failed: {task.get('FailureReason', 'no reason given')}")
            return RedriveReport("message-move-task", int(moved), status)
        if time.monotonic() > deadline:
            return RedriveReport("message-move-task", int(moved), "TIMED_OUT")
        time.sleep(poll_s)


def _move_by_hand(sqs: Any, dlq_url: str, queue_url: str, say: Callable[[str], None]) -> RedriveReport:
    moved = 0
    while True:
        try:
            messages = sqs.receive_message(
                QueueUrl=dlq_url, MaxNumberOfMessages=10, WaitTimeSeconds=1, VisibilityTimeout=60
            ).get("Messages", [])
        except (ClientError, BotoCoreError) as exc:
            say(f"redrive stopped: {exc}")
            return RedriveReport("receive-send-delete", moved, "FAILED")
        if not messages:
            say(f"redrive completed: {counted(moved, 'message')} moved")
            return RedriveReport("receive-send-delete", moved, "COMPLETED")
        for message in messages:
            # Send first, delete after: a crash in between duplicates a message, which ingestion tolerates,
            # instead of losing one.
            sqs.send_message(QueueUrl=queue_url, MessageBody=message["Body"])
            sqs.delete_message(QueueUrl=dlq_url, ReceiptHandle=message["ReceiptHandle"])
            moved += 1
        say(f"redrive in progress: {counted(moved, 'message')} moved")
