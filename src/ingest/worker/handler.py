"""The SQS batch handler, the same in AWS Lambda and in the local worker.

Each record (an S3 event notification) is processed alone; a record that fails is reported in
`batchItemFailures` (aws-lambda-powertools' batch processor), so only it is retried, and after
maxReceiveCount receives it goes to the dead-letter queue. Created objects are ingested; removed objects
withdraw their documents. Ingestion is idempotent (sha256), so a message delivered twice is harmless.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from ingest.pipeline import Ingestor, IngestResult
from ingest.worker.s3_events import ObjectChange, object_changes

log = logging.getLogger("kosha.worker")


class IngestFailed(Exception):
    """Raised for a record whose object could not be ingested, so the batch reports it as failed."""


class RecordProcessor:
    def __init__(
        self, ingestor: Ingestor, s3: Any, *, max_bytes: int, on_result: Callable[[IngestResult], None] | None = None
    ) -> None:
        self.ingestor = ingestor
        self.s3 = s3
        self.max_bytes = max_bytes
        self.on_result = on_result

    def __call__(self, record: SQSRecord) -> list[IngestResult]:
        results = [self._apply(change) for change in object_changes(record.body)]
        failed = [r for r in results if r.outcome == "failed"]
        if failed:
            raise IngestFailed("; ".join(f"{r.source_uri}: {r.reason}" for r in failed))
        return results

    def _apply(self, change: ObjectChange) -> IngestResult:
        result = self.ingestor.withdraw(change.uri) if change.kind == "removed" else self._ingest(change)
        # A failure is what the ops engineer has to see: WARNING, with the reason (the message is retried,
        # and after the last receive it goes to the dead-letter queue).
        level = logging.WARNING if result.outcome == "failed" else logging.INFO
        log.log(level, "%s %s%s", result.outcome, change.uri, f" ({result.reason})" if result.reason else "")
        if self.on_result:
            self.on_result(result)
        return result

    def _ingest(self, change: ObjectChange) -> IngestResult:
        from ingest.pipeline import IngestResult

        try:
            head = self.s3.head_object(Bucket=change.bucket, Key=change.key)
        except self.s3.exceptions.ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("404", "NoSuchKey", "NotFound"):
                # Removed again before we got here: its ObjectRemoved event will withdraw it.
                return IngestResult(change.uri, "unchanged", reason="the object no longer exists")
            raise
        if head["ContentLength"] > self.max_bytes:
            return IngestResult(
                change.uri,
                "failed",
                reason=(
                    f"the object is {head['ContentLength'] / 1e6:.1f} MB, over the {self.max_bytes / 1e6:.1f} MB "
                    "limit (KB_MAX_FILE_BYTES)"
                ),
            )
        data = self.s3.get_object(Bucket=change.bucket, Key=change.key)["Body"].read()
        return self.ingestor.ingest(data, name=change.key, source_uri=change.uri)


def make_handler(processor: RecordProcessor) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    batch = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

    def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        return dict(process_partial_response(event=event, record_handler=processor, processor=batch, context=context))

    return handler
