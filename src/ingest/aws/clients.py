"""boto3 clients from the AWS settings: AWS_ENDPOINT_URL set means the local AWS (moto), unset real AWS."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from kb_core.settings import AwsSettings


def client(service: str, settings: AwsSettings, **config: Any) -> Any:
    retries = {"max_attempts": 5, "mode": "standard"}
    return boto3.client(
        service,
        region_name=settings.region,
        endpoint_url=settings.endpoint_url,
        config=Config(retries=retries, connect_timeout=5, read_timeout=settings.wait_time_s + 10, **config),
    )


def object_missing(exc: BaseException) -> bool:
    """Whether a boto3 error says the object (or key) does not exist."""
    code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
    return code in ("404", "NoSuchKey", "NotFound")


def object_exists(s3: Any, uri: str) -> bool:
    """Whether s3://bucket/key is in the bucket; an error other than "no such key" is raised."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    try:
        s3.head_object(Bucket=bucket, Key=key)
    except Exception as exc:
        if object_missing(exc):
            return False
        raise
    return True


def object_gone(s3: Any, uri: str) -> bool:
    """Whether s3://bucket/key no longer exists (an error of another kind says nothing: not gone)."""
    try:
        return not object_exists(s3, uri)
    except Exception:
        return False


def queue_url(sqs: Any, name: str) -> str:
    return str(sqs.get_queue_url(QueueName=name)["QueueUrl"])


def queue_arn(sqs: Any, url: str) -> str:
    return str(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])
