from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any

import pytest

from ingest.aws.bootstrap import Stack, bootstrap
from ingest.aws.clients import client
from ingest.aws.local_stack import LocalAws
from ingest.pipeline import Ingestor
from ingest.queue_status import queue_status
from ingest.worker.handler import RecordProcessor, make_handler
from ingest.worker.poller import SqsWorker
from kb_core.settings import AwsSettings

_names = itertools.count()


@pytest.fixture(scope="session")
def local_aws():
    """moto's server on loopback: the real S3/SQS wire protocol."""
    with LocalAws(port=0) as aws:
        yield aws


@dataclass
class Queue:
    settings: AwsSettings
    stack: Stack
    sqs: object
    s3: object

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.settings.endpoint_url or "",
            "AWS_REGION": self.settings.region,
            "AWS_DEFAULT_REGION": self.settings.region,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "KB_CORPUS_BUCKET": self.settings.corpus_bucket,
            "KB_INGEST_QUEUE": self.settings.ingest_queue,
            "KB_INGEST_DLQ": self.settings.dead_letter_queue,
            "KB_QUEUE_VISIBILITY_TIMEOUT_S": str(self.settings.visibility_timeout_s),
            "KB_WORKER_WAIT_TIME_S": str(self.settings.wait_time_s),
        }


@pytest.fixture
def queue(local_aws) -> Queue:
    """A bucket and queues of their own, with a short visibility timeout so retries come quickly."""
    n = next(_names)
    settings = AwsSettings(
        AWS_ENDPOINT_URL=local_aws.endpoint_url,
        KB_CORPUS_BUCKET=f"corpus-{os.getpid()}-{n}",
        # Each test process (pytest-xdist runs two) may share the one moto server: names carry the process id,
        # or two processes' tests would send to, receive from and purge each other's queues.
        KB_INGEST_QUEUE=f"ingest-{os.getpid()}-{n}",
        KB_INGEST_DLQ=f"dlq-{os.getpid()}-{n}",
        KB_QUEUE_VISIBILITY_TIMEOUT_S=2,
        KB_WORKER_WAIT_TIME_S=1,
    )
    stack = bootstrap(settings)
    sqs = client("sqs", settings)
    sqs.purge_queue(QueueUrl=stack.queue_url)  # S3 sends an s3:TestEvent when the notification is set up
    return Queue(settings, stack, sqs, client("s3", settings))


def worker_for(queue: Queue, ingestor: Ingestor, *, max_bytes: int = 2_000_000, on_result=None) -> SqsWorker:  # type: ignore[no-untyped-def]
    processor = RecordProcessor(ingestor, queue.s3, max_bytes=max_bytes, on_result=on_result)
    return SqsWorker(
        queue.sqs,
        queue.stack.queue_url,
        queue.stack.queue_arn,
        make_handler(processor),
        region=queue.settings.region,
        batch_size=5,
        wait_time_s=1,
        max_backoff_s=1,
    )


def queue_status_of(queue: Queue, ingest_conninfo: str, *, s3: bool = False) -> Any:
    """What `kb aws status` reports, read as it reads it (`s3`: marking dead letters whose object is gone)."""
    return queue_status(
        queue.sqs,
        client("cloudwatch", queue.settings),
        ingest_queue=queue.settings.ingest_queue,
        dead_letter_queue=queue.settings.dead_letter_queue,
        local=True,
        ingest_conninfo=ingest_conninfo,
        s3=queue.s3 if s3 else None,
    )
