"""How `kb aws status` prints: label/value lines, then one line per dead file and per recent outcome."""

from __future__ import annotations

from rich.console import Console

from ingest.queue_status import QueueStatus
from kb_core.settings import Settings

# The worker records a file's failure in the database; with the database down it cannot, and a failure recorded
# for an earlier upload of the same file is not this one's.
UNRECORDED = (
    "no error recorded for this message: the worker could not record one, most likely because the database was "
    "unreachable (its log says why); once that is fixed, `.venv/bin/poe corpus:redrive`"
)


# Without the database (stopped, unreachable) no failure can be looked up: saying each file's error went unrecorded
# told the operator, mid-outage, that bad files needed only a redrive (found walking it).
UNREAD = "its error is not known here: the database was not read (see above); `kb aws status` again once it is up"


def print_status(console: Console, settings: Settings, status: QueueStatus, *, database_read: bool = True) -> None:
    aws = settings.aws
    alarm_colour = "red" if status.alarm_state == "ALARM" else "green" if status.alarm_state == "OK" else "yellow"
    lines = [
        ("ingest queue", f"{status.queue_depth} waiting, {status.in_flight} in flight ({aws.ingest_queue})"),
        (
            "dead letters",
            f"{status.dlq_depth} ({aws.dead_letter_queue}; a file lands here after {aws.max_receive_count} failed "
            f"receives: {aws.retry_delay_s} s apart with `kb worker`, {aws.visibility_timeout_s} s with the Lambda)",
        ),
        ("alarm", f"[{alarm_colour}]{status.alarm_state}[/] {status.alarm_reason}".rstrip()),
    ]
    if status.documents_by_status:
        docs = status.documents_by_status
        lines.append(("document versions", ", ".join(f"{n} {s}" for s, n in sorted(docs.items()))))
    width = max(len(label) for label, _ in lines)
    for label, value in lines:
        console.print(f"[bold]{label:<{width}}[/]  {value}", soft_wrap=True, highlight=False)
    if status.dead:
        # The worker reads the object from the bucket again: a bad file is fixed by uploading a good one (which
        # ingests it by itself), a cause outside the file (database, embedder) by redriving once it is gone.
        console.print(
            "\n[bold]dead-lettered files[/] (a bad file: fix it and `.venv/bin/poe corpus:upload`, then redrive to "
            "clear its dead letter; another cause, such as the database or embedder being down: fix it, then "
            "`.venv/bin/poe corpus:redrive`):",
            soft_wrap=True,
        )
        for dead in status.dead:
            where = dead.source_uri or "(not an S3 event)"
            said = dead.last_error or (UNRECORDED if database_read else UNREAD)
            console.print(f"  {where}: {said}", soft_wrap=True, highlight=False)
            if dead.object_gone:
                console.print(
                    "    since deleted: its object is no longer in the bucket, so there is nothing to fix; "
                    "`.venv/bin/poe corpus:redrive` clears this dead letter (the worker finds nothing to ingest)",
                    soft_wrap=True,
                    highlight=False,
                )
            elif dead.since_ingested:
                console.print(
                    f"    since fixed: {dead.since_ingested} after that failure; "
                    "`.venv/bin/poe corpus:redrive` clears this dead letter (it ingests as unchanged)",
                    soft_wrap=True,
                    highlight=False,
                )
    if status.recent:
        console.print("\n[bold]recent ingest outcomes[/] (newest first):")
        for outcome in status.recent:
            what = f"{outcome.doc_code} v{outcome.version}" if outcome.doc_code else outcome.source_uri
            reason = f": {outcome.detail}" if outcome.detail and outcome.outcome != "ingested" else ""
            times = f" (×{outcome.times})" if outcome.times > 1 else ""
            console.print(
                f"  {outcome.at:%Y-%m-%d %H:%M:%S} {outcome.outcome:<9} {what}{times}{reason}",
                soft_wrap=True,
                highlight=False,
            )
