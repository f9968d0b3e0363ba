"""S3 event notifications as they arrive in an SQS message body."""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import unquote_plus


class MalformedEvent(ValueError):
    pass


@dataclass(frozen=True)
class ObjectChange:
    kind: str  # 'created' | 'removed'
    bucket: str
    key: str

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def object_changes(body: str) -> list[ObjectChange]:
    """The object changes in one message; [] for S3's test event. Keys arrive URL-encoded (with '+' for
    spaces, and locally even '/' as %2F), so they are decoded here."""
    try:
        message = json.loads(body)
    except json.JSONDecodeError as exc:
        raise MalformedEvent(f"the message body is not JSON: {exc.msg}") from None
    if not isinstance(message, dict):
        raise MalformedEvent("the message body is not an S3 event notification")
    if message.get("Event") == "s3:TestEvent":
        return []
    changes = []
    for record in message.get("Records", []):
        name = str(record.get("eventName", ""))
        try:
            bucket = record["s3"]["bucket"]["name"]
            key = unquote_plus(record["s3"]["object"]["key"])
        except (KeyError, TypeError):
            raise MalformedEvent("an S3 record without s3.bucket.name or s3.object.key") from None
        if name.startswith("ObjectCreated"):
            changes.append(ObjectChange("created", bucket, key))
        elif name.startswith("ObjectRemoved"):
            changes.append(ObjectChange("removed", bucket, key))
    if not changes and "Records" not in message:
        raise MalformedEvent("the message body is not an S3 event notification (no Records)")
    return changes
