"""The Lambda invocation's deadline, shared by the records of a batch: real SQS messages (moto's server), a real
database and embedder, the real handler. The Lambda runtime cannot run here, so each test passes the handler an
`InvocationClock`, a stand-in for the Lambda context that provides get_remaining_time_in_millis (the only thing
the handler reads from it) from a deadline on this machine's monotonic clock. A file is made slow by a patch
that sleeps before the real parser runs."""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg
from tests.support.documents import markdown_document, write
from tests.worker.conftest import queue_status_of
from tests.worker.test_queue_ingestion import documents, receive

from ingest import pipeline
from ingest.aws.upload import upload_folder
from ingest.worker.handler import RecordProcessor, make_handler
from ingest.worker.poller import lambda_record

RESERVE_S = 4.0  # KB_WORKER_RESERVE_SECONDS for these tests: small, so that they take seconds, not a minute


class InvocationClock:
    """Stands in for the Lambda context: `seconds` from now is the invocation's deadline."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int((self.deadline - time.monotonic()) * 1000)


def slow_parser(monkeypatch, slow: dict[str, float]) -> list[tuple[str, float]]:  # type: ignore[no-untyped-def]
    """Files named in `slow` sleep that long before the real parser runs; returns the (name, parse budget)
    of every parse, in order."""
    real = pipeline.parse_document
    parses: list[tuple[str, float]] = []

    def parse_document(data, name, **limits):  # type: ignore[no-untyped-def]
        parses.append((name, limits["max_parse_seconds"]))
        time.sleep(slow.get(name, 0.0))
        return real(data, name, **limits)

    monkeypatch.setattr(pipeline, "parse_document", parse_document)
    return parses


def invoke(queue, handler, messages, context) -> set[str]:  # type: ignore[no-untyped-def]
    """One invocation as Lambda's SQS event source makes it: the event, then the succeeded messages deleted."""
    event = {"Records": [lambda_record(m, queue.stack.queue_arn, queue.settings.region) for m in messages]}
    response = handler(event, context)
    failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
    done = [m for m in messages if m["MessageId"] not in failed]
    if done:
        entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)]
        queue.sqs.delete_message_batch(QueueUrl=queue.stack.queue_url, Entries=entries)
    return failed


def by_key(messages: list[dict], *names: str) -> list[dict]:  # type: ignore[type-arg]
    return [next(m for m in messages if f"{name}.md" in m["Body"]) for name in names]


def logged(database, outcome: str = "failed") -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    with psycopg.connect(database.ingest) as conn:
        return conn.execute(
            "SELECT source_uri, detail FROM kb.ingest_log WHERE outcome = %s ORDER BY event_id", (outcome,)
        ).fetchall()


def test_records_the_invocation_has_no_time_to_start_are_handed_back_unstarted_before_its_deadline(
    queue, ingestor, database, monkeypatch, tmp_path, caplog
):
    """10 s left, 4 s of them kept: the first file parses for 5.5 s, which leaves the others under 1 s of parse
    budget. They are not started: reported as batch item failures, each with a log line naming the deadline,
    recorded in kb.ingest_log as deferred, not failed; the handler returns before the deadline; SQS delivers
    them again."""
    for name in ("CMP-SOP-901", "CMP-SOP-902", "CMP-SOP-903"):
        write(tmp_path / f"{name}.md", markdown_document(name))
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    batch = by_key(receive(queue, 3), "CMP-SOP-901", "CMP-SOP-902", "CMP-SOP-903")
    # 5.5 s, not 5: after 5 s the next record's budget is 1 s less the first record's own overhead, which
    # rounds to the 1 s minimum (and so starts it) when that overhead is under 50 ms.
    parses = slow_parser(monkeypatch, {"CMP-SOP-901.md": 5.5})
    handler = make_handler(RecordProcessor(ingestor, queue.s3, max_bytes=2_000_000, reserve_s=RESERVE_S))
    context = InvocationClock(10.0)

    with caplog.at_level(logging.INFO, logger="kosha.worker"):
        failed = invoke(queue, handler, batch, context)
    assert context.get_remaining_time_in_millis() > 0, "the handler returned after the invocation's deadline"

    assert failed == {batch[1]["MessageId"], batch[2]["MessageId"]}
    assert [name for name, _ in parses] == ["CMP-SOP-901.md"]  # the others were never parsed
    assert list(documents(database)) == ["CMP-SOP-901"]
    bucket = queue.settings.corpus_bucket
    assert logged(database) == []  # handed back is not failed
    deferred = logged(database, "deferred")
    assert [uri for uri, _ in deferred] == [f"s3://{bucket}/CMP-SOP-902.md", f"s3://{bucket}/CMP-SOP-903.md"]
    assert all(detail.startswith("not started: the invocation's deadline is") for _, detail in deferred)
    not_started = [r.getMessage() for r in caplog.records if r.name == "kosha.worker" and r.levelno == logging.WARNING]
    assert [line.split(": ")[0] for line in not_started] == [
        f"not started s3://{bucket}/CMP-SOP-902.md",
        f"not started s3://{bucket}/CMP-SOP-903.md",
    ]
    assert all("invocation's deadline" in line and "KB_WORKER_RESERVE_SECONDS" in line for line in not_started)
    assert all("(receive 1 of this message)" in line for line in not_started)
    assert not any(r.name == "kosha.worker" and r.getMessage().startswith("failed") for r in caplog.records)

    again = receive(queue, 2, timeout=20)  # after the queue's 2 s visibility timeout
    assert sorted(m["MessageId"] for m in again) == sorted(failed)
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in again} == {"2"}


def test_a_record_handed_back_starts_first_in_its_next_batch_so_a_fine_file_is_not_driven_to_the_dlq(
    queue, ingestor, database, monkeypatch, tmp_path
):
    """A fine file lands behind a slow one and is handed back; delivered again, it arrives behind another slow
    file. It starts first (it has been received more often) and is ingested with the budget the batch's first
    record gets; the new slow file gets what is left after it, and is the one delivered again."""
    for name in ("CMP-SOP-901", "CMP-SOP-902"):
        write(tmp_path / f"{name}.md", markdown_document(name))
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    slow, fine = by_key(receive(queue, 2), "CMP-SOP-901", "CMP-SOP-902")
    parses = slow_parser(monkeypatch, {"CMP-SOP-901.md": 5.5, "CMP-SOP-903.md": 7.0})
    handler = make_handler(RecordProcessor(ingestor, queue.s3, max_bytes=2_000_000, reserve_s=RESERVE_S))
    assert invoke(queue, handler, [slow, fine], InvocationClock(10.0)) == {fine["MessageId"]}

    write(tmp_path / "CMP-SOP-903.md", markdown_document("CMP-SOP-903"))
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    new_slow, fine_again = by_key(receive(queue, 2, timeout=20), "CMP-SOP-903", "CMP-SOP-902")
    assert (new_slow["Attributes"]["ApproximateReceiveCount"], fine_again["Attributes"]["ApproximateReceiveCount"]) == (
        "1",
        "2",
    )
    # Delivered in this order, the new slow file first: the fine one still starts first.
    assert invoke(queue, handler, [new_slow, fine_again], InvocationClock(10.0)) == {new_slow["MessageId"]}
    assert sorted(documents(database)) == ["CMP-SOP-901", "CMP-SOP-902"]
    assert [name for name, _ in parses[:2]] == ["CMP-SOP-901.md", "CMP-SOP-902.md"]
    assert 5.0 <= parses[1][1] <= 6.0  # the fine file's budget: 10 s left less the 4 s reserve (less its download)


def test_a_file_over_its_shortened_budget_fails_with_the_budget_named_and_nothing_stored(
    queue, ingestor, database, monkeypatch, tmp_path, caplog
):
    """6.5 s left less the 4 s reserve: the file's parse budget is cut from KB_MAX_PARSE_SECONDS (120) to under
    2.5 s. It parses for 3 s and fails with the one-line budget error, which names the cut budget and the
    settings that made it; nothing of it is stored, and the failure is recorded for `kb aws status`."""
    write(tmp_path / "CMP-SOP-901.md", markdown_document("CMP-SOP-901"))
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    (message,) = receive(queue, 1)
    parses = slow_parser(monkeypatch, {"CMP-SOP-901.md": 3.0})
    handler = make_handler(RecordProcessor(ingestor, queue.s3, max_bytes=2_000_000, reserve_s=RESERVE_S))

    with caplog.at_level(logging.INFO, logger="kosha.worker"):
        assert invoke(queue, handler, [message], InvocationClock(6.5)) == {message["MessageId"]}

    ((name, budget),) = parses
    assert name == "CMP-SOP-901.md" and 1.0 <= budget <= 2.5 and ingestor.max_parse_seconds == 120
    uri = f"s3://{queue.settings.corpus_bucket}/CMP-SOP-901.md"
    ((logged_uri, detail),) = logged(database)
    assert logged_uri == uri and "\n" not in detail
    assert detail.startswith(f"parsing the document took longer than the {budget:g} s limit (KB_MAX_PARSE_SECONDS 120 ")
    assert "cut to the invocation's time left less KB_WORKER_RESERVE_SECONDS 4), at its chunking" in detail
    warnings = [r.getMessage() for r in caplog.records if r.name == "kosha.worker" and r.levelno == logging.WARNING]
    assert warnings == [f"failed {uri}: {detail}"]  # one line per file, as make run logs it
    assert documents(database) == {}
    with psycopg.connect(database.ingest) as conn:
        assert conn.execute("SELECT count(*) FROM kb.chunks").fetchone()[0] == 0


def test_without_a_lambda_context_a_record_keeps_its_whole_budget(queue, ingestor, database, monkeypatch, tmp_path):
    """`kb worker` calls the handler with no context: no deadline, KB_MAX_PARSE_SECONDS whole."""
    write(tmp_path / "CMP-SOP-901.md", markdown_document("CMP-SOP-901"))
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    parses = slow_parser(monkeypatch, {})
    handler = make_handler(RecordProcessor(ingestor, queue.s3, max_bytes=2_000_000, reserve_s=RESERVE_S))
    assert invoke(queue, handler, receive(queue, 1), None) == set()
    assert parses == [("CMP-SOP-901.md", 120)] and list(documents(database)) == ["CMP-SOP-901"]


def test_a_message_handed_back_on_every_receive_reaches_the_dlq_with_the_deadline_as_its_reason(
    queue, ingestor, database, tmp_path
):
    """The worst case the order cannot prevent (invocations that never have time for it): after 3 receives the
    message is dead-lettered, and `kb aws status` gives the invocation's deadline as its last error, not
    'no error recorded'."""
    write(tmp_path / "CMP-SOP-901.md", markdown_document("CMP-SOP-901"))
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    handler = make_handler(RecordProcessor(ingestor, queue.s3, max_bytes=2_000_000, reserve_s=RESERVE_S))
    for _ in range(3):
        (message,) = receive(queue, 1, timeout=20)
        assert invoke(queue, handler, [message], InvocationClock(RESERVE_S)) == {message["MessageId"]}
    assert receive(queue, 1, timeout=4) == []  # the 4th receive moved it to the DLQ

    def status_now() -> Any:
        return queue_status_of(queue, database.ingest, s3=True)

    status = status_now()
    ((dead),) = status.dead
    assert dead.source_uri == f"s3://{queue.settings.corpus_bucket}/CMP-SOP-901.md"
    assert (dead.last_error or "").startswith("not started: the invocation's deadline is")
    assert "(receive 3 of this message)" in (dead.last_error or "")
    assert [o.outcome for o in status.recent] == ["deferred"] * 3 and documents(database) == {}

    # Its object deleted since, the dead letter is marked so: there is no file left to fix (found walking it,
    # status still advised an upload). While the object was there, it was not.
    assert dead.object_gone is False
    queue.s3.delete_object(Bucket=queue.settings.corpus_bucket, Key="CMP-SOP-901.md")
    (gone,) = status_now().dead
    assert gone.object_gone is True
