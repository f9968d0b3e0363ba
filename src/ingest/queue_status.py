"""What `kb aws status` shows the ops engineer: the queues, what is dead and why, the alarm, recent outcomes.

The dead-letter queue is read without consuming it: its messages are received, then made visible again
at once, so a redrive right after sees them all. Each dead message's object key comes from its S3 event;
its last error is the newest failure the writer recorded for that object (kb.ingest_log), or the newest hand-back
('deferred': the Lambda worker's invocation had no time left to start it) if that came later. A dead message
whose object was ingested after that failure (a good file uploaded over the bad one) is marked as such: it is
stale, and only a redrive (which ingests it as unchanged) takes it, and the alarm, away. So is one whose object
has been deleted since: there is no file left to fix, and a redrive finds nothing to ingest.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from ingest.aws.bootstrap import ALARM_NAME
from ingest.aws.clients import object_gone, queue_url
from ingest.worker.s3_events import MalformedEvent, object_changes

PEEK_LIMIT = 50
# A failure recorded this long before its dead message was sent is an earlier upload's (clocks of the queue and
# the database may differ by a little).
CLOCK_SLACK = timedelta(seconds=5)
REPEATS_READ = 4  # recent outcomes are read this many times over, to show as many once repeats are collapsed


@dataclass(frozen=True)
class DeadMessage:
    source_uri: str | None  # None when the body is not an S3 event
    receives: int
    last_error: str | None
    # "CMP-SOP-091 v1.0 was ingested from it" or "... was found already stored (unchanged) in it": what reading its
    # object gave after the failure
    since_ingested: str | None = None
    object_gone: bool = False  # its object is no longer in the bucket (deleted since)
    # The newest failure recorded for its object predates this message: an earlier upload's, not its own. Its own
    # went unrecorded (the database was down, or the worker stopped mid-file).
    only_earlier_error: bool = False


@dataclass(frozen=True)
class Outcome:
    at: datetime
    outcome: str
    source_uri: str
    doc_code: str | None
    version: str | None
    detail: str | None
    times: int = 1  # this outcome, in a row: a file that fails is received 3 times, each recorded


@dataclass
class QueueStatus:
    queue_depth: int
    in_flight: int
    dlq_depth: int
    dead: list[DeadMessage] = field(default_factory=list)
    alarm_state: str = "unknown"
    alarm_reason: str = ""
    recent: list[Outcome] = field(default_factory=list)
    documents_by_status: dict[str, int] = field(default_factory=dict)


def _depths(sqs: Any, url: str) -> tuple[int, int]:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return int(attributes.get(names[0], 0)), int(attributes.get(names[1], 0))


def peek_dead_letters(sqs: Any, dlq_url: str, limit: int = PEEK_LIMIT) -> list[tuple[str | None, int, datetime | None]]:
    """(source URI, receive count, when it was first sent) of up to `limit` DLQ messages, leaving every one of
    them in the queue."""
    seen: dict[str, tuple[str | None, int, datetime | None]] = {}
    handles: list[str] = []
    try:
        while len(seen) < limit:
            messages = sqs.receive_message(
                QueueUrl=dlq_url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=30,
                WaitTimeSeconds=0,
                AttributeNames=["ApproximateReceiveCount", "SentTimestamp"],
            ).get("Messages", [])
            if not messages:
                break
            for message in messages:
                handles.append(message["ReceiptHandle"])
                try:
                    changes = object_changes(message["Body"])
                except MalformedEvent:
                    changes = []
                uri = changes[0].uri if changes else None
                # The count kept by the DLQ is of receives there; the ingest queue's were maxReceiveCount.
                attributes = message.get("Attributes", {})
                sent = attributes.get("SentTimestamp")
                sent_at = datetime.fromtimestamp(int(sent) / 1000, UTC) if str(sent).isdigit() else None
                seen[message["MessageId"]] = (uri, int(attributes.get("ApproximateReceiveCount", 0)), sent_at)
    finally:
        for start in range(0, len(handles), 10):
            entries = [
                {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
                for i, h in enumerate(handles[start : start + 10])
            ]
            with contextlib.suppress(Exception):
                sqs.change_message_visibility_batch(QueueUrl=dlq_url, Entries=entries)
    return list(seen.values())


def _alarm(cloudwatch: Any, dlq_depth: int, local: bool) -> tuple[str, str]:
    try:
        alarms = cloudwatch.describe_alarms(AlarmNames=[ALARM_NAME])["MetricAlarms"]
    except Exception as exc:
        return "unknown", f"could not read the alarm ({exc.__class__.__name__})"
    if not alarms:
        return "missing", f"no alarm {ALARM_NAME}: run `kb aws bootstrap`"
    state, reason = alarms[0]["StateValue"], alarms[0].get("StateReason", "")
    if local:
        # The local AWS stores alarms but never evaluates them: say what AWS would.
        state = "ALARM" if dlq_depth > 0 else "OK"
        reason = f"computed from the DLQ depth ({dlq_depth}); the local AWS does not evaluate alarms"
    return state, reason


def _recorded(
    conninfo: str, uris: list[str], recent: int
) -> tuple[dict[str, tuple[str, datetime]], dict[str, tuple[str, datetime]], list[Outcome], dict[str, int]]:
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=3) as conn:
        errors: dict[str, tuple[str, datetime]] = {
            uri: (detail, at)
            for uri, detail, at in conn.execute(
                """SELECT DISTINCT ON (source_uri) source_uri, detail, at FROM kb.ingest_log
                   WHERE outcome IN ('failed', 'deferred') AND source_uri = ANY(%s)
                   ORDER BY source_uri, event_id DESC""",
                (uris,),
            ).fetchall()
        }
        ingested: dict[str, tuple[str, datetime]] = {
            # Found walking it: a file put back as it was stored is "unchanged", not "ingested".
            uri: (
                f"{doc_code} v{version} "
                + ("was ingested from it" if outcome == "ingested" else "was found already stored (unchanged) in it"),
                at,
            )
            for uri, outcome, doc_code, version, at in conn.execute(
                """SELECT DISTINCT ON (source_uri) source_uri, outcome, doc_code, version, at FROM kb.ingest_log
                   WHERE source_uri = ANY(%s) AND outcome <> 'deferred'
                   ORDER BY source_uri, event_id DESC""",
                (uris,),
            ).fetchall()
            if outcome in ("ingested", "unchanged") and doc_code
        }
        rows = conn.execute(
            """SELECT at, outcome, source_uri, doc_code, version, detail FROM kb.ingest_log
               ORDER BY event_id DESC LIMIT %s""",
            (recent * REPEATS_READ,),
        ).fetchall()
        counts: dict[str, int] = dict(
            conn.execute("SELECT status::text, count(*) FROM kb.documents GROUP BY 1").fetchall()
        )
    return errors, ingested, collapsed([Outcome(*row) for row in rows])[:recent], counts


def collapsed(outcomes: list[Outcome]) -> list[Outcome]:
    """One file's same outcome and reason as one line with a count, at its newest time (outcomes come newest
    first): a failing file's three receives filled three of the ten lines shown, and several failing files'
    receives, interleaved, all of them."""
    lines: dict[tuple[str, str, str | None], Outcome] = {}
    for outcome in outcomes:
        key = (outcome.source_uri, outcome.outcome, outcome.detail)
        lines[key] = replace(lines[key], times=lines[key].times + 1) if key in lines else outcome
    return list(lines.values())


def queue_status(
    sqs: Any,
    cloudwatch: Any,
    *,
    ingest_queue: str,
    dead_letter_queue: str,
    local: bool,
    ingest_conninfo: str | None,
    recent: int = 10,
    s3: Any | None = None,
) -> QueueStatus:
    """`s3`: the bucket's client, to mark the dead letters whose object is gone; None leaves them unmarked."""
    url, dlq = queue_url(sqs, ingest_queue), queue_url(sqs, dead_letter_queue)
    depth, in_flight = _depths(sqs, url)
    dlq_depth, dlq_hidden = _depths(sqs, dlq)
    dead = peek_dead_letters(sqs, dlq)
    status = QueueStatus(depth, in_flight, dlq_depth + dlq_hidden)
    status.alarm_state, status.alarm_reason = _alarm(cloudwatch, status.dlq_depth, local)
    errors: dict[str, tuple[str, datetime]] = {}
    ingested: dict[str, tuple[str, datetime]] = {}
    if ingest_conninfo is not None:
        uris = [uri for uri, _, _ in dead if uri]
        errors, ingested, status.recent, status.documents_by_status = _recorded(ingest_conninfo, uris, recent)
    for uri, receives, sent_at in dead:
        if not uri:
            status.dead.append(DeadMessage(None, receives, None))
            continue
        detail, failed_at = errors.get(uri, (None, None))
        earlier = _before(failed_at, sent_at)
        # Fixed since only by an ingestion after this message was sent: one before it says nothing of this
        # upload (found walking it: the version stored before an outage was called the fix of the upload that
        # failed in it, unrecorded).
        fixed, fixed_at = ingested.get(uri, (None, None))
        if _before(fixed_at, sent_at):
            fixed = None
        status.dead.append(
            DeadMessage(
                uri,
                receives,
                None if earlier else detail,
                fixed,
                s3 is not None and object_gone(s3, uri),
                only_earlier_error=earlier,
            )
        )
    return status


def _before(recorded: datetime | None, sent_at: datetime | None) -> bool:
    """Whether an ingest_log event was recorded before a dead message was sent: an earlier upload's."""
    return recorded is not None and sent_at is not None and recorded < sent_at - CLOCK_SLACK
