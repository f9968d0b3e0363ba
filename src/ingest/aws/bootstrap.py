"""Create (or update) the ingestion path: bucket → notification → ingest-queue (→ ingest-dlq), and the
alarm on the DLQ. Safe to run again. Production has infra/template.yaml; this is what the local stack
and `kb aws bootstrap` use."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ingest.aws.clients import client, queue_arn
from kb_core.settings import AwsSettings

ALARM_NAME = "ingest-dlq-not-empty"
TOPIC_NAME = "kosha-kb-ingest-alarms"


@dataclass(frozen=True)
class Stack:
    bucket: str
    queue_url: str
    queue_arn: str
    dlq_url: str
    dlq_arn: str
    alarm_name: str
    topic_arn: str


def _queue(sqs: Any, name: str, attributes: dict[str, str]) -> str:
    try:
        url = str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])
    except sqs.exceptions.QueueNameExists:
        url = str(sqs.get_queue_url(QueueName=name)["QueueUrl"])
    sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes)
    return url


def bootstrap(settings: AwsSettings) -> Stack:
    s3, sqs = client("s3", settings), client("sqs", settings)
    try:
        if settings.region == "us-east-1":
            s3.create_bucket(Bucket=settings.corpus_bucket)
        else:
            s3.create_bucket(
                Bucket=settings.corpus_bucket, CreateBucketConfiguration={"LocationConstraint": settings.region}
            )
    except (s3.exceptions.BucketAlreadyOwnedByYou, s3.exceptions.BucketAlreadyExists):
        pass
    dlq_url = _queue(sqs, settings.dead_letter_queue, {"MessageRetentionPeriod": str(settings.dlq_retention_s)})
    dlq = queue_arn(sqs, dlq_url)
    url = _queue(
        sqs,
        settings.ingest_queue,
        {
            "VisibilityTimeout": str(settings.visibility_timeout_s),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq, "maxReceiveCount": settings.max_receive_count}),
        },
    )
    arn = queue_arn(sqs, url)
    sqs.set_queue_attributes(
        QueueUrl=url,
        Attributes={
            "Policy": json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "s3.amazonaws.com"},
                            "Action": "sqs:SendMessage",
                            "Resource": arn,
                            "Condition": {"ArnLike": {"aws:SourceArn": f"arn:aws:s3:::{settings.corpus_bucket}"}},
                        }
                    ],
                }
            )
        },
    )
    s3.put_bucket_notification_configuration(
        Bucket=settings.corpus_bucket,
        NotificationConfiguration={
            "QueueConfigurations": [
                {"QueueArn": arn, "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]},
            ]
        },
    )
    topic = client("sns", settings).create_topic(Name=TOPIC_NAME)["TopicArn"]
    client("cloudwatch", settings).put_metric_alarm(
        AlarmName=ALARM_NAME,
        AlarmDescription="A document failed ingestion 3 times and is in the dead-letter queue (`kb aws status` "
        "gives the reason): a bad file is fixed by uploading a good one, another cause by fixing it; either way "
        "`poe corpus:redrive` then clears the queue and this alarm.",
        Namespace="AWS/SQS",
        MetricName="ApproximateNumberOfMessagesVisible",
        Dimensions=[{"Name": "QueueName", "Value": settings.dead_letter_queue}],
        Statistic="Maximum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=0,
        ComparisonOperator="GreaterThanThreshold",
        TreatMissingData="notBreaching",
        AlarmActions=[topic],
    )
    return Stack(settings.corpus_bucket, url, arn, dlq_url, dlq, ALARM_NAME, topic)
