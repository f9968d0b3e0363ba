"""The AWS Lambda entry point (infra/template.yaml: ingest.worker.lambda_handler.handler).

The database connection and the embedder are created once per Lambda container, on the first batch.
"""

from __future__ import annotations

from typing import Any

from ingest.aws.clients import client
from ingest.embedders import make_embedder
from ingest.pipeline import Ingestor
from ingest.worker.handler import RecordProcessor, make_handler
from kb_server.db.targets import resolve_database
from kb_server.settings import load_settings

_handler = None


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _handler
    if _handler is None:
        settings = load_settings()
        targets = resolve_database(settings.database)
        ingestor = Ingestor(targets.ingest, make_embedder(settings.embedding), max_bytes=settings.aws.max_file_bytes)
        processor = RecordProcessor(ingestor, client("s3", settings.aws), max_bytes=settings.aws.max_file_bytes)
        _handler = make_handler(processor)
    return _handler(event, context)
