"""The AWS Lambda entry point (infra/template.yaml: ingest.worker.lambda_handler.handler).

Secrets are read at cold start from AWS Secrets Manager with powertools' parameters utility (never put in
the function's configuration): the secret named by KB_INGEST_DATABASE_URL_SECRET_ARN holds the kb_ingest
login's URL, the one named by KB_OPENAI_API_KEY_SECRET_ARN the OpenAI key. The database connection and the
embedder are then created once per Lambda container, on the first batch.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ingest.worker.handler import RecordProcessor, make_handler

_handler = None
SECRETS = {
    "KB_INGEST_DATABASE_URL_SECRET_ARN": ("DATABASE_URL", "KB_INGEST_DATABASE_URL"),
    "KB_OPENAI_API_KEY_SECRET_ARN": ("OPENAI_API_KEY",),
}


def load_secrets() -> None:
    from aws_lambda_powertools.utilities import parameters

    for arn_variable, targets in SECRETS.items():
        arn = os.environ.get(arn_variable)
        if arn:
            value = str(parameters.get_secret(arn, max_age=3600)).strip()
            for target in targets:
                os.environ[target] = value


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _handler
    if _handler is None:
        from ingest.aws.clients import client
        from ingest.pipeline import Ingestor
        from kb_core.db.targets import resolve_database
        from kb_core.embedders import make_embedder
        from kb_core.process_memory import limit_malloc_arenas
        from kb_core.settings import load_settings, misspelt_variables

        limit_malloc_arenas()  # before the parse and model threads start
        # The product's INFO lines (a large file's embedding progress) reach the runtime's handler, whose root
        # logger lets only warnings through by default.
        logging.getLogger("kosha").setLevel(logging.INFO)
        load_secrets()
        settings = load_settings()
        for warning in misspelt_variables(os.environ):  # the function's configuration: said once, at cold start
            logging.getLogger("kosha.worker").warning(warning)
        targets = resolve_database(settings.database)
        ingestor = Ingestor.from_settings(targets.ingest, make_embedder(settings.embedding, bulk=True), settings.aws)
        processor = RecordProcessor(
            ingestor,
            client("s3", settings.aws),
            max_bytes=settings.aws.max_file_bytes,
            reserve_s=settings.aws.worker_reserve_seconds,
        )
        _handler = make_handler(processor)
    return _handler(event, context)
