"""infra/local/aws_init.py (the compose stack's `aws-init` job) against a real moto server on 127.0.0.1.

It must build locally what infra/template.yaml declares in AWS: S3 events of both kinds reach the
ingest queue, and a message received 3 times goes to the DLQ on the 4th receive.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

import boto3
import pytest
from moto.server import ThreadedMotoServer

from kb_server.settings import AwsSettings

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "infra" / "local" / "aws_init.py"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def load_script() -> Any:
    spec = importlib.util.spec_from_file_location("aws_init", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def moto_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def client(service: str, endpoint: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1")


def s3_records(sqs: Any, queue_url: str, **receive: Any) -> list[tuple[str, str]]:
    """(eventName, key) of the S3 records received, test events skipped; messages are deleted."""
    found = []
    for _ in range(5):
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, **receive).get("Messages", [])
        for message in messages:
            body = json.loads(message["Body"])
            for record in body.get("Records", []):
                found.append((record["eventName"], unquote_plus(record["s3"]["object"]["key"])))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        if not messages:
            break
    return found


def test_the_job_builds_the_bucket_queues_and_notifications_the_template_declares(moto_endpoint, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    settings = AwsSettings()
    created = load_script().ensure_resources(settings)
    sqs, s3 = client("sqs", moto_endpoint), client("s3", moto_endpoint)

    queue = sqs.get_queue_attributes(QueueUrl=created["queue_url"], AttributeNames=["All"])["Attributes"]
    dlq = sqs.get_queue_attributes(QueueUrl=created["dlq_url"], AttributeNames=["All"])["Attributes"]
    assert queue["VisibilityTimeout"] == "360"
    assert json.loads(queue["RedrivePolicy"]) == {"deadLetterTargetArn": dlq["QueueArn"], "maxReceiveCount": 3}
    assert dlq["MessageRetentionPeriod"] == str(14 * 24 * 3600)
    assert created["queue_url"].endswith("/ingest-queue") and created["dlq_url"].endswith("/ingest-dlq")
    # Not versioned locally: moto sends no event for a delete marker (see the script).
    assert "Status" not in s3.get_bucket_versioning(Bucket="kosha-kb-corpus")

    s3_records(sqs, created["queue_url"])  # drop moto's s3:TestEvent
    s3.put_object(Bucket="kosha-kb-corpus", Key="compliance/CMP-SOP-004 v2.md", Body=b"# doc")
    s3.delete_object(Bucket="kosha-kb-corpus", Key="compliance/CMP-SOP-004 v2.md")
    events = s3_records(sqs, created["queue_url"])
    assert [(name.split(":")[0], key) for name, key in events] == [
        ("ObjectCreated", "compliance/CMP-SOP-004 v2.md"),
        ("ObjectRemoved", "compliance/CMP-SOP-004 v2.md"),
    ]


def test_a_message_received_three_times_moves_to_the_dlq_on_the_fourth_receive(moto_endpoint, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    created = load_script().ensure_resources(AwsSettings())
    sqs = client("sqs", moto_endpoint)
    s3_records(sqs, created["queue_url"])  # drop moto's s3:TestEvent
    sqs.send_message(QueueUrl=created["queue_url"], MessageBody="poison")
    for _ in range(3):  # received and never deleted: the worker failed it
        (message,) = sqs.receive_message(QueueUrl=created["queue_url"], VisibilityTimeout=0)["Messages"]
        assert message["Body"] == "poison"
    assert sqs.receive_message(QueueUrl=created["queue_url"], VisibilityTimeout=0).get("Messages", []) == []
    (dead,) = sqs.receive_message(QueueUrl=created["dlq_url"])["Messages"]
    assert dead["Body"] == "poison"


def test_the_job_can_run_again_on_a_stack_it_already_set_up(moto_endpoint, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    env = {**CREDENTIALS, "AWS_ENDPOINT_URL": moto_endpoint, "PATH": "/usr/bin:/bin"}
    for _ in range(2):
        result = subprocess.run(
            [sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert result.returncode == 0, result.stderr
        assert "local AWS ready" in result.stdout
    s3 = client("s3", moto_endpoint)
    configurations = s3.get_bucket_notification_configuration(Bucket="kosha-kb-corpus")["QueueConfigurations"]
    assert sorted(event for c in configurations for event in c["Events"]) == [
        "s3:ObjectCreated:*",
        "s3:ObjectRemoved:*",
    ]


def test_the_job_refuses_to_touch_real_aws(monkeypatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with pytest.raises(RuntimeError, match="AWS_ENDPOINT_URL is unset"):
        load_script().ensure_resources(AwsSettings())
