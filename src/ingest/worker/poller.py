"""`kb worker`: long-polls the ingest queue and runs the Lambda handler on real SQS events, the way
Lambda's SQS event source mapping does.

- Receives up to `batch_size` messages, builds the SQS event Lambda would send, calls the handler, deletes
  the messages that succeeded; failed ones are left to become visible again after the visibility timeout
  (and reach the DLQ after maxReceiveCount receives), as with Lambda.
- When the queue endpoint is unreachable it backs off (full jitter, up to 30 s) and resumes.
- While a batch is in hand (the handler, then its deletes and their retries) its messages are kept hidden:
  their visibility timeout is extended every third of it. A batch slower than the timeout is not delivered
  again while it is still being worked on, and a delete that needs retries does not let the batch come back
  and run its receive count up to the DLQ.
- On SIGTERM or SIGINT it finishes the batch in hand, then stops; messages received but not processed are
  made visible again at once. A worker killed outright loses nothing either: its messages reappear.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

log = logging.getLogger("kosha.worker")
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
_LET_GO_WAIT_S = 10.0  # an extension's call is short; one to an unreachable endpoint is not waited for in full


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


def visibility_entries(messages: list[dict[str, Any]], timeout_s: int | None) -> list[dict[str, Any]]:
    """ChangeMessageVisibilityBatch entries setting these messages' visibility timeout."""
    return [
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": timeout_s}
        for i, m in enumerate(messages)
    ]


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
        visibility_timeout_s: int | None = None,
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
        self.visibility_timeout_s = visibility_timeout_s  # None or 0: the messages are not kept hidden
        self.stop = threading.Event()
        # Set while a batch is in hand (received, not yet deleted or handed back): what a process that runs the
        # worker in a thread waits for before it exits and takes the database with it (`kb up`).
        self.in_hand = threading.Event()
        self._batch: list[dict[str, Any]] = []  # the messages in hand, for hand_back()
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
            self.in_hand.set()
            self._batch = messages
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
                self.in_hand.clear()
                self.stop.wait(pause)
            finally:
                self._batch = []
                self.in_hand.clear()
        return self.stats

    def hand_back(self) -> int:
        """Make the messages in hand visible again at once, for a worker stopping without finishing them: they
        came back only after their visibility timeout (6 minutes), with no worker able to take them meanwhile
        (found walking it). One try, no retries: the process is on its way out. How many were handed back."""
        batch = self._batch
        if not batch:
            return 0
        try:
            self.sqs.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=visibility_entries(batch, 0))
        except (ClientError, BotoCoreError) as exc:
            log.warning("could not hand back the batch in hand (%s): it returns after its visibility timeout", exc)
            return 0
        return len(batch)

    def wind_down(self, grace_s: float | None = None, *, on_wait: Callable[[], None] | None = None) -> None:
        """Stop a worker that `run`s in another thread: the batch in hand, if any, is finished first (within
        `grace_s`, if given); an idle long poll is not waited out, since the process may end under it (a message
        received just then is delivered again after its visibility timeout). `on_wait` is called once if there
        is a wait."""
        self.stop.set()
        if not self.in_hand.is_set():
            return
        if on_wait is not None:
            on_wait()
        deadline = None if grace_s is None else time.monotonic() + grace_s
        while self.in_hand.is_set() and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.1)

    def process(self, messages: list[dict[str, Any]]) -> set[str]:
        """Run the handler on one batch; delete what succeeded; return the failed message ids."""
        event = {"Records": [lambda_record(m, self.queue_arn, self.region) for m in messages]}
        with VisibilityHeartbeat(self.sqs, self.queue_url, messages, self.visibility_timeout_s) as heartbeat:
            response = self.handler(event, None)
            failed = {item["itemIdentifier"] for item in response.get("batchItemFailures", [])}
            done = [m for m in messages if m["MessageId"] not in failed]
            heartbeat.keep(done)  # before the failed ones are handed back, so that no beat hides them again
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
        entries = visibility_entries(messages, 0)
        self._with_retry(lambda: self.sqs.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=entries))
        self.stats.released += len(messages)

    def _retry_later(self, messages: list[dict[str, Any]]) -> None:
        """Failed messages come back after retry_delay_s rather than the whole visibility timeout (which
        must stay long enough for a slow batch), so a broken file reaches the DLQ within minutes."""
        entries = visibility_entries(messages, self.retry_delay_s)
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


class VisibilityHeartbeat:
    """Keeps messages hidden while they are in hand: every third of `timeout_s`, their visibility timeout is
    set to `timeout_s` again. A failed extension is only logged: the message then comes back when its timeout
    runs out, as it would with no heartbeat. `timeout_s` None or 0: does nothing."""

    def __init__(self, sqs: Any, queue_url: str, messages: list[dict[str, Any]], timeout_s: int | None) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.timeout_s = timeout_s
        self._messages = list(messages)
        self._lock = threading.Lock()
        self._idle = threading.Event()  # set while no extension is on its way
        self._idle.set()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="kb-visibility", daemon=True)

    def __enter__(self) -> VisibilityHeartbeat:
        if self.timeout_s:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join(_LET_GO_WAIT_S)

    def keep(self, messages: list[dict[str, Any]]) -> None:
        """From now on only these; returns once an extension on its way (which may name others) has ended,
        so that a message let go is not hidden again after its caller changed its visibility."""
        with self._lock:
            self._messages = list(messages)
        self._idle.wait(_LET_GO_WAIT_S)

    def _beat(self) -> None:
        period = max(1.0, (self.timeout_s or 0) / 3)
        while not self._done.wait(period):
            with self._lock:
                entries = visibility_entries(self._messages[:10], self.timeout_s)
                if not entries:
                    continue
                self._idle.clear()
            try:
                self.sqs.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=entries)
            except (ClientError, BotoCoreError) as exc:
                log.warning("could not keep the batch in hand hidden (%s)", exc.__class__.__name__)
            finally:
                self._idle.set()
