"""`kb worker`: long-polls the ingest queue and runs the Lambda handler on real SQS events, the way
Lambda's SQS event source mapping does.

- Receives up to `batch_size` messages, builds the SQS event Lambda would send, calls the handler, deletes
  the messages that succeeded; failed ones are left to become visible again after the visibility timeout
  (and reach the DLQ after maxReceiveCount receives), as with Lambda.
- When the queue endpoint is unreachable it backs off (full jitter, up to 30 s) and resumes.
- On SIGTERM or SIGINT it finishes the batch in hand, then stops; messages received but not processed are
  made visible again at once. A worker killed outright loses nothing either: its messages reappear.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

log = logging.getLogger("kosha.worker")
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def lambda_record(message: dict[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """An SQS message as Lambda's event source mapping hands it to the function."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": message.get("MessageAttributes", {}),
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


@dataclass
class WorkerStats:
    batches: int = 0
    succeeded: int = 0
    failed: int = 0
    released: int = 0


class SqsWorker:
    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        queue_arn: str,
        handler: Handler,
        *,
        region: str,
        batch_size: int = 5,
        wait_time_s: int = 10,
        max_backoff_s: float = 30.0,
        retry_delay_s: int | None = None,
    ) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.queue_arn = queue_arn
        self.handler = handler
        self.region = region
        self.batch_size = batch_size
        self.wait_time_s = wait_time_s
        self.max_backoff_s = max_backoff_s
        self.retry_delay_s = retry_delay_s
        self.stop = threading.Event()
        self.stats = WorkerStats()

    def run(self, *, until: Callable[[], bool] | None = None, heartbeat: Path | None = None) -> WorkerStats:
        """Poll until stopped (or until `until()` says so, checked between batches). `heartbeat` is touched
        after every poll, so a health check can tell a live worker from a stuck one."""
        failures = 0
        while not self.stop.is_set() and not (until and until()):
            if heartbeat is not None:
                heartbeat.touch()
            try:
                messages = self.sqs.receive_message(
                    QueueUrl=self.queue_url,
                    MaxNumberOfMessages=self.batch_size,
                    WaitTimeSeconds=self.wait_time_s,
                    AttributeNames=["All"],
                    MessageAttributeNames=["All"],
                ).get("Messages", [])
                failures = 0
            except (ClientError, BotoCoreError) as exc:
                failures += 1
                pause = self._backoff(failures)
                log.warning("the queue is unreachable (%s); retrying in %.1f s", exc.__class__.__name__, pause)
                self.stop.wait(pause)
                continue
            if not messages:
                continue
            if self.stop.is_set():
                self._release(messages)
                break
            try:
                self.process(messages)
            except (ClientError, BotoCoreError) as exc:
                # The batch is stored but its delete did not get through (the endpoint went away after the
                # receive): its messages come back after the visibility timeout and are skipped as unchanged.
                # Back off as for an unreachable queue rather than die.
                failures += 1
                pause = self._backoff(failures)
                log.warning(
                    "could not delete the processed messages (%s); they will be delivered again; retrying in %.1f s",
                    exc.__class__.__name__,
                    pause,
                )
                self.stop.wait(pause)
        return self.stats

    def process(self, messages: list[dict[str, Any]]) -> set[str]:
        """Run the handler on one batch; delete what succeeded; return the failed message ids."""
        event = {"Records": [lambda_record(m, self.queue_arn, self.region) for m in messages]}
        response = self.handler(event, None)
        failed = {item["itemIdentifier"] for item in response.get("batchItemFailures", [])}
        done = [m for m in messages if m["MessageId"] not in failed]
        if failed and self.retry_delay_s is not None:
            self._retry_later([m for m in messages if m["MessageId"] in failed])
        for start in range(0, len(done), 10):
            entries = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done[start : start + 10])
            ]
            self._with_retry(self._deleter(entries))
        self.stats.batches += 1
        self.stats.succeeded += len(done)
        self.stats.failed += len(failed)
        return failed

    def _deleter(self, entries: list[dict[str, Any]]) -> Callable[[], Any]:
        return lambda: self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=entries)

    def _release(self, messages: list[dict[str, Any]]) -> None:
        """Stopping: hand the unprocessed messages back to the queue now rather than after the timeout."""
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0} for i, m in enumerate(messages)
        ]
        self._with_retry(lambda: self.sqs.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=entries))
        self.stats.released += len(messages)

    def _retry_later(self, messages: list[dict[str, Any]]) -> None:
        """Failed messages come back after retry_delay_s rather than the whole visibility timeout (which
        must stay long enough for a slow batch), so a broken file reaches the DLQ within minutes."""
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": self.retry_delay_s}
            for i, m in enumerate(messages)
        ]
        try:
            self._with_retry(lambda: self.sqs.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=entries))
        except (ClientError, BotoCoreError) as exc:  # they still come back, after the visibility timeout
            log.warning("could not shorten the retry delay of failed messages (%s)", exc.__class__.__name__)

    def _backoff(self, failures: int) -> float:
        """Full jitter: a pause drawn from 0 up to 2**failures / 2 seconds, at most max_backoff_s."""
        return random.uniform(0, min(self.max_backoff_s, 0.5 * 2**failures))

    def _with_retry(self, call: Callable[[], Any], attempts: int = 5) -> Any:
        # After the last attempt the error is raised: the messages stay in the queue and come back.
        retrying = Retrying(
            retry=retry_if_exception_type((ClientError, BotoCoreError)),
            stop=stop_after_attempt(attempts),
            wait=wait_random_exponential(multiplier=1, max=self.max_backoff_s),
            reraise=True,
        )
        return retrying(call)
