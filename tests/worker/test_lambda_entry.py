"""The Lambda entry point: secrets from Secrets Manager at cold start, then the same handler as the local
worker, on an event made from real SQS messages (moto's server)."""

from __future__ import annotations

import psycopg
from psycopg import conninfo as pg_conninfo
from tests.support.documents import markdown_document, write
from tests.worker.test_queue_ingestion import receive

from ingest.aws.clients import client
from ingest.aws.upload import upload_folder
from ingest.worker import lambda_handler
from ingest.worker.poller import lambda_record


def test_a_cold_start_reads_its_secrets_and_ingests_the_batch(queue, database, monkeypatch, tmp_path):
    params = pg_conninfo.conninfo_to_dict(database.ingest)
    ingest_url = f"postgresql://kb_ingest@/{params['dbname']}?host={params['host']}"
    secrets = client("secretsmanager", queue.settings)
    database_arn = secrets.create_secret(Name=f"{queue.settings.ingest_queue}-db", SecretString=ingest_url)["ARN"]
    openai_arn = secrets.create_secret(Name=f"{queue.settings.ingest_queue}-openai", SecretString="sk-not-used")["ARN"]
    for name, value in {
        **queue.env(),
        "KB_INGEST_DATABASE_URL_SECRET_ARN": database_arn,
        "KB_OPENAI_API_KEY_SECRET_ARN": openai_arn,
    }.items():
        monkeypatch.setenv(name, value)
    for target in ("DATABASE_URL", "KB_INGEST_DATABASE_URL", "OPENAI_API_KEY"):
        monkeypatch.setenv(target, "")  # the handler sets them; monkeypatch removes them again afterwards
    monkeypatch.setattr(lambda_handler, "_handler", None)  # a cold container

    write(tmp_path / "CMP-SOP-901.md", markdown_document("CMP-SOP-901"))
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    messages = receive(queue, 1)
    event = {"Records": [lambda_record(m, queue.stack.queue_arn, "us-east-1") for m in messages]}
    response = lambda_handler.handler(event, None)

    import os

    assert response == {"batchItemFailures": []}
    assert os.environ["KB_INGEST_DATABASE_URL"] == ingest_url and os.environ["OPENAI_API_KEY"] == "sk-not-used"
    with psycopg.connect(database.ingest) as conn:
        assert conn.execute("SELECT doc_code FROM kb.documents").fetchall() == [("CMP-SOP-901",)]
