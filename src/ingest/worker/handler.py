"""The SQS batch handler, the same in AWS Lambda and in the local worker.

Each record (an S3 event notification) is processed alone; a record that fails is reported in
`batchItemFailures` (aws-lambda-powertools' batch processor), so only it is retried, and after
maxReceiveCount receives it goes to the dead-letter queue. Created objects are ingested; removed objects
withdraw their documents. Ingestion is idempotent (sha256), so a message delivered twice is harmless.

In Lambda the records share the invocation's deadline (ingest.worker.invocation_deadline): each one's parse
budget is cut to the time left, and a record with no time left is handed back unstarted, not failed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from ingest.aws.clients import object_exists, object_missing
from ingest.parsers.budget import ParseLimit
from ingest.pipeline import Ingestor, IngestResult, result_line
from ingest.worker.invocation_deadline import (
    MIN_PARSE_SECONDS,
    cut_setting,
    most_received_first,
    parse_budget,
    receive_count,
    seconds_left,
)
from ingest.worker.s3_events import ObjectChange, object_changes
from kb_core.file_limits import DEFAULT_WORKER_RESERVE_SECONDS, over_size_limit

log = logging.getLogger("kosha.worker")
LARGE_FILE_BYTES = 1_000_000  # a file this big is named in the log when it starts: it takes a while


class IngestFailed(Exception):
    """Raised for a record whose object could not be ingested, so the batch reports it as failed."""


class NotStarted(Exception):
    """Raised for a record the invocation has no time left to start: the batch reports it as failed, so SQS
    delivers it again, but nothing about its file failed: kb.ingest_log records it as 'deferred'."""


class RecordProcessor:
    def __init__(
        self,
        ingestor: Ingestor,
        s3: Any,
        *,
        max_bytes: int,
        on_result: Callable[[IngestResult], None] | None = None,
        reserve_s: float = DEFAULT_WORKER_RESERVE_SECONDS,
    ) -> None:
        self.ingestor = ingestor
        self.s3 = s3
        self.max_bytes = max_bytes
        self.on_result = on_result
        self.reserve_s = reserve_s  # KB_WORKER_RESERVE_SECONDS

    def __call__(self, record: SQSRecord, lambda_context: Any = None) -> list[IngestResult]:
        """`lambda_context` is passed by the batch processor in Lambda only (`kb worker` has no deadline)."""
        changes = object_changes(record.body)
        left = seconds_left(lambda_context)
        if changes and left is not None and self._budget(left) < self._least_budget():
            uris = ", ".join(change.uri for change in changes)
            reason = (
                f"the invocation's deadline is {left:.1f} s away, within the {self.reserve_s:g} s kept to store "
                f"and report (KB_WORKER_RESERVE_SECONDS): handed back to the queue to be delivered again "
                f"(receive {receive_count(record.raw_event)} of this message)"
            )
            log.warning("not started %s: %s", uris, reason)
            for change in changes:
                self.ingestor.log_deferred(change.uri, f"not started: {reason}")
            raise NotStarted(reason)
        results = [self._apply(change, lambda_context) for change in changes]
        failed = [r for r in results if r.outcome == "failed"]
        if failed:
            raise IngestFailed("; ".join(f"{r.source_uri}: {r.reason}" for r in failed))
        return results

    def _budget(self, left_s: float | None) -> float:
        return parse_budget(left_s, max_parse_seconds=self.ingestor.max_parse_seconds, reserve_s=self.reserve_s)

    def _least_budget(self) -> float:
        """The budget worth starting a record with: MIN_PARSE_SECONDS, or KB_MAX_PARSE_SECONDS if less."""
        return min(MIN_PARSE_SECONDS, self.ingestor.max_parse_seconds)

    def _apply(self, change: ObjectChange, context: Any = None) -> IngestResult:
        try:
            if change.kind == "removed":
                result = self.ingestor.withdraw(change.uri, still_there=self._exists)
            else:
                result = self._ingest(change, context)
        except Exception as exc:
            if _outside_the_file(exc):
                raise  # the database or S3: the batch fails the record, and the cause is in the log above
            # A bug met on this file: it failed with nothing recorded, so `kb aws status` showed its dead letter
            # with "no error recorded". Recorded as the file's failure, with the traceback in the worker's log.
            log.exception("failed %s: unexpected error", change.uri)
            reason = f"unexpected error ({type(exc).__name__}: {exc}); a bug in the worker: report it with its log"
            self.ingestor.log_refused(change.uri, reason)
            result = IngestResult(change.uri, "failed", reason=reason)
        # A failure is what the ops engineer has to see: WARNING, with the reason (the message is retried,
        # and after the last receive it goes to the dead-letter queue).
        level = logging.WARNING if result.outcome == "failed" else logging.INFO
        # As make run's log says it: the doc code and version, and why (found walking it: `kb worker` said only
        # "ingested s3://…").
        log.log(level, "%s", result_line(result))
        if self.on_result:
            self.on_result(result)
        return result

    def _exists(self, uri: str) -> bool:
        # An error other than "no such key" is raised (the record fails and is received again), so a document
        # is never followed to an object not seen.
        return object_exists(self.s3, uri)

    def _ingest(self, change: ObjectChange, context: Any = None) -> IngestResult:
        from ingest.pipeline import OBJECT_GONE, IngestResult

        try:
            head = self.s3.head_object(Bucket=change.bucket, Key=change.key)
        except self.s3.exceptions.ClientError as exc:
            if object_missing(exc):
                # Removed again before we got here: its ObjectRemoved event will withdraw it.
                return IngestResult(change.uri, "unchanged", reason=OBJECT_GONE)
            raise
        if head["ContentLength"] > self.max_bytes:
            # Refused before the download, so never seen by the ingestor: recorded here, or `kb aws status`
            # showed its dead letter with "no error recorded".
            reason = over_size_limit(head["ContentLength"], self.max_bytes, "the object")
            self.ingestor.log_refused(change.uri, reason)
            return IngestResult(change.uri, "failed", reason=reason)
        if head["ContentLength"] >= LARGE_FILE_BYTES:
            # Found walking it: while a 3 MB file took minutes, the log said nothing of which file was in hand.
            log.info("ingesting %s (%.1f MB)", change.uri, head["ContentLength"] / 1e6)
        data = self.s3.get_object(Bucket=change.bucket, Key=change.key)["Body"].read()
        # Measured after the download, right before the parse. Started, the record parses for at least
        # the least budget even if the download ate into it: the reserve absorbs that much.
        budget = self._budget(seconds_left(context))
        full = self.ingestor.max_parse_seconds
        if budget >= full:
            return self.ingestor.ingest(data, name=change.key, source_uri=change.uri)
        limit = ParseLimit(max(budget, self._least_budget()), cut_setting(full, self.reserve_s))
        return self.ingestor.ingest(data, name=change.key, source_uri=change.uri, limit=limit)


def _outside_the_file(exc: Exception) -> bool:
    import botocore.exceptions
    import psycopg

    return isinstance(exc, psycopg.Error | botocore.exceptions.BotoCoreError | botocore.exceptions.ClientError)


def make_handler(processor: RecordProcessor) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    batch = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

    def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        records = event.get("Records") if isinstance(event, dict) else None
        if isinstance(records, list):
            event = {**event, "Records": most_received_first(records)}
        return dict(process_partial_response(event=event, record_handler=processor, processor=batch, context=context))

    return handler
