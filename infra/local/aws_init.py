"""Create the local AWS (moto) resources of the ingestion path, as infra/template.yaml declares them in AWS.

The bucket, ingest-dlq (14 days), ingest-queue (visibility 6 min, to the DLQ after 3 receives)
and the bucket's ObjectCreated/ObjectRemoved notifications to the queue. Names and numbers come from the
same environment variables the product reads (KB_CORPUS_BUCKET, KB_INGEST_QUEUE, ...). Safe to run again.
Run by the `aws-init` service of docker-compose.yml; only ever against AWS_ENDPOINT_URL.
"""

from __future__ import annotations

import json
import sys

import boto3

from kb_server.settings import AwsSettings, ConfigError, describe_validation_error


def ensure_resources(settings: AwsSettings) -> dict[str, str]:
    """Create (or bring up to date) the bucket, the queues and the notifications; return their URLs/names."""
    if not settings.endpoint_url:
        raise RuntimeError("AWS_ENDPOINT_URL is unset: this script only sets up a local AWS (moto)")
    session = boto3.session.Session(region_name=settings.region)
    sqs = session.client("sqs", endpoint_url=settings.endpoint_url)
    s3 = session.client("s3", endpoint_url=settings.endpoint_url)

    dlq_url = sqs.create_queue(QueueName=settings.dead_letter_queue)["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=dlq_url, Attributes={"MessageRetentionPeriod": str(settings.dlq_retention_s)})
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    queue_url = sqs.create_queue(QueueName=settings.ingest_queue)["QueueUrl"]
    sqs.set_queue_attributes(
        QueueUrl=queue_url,
        Attributes={
            "VisibilityTimeout": str(settings.visibility_timeout_s),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(settings.max_receive_count)}
            ),
        },
    )
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    if settings.corpus_bucket not in existing:
        if settings.region == "us-east-1":
            s3.create_bucket(Bucket=settings.corpus_bucket)
        else:
            s3.create_bucket(
                Bucket=settings.corpus_bucket,
                CreateBucketConfiguration={"LocationConstraint": settings.region},
            )
    # Unlike the production bucket, this one is not versioned: on a versioned bucket a plain delete
    # creates a delete marker, and moto 5.2 sends no event for that (S3 sends ObjectRemoved:
    # DeleteMarkerCreated), so deletions would never reach the worker locally.
    s3.put_bucket_notification_configuration(
        Bucket=settings.corpus_bucket,
        NotificationConfiguration={
            "QueueConfigurations": [
                {"Id": "created", "QueueArn": queue_arn, "Events": ["s3:ObjectCreated:*"]},
                {"Id": "removed", "QueueArn": queue_arn, "Events": ["s3:ObjectRemoved:*"]},
            ]
        },
    )
    return {"bucket": settings.corpus_bucket, "queue_url": queue_url, "dlq_url": dlq_url}


def main() -> int:
    from pydantic import ValidationError

    try:
        settings = AwsSettings()
    except ValidationError as exc:
        print(f"error: {ConfigError(describe_validation_error(exc))}", file=sys.stderr)
        return 2
    created = ensure_resources(settings)
    print(
        f"local AWS ready at {settings.endpoint_url}: bucket {created['bucket']} -> "
        f"{settings.ingest_queue} (DLQ {settings.dead_letter_queue} after {settings.max_receive_count} receives)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
