"""S3 → SQS → worker → PostgreSQL, against moto's server (the real AWS wire protocol) and a real database."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, date, datetime, timedelta

import psycopg
import pytest
from tests.conftest import REPO
from tests.support.documents import markdown_document, write
from tests.worker.conftest import queue_status_of, worker_for

from ingest.aws.redrive import redrive
from ingest.aws.upload import upload_folder
from ingest.queue_status import Outcome, collapsed
from ingest.worker.handler import RecordProcessor, make_handler
from kb_core.roles import Role

HERE = REPO / "tests" / "worker"


def documents(database) -> dict[str, str]:  # type: ignore[no-untyped-def]
    with psycopg.connect(database.ingest) as conn:
        return dict(conn.execute("SELECT doc_code, source_uri FROM kb.documents").fetchall())


def statuses(database) -> dict[str, str]:  # type: ignore[no-untyped-def]
    with psycopg.connect(database.ingest) as conn:
        return dict(conn.execute("SELECT doc_code, status::text FROM kb.documents").fetchall())


def run_until(worker, condition, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    worker.run(until=lambda: condition() or time.monotonic() > deadline)
    assert condition(), "timed out"


def receive(queue, count: int, timeout: float = 20) -> list[dict]:  # type: ignore[no-untyped-def,type-arg]
    messages: list[dict] = []  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while len(messages) < count and time.monotonic() < deadline:
        messages += queue.sqs.receive_message(
            QueueUrl=queue.stack.queue_url,
            MaxNumberOfMessages=count - len(messages),
            WaitTimeSeconds=1,
            AttributeNames=["All"],
        ).get("Messages", [])
    return messages


def test_the_handler_reports_exactly_the_failed_record_of_a_json_event(ingestor):
    event = json.loads((HERE / "events" / "sqs_batch_test_event_and_garbage.json").read_text())
    handler = make_handler(RecordProcessor(ingestor, s3=None, max_bytes=1_000_000))
    assert handler(event, None) == {"batchItemFailures": [{"itemIdentifier": "2e1424d4-f796-459a-8184-9c92662be6da"}]}


def test_an_uploaded_document_is_ingested_through_the_queue_and_becomes_searchable(queue, ingestor, database, tmp_path):
    write(tmp_path / "compliance" / "CMP-SOP-901.md", markdown_document("CMP-SOP-901"))
    write(tmp_path / "legal" / "LEG-POL-902.md", markdown_document("LEG-POL-902", classification="public"))
    report = upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    assert sorted(report.uploaded) == ["compliance/CMP-SOP-901.md", "legal/LEG-POL-902.md"]
    run_until(worker_for(queue, ingestor), lambda: len(documents(database)) == 2)
    stored = documents(database)
    assert stored["CMP-SOP-901"] == f"s3://{queue.settings.corpus_bucket}/compliance/CMP-SOP-901.md"
    with psycopg.connect(database.reader(Role.DEMO_READONLY), autocommit=True) as conn, conn.transaction():
        conn.execute("SET LOCAL ROLE demo_readonly")
        found = conn.execute(
            "SELECT count(*) FROM kb.searchable_chunks "
            "WHERE tsv @@ websearch_to_tsquery('english', 'reconciliation breaks')"
        ).fetchone()
    assert found[0] == 1  # the public one


def test_only_changed_files_are_uploaded_again(queue, tmp_path):
    write(tmp_path / "a" / "CMP-SOP-901.md", markdown_document("CMP-SOP-901"))
    write(tmp_path / "a" / "CMP-SOP-902.md", markdown_document("CMP-SOP-902"))
    write(tmp_path / "MANIFEST.csv", "not a document")
    first = upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    write(tmp_path / "a" / "CMP-SOP-902.md", markdown_document("CMP-SOP-902", title="Changed Title"))
    second = upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    assert (len(first.uploaded), first.skipped) == (2, ["MANIFEST.csv"])
    assert (second.uploaded, second.unchanged) == (["a/CMP-SOP-902.md"], ["a/CMP-SOP-901.md"])


def test_an_upload_names_the_files_a_worker_will_refuse_and_still_uploads_them(queue, tmp_path):
    # Found walking it: an empty or oversize file was uploaded without a word, and dead-lettered a minute later.
    write(tmp_path / "CMP-SOP-901.md", markdown_document("CMP-SOP-901"))
    write(tmp_path / "empty.md", "")
    write(tmp_path / "big.md", markdown_document("CMP-SOP-902", sections={"1. A": "word " * 3000}))
    report = upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path, max_bytes=10_000)
    assert report.empty == ["empty.md"] and list(report.over_limit) == ["big.md"]
    assert report.over_limit["big.md"] == (tmp_path / "big.md").stat().st_size
    assert sorted(report.uploaded) == ["CMP-SOP-901.md", "big.md", "empty.md"]  # the worker's own limit decides
    # Said when uploaded, not again on every upload of the folder (found walking it).
    again = upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path, max_bytes=10_000)
    assert (again.empty, again.over_limit, len(again.unchanged)) == ([], {}, 3)


def test_an_upload_parses_what_it_uploads_first_and_names_the_files_the_worker_will_refuse(queue, tmp_path):
    # Found walking it: a broken header, a damaged PDF or a version dated after today was only found a minute
    # after the upload, in the dead-letter queue. Uploaded all the same: the worker records the failure.
    write(tmp_path / "CMP-SOP-931.md", markdown_document("CMP-SOP-931"))
    write(tmp_path / "CMP-SOP-932.md", markdown_document("CMP-SOP-932").replace("classification: internal\n", ""))
    write(tmp_path / "CMP-SOP-933.md", markdown_document("CMP-SOP-933", effective_date="2999-01-01"))
    (tmp_path / "scan.pdf").write_bytes(b"%PDF-1.7 random bytes, no objects")
    dry = upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path, dry_run=True, check=True)
    report = upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path, check=True)
    assert dry.refused == report.refused and sorted(report.refused) == ["CMP-SOP-932.md", "scan.pdf"]
    assert "Classification (classification) is missing" in report.refused["CMP-SOP-932.md"]
    # An effective version dated after today is held back, not uploaded: uploaded, it was dead-lettered, and,
    # unchanged since, never sent again on its date (found walking it).
    assert dry.held_back == report.held_back == {"CMP-SOP-933.md": date(2999, 1, 1)}
    assert sorted(report.uploaded) == ["CMP-SOP-931.md", "CMP-SOP-932.md", "scan.pdf"]
    in_bucket = [o["Key"] for o in queue.s3.list_objects_v2(Bucket=queue.settings.corpus_bucket)["Contents"]]
    assert "CMP-SOP-933.md" not in in_bucket
    # Unchanged files are not parsed again: nothing new is said about them; the held-back one is still held.
    again = upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path, check=True)
    assert (again.refused, list(again.held_back)) == ({}, ["CMP-SOP-933.md"])


def test_a_poison_file_in_a_batch_of_five_fails_alone_reaches_the_dlq_and_ingests_after_a_redrive(
    queue, ingestor, database, tmp_path
):
    for n in range(4):
        write(tmp_path / f"CMP-SOP-90{n}.md", markdown_document(f"CMP-SOP-90{n}"))
    poison = markdown_document("CMP-SOP-999", sections={"1. Appendix": "x " * 3000})  # over the worker's limit
    write(tmp_path / "CMP-SOP-999.md", poison)
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    messages = receive(queue, 5)
    assert len(messages) == 5
    worker = worker_for(queue, ingestor, max_bytes=5_000)
    failed = worker.process(messages)
    poison_id = next(m["MessageId"] for m in messages if "CMP-SOP-999" in m["Body"])
    assert failed == {poison_id}
    assert sorted(documents(database)) == [f"CMP-SOP-90{n}" for n in range(4)]

    # Received twice more and still failing, it moves to the DLQ on the next receive (maxReceiveCount 3).
    deadline = time.monotonic() + 60
    dlq = queue.stack.dlq_url
    while time.monotonic() < deadline:
        for message in receive(queue, 1, timeout=3):
            worker.process([message])
        depth = queue.sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["ApproximateNumberOfMessages"])
        if int(depth["Attributes"]["ApproximateNumberOfMessages"]) == 1:
            break
    else:
        pytest.fail("the poison message never reached the DLQ")
    in_dlq = queue.sqs.receive_message(QueueUrl=dlq, AttributeNames=["All"], VisibilityTimeout=0)["Messages"][0]
    assert int(in_dlq["Attributes"]["ApproximateReceiveCount"]) >= 3 and "CMP-SOP-999" in in_dlq["Body"]
    # The status names why, though the worker refused it unread (found walking it: "no error recorded").
    (dead,) = queue_status_of(queue, database.ingest).dead
    assert "over the 4.9 KiB limit (KB_MAX_FILE_BYTES): split the document, or raise" in (dead.last_error or "")

    # The cause is fixed (the size limit is raised); the redrive brings the message back and it ingests.
    said: list[str] = []
    report = redrive(
        queue.sqs,
        dlq_url=dlq,
        dlq_arn=queue.stack.dlq_arn,
        queue_url=queue.stack.queue_url,
        queue_arn=queue.stack.queue_arn,
        local=True,
        say=said.append,
    )
    assert (report.moved, report.status) == (1, "COMPLETED")
    assert "does not implement StartMessageMoveTask" in said[0]
    run_until(worker_for(queue, ingestor, max_bytes=1_000_000), lambda: "CMP-SOP-999" in documents(database))


def test_a_file_that_meets_a_bug_in_the_worker_fails_alone_with_the_error_recorded_for_the_status(
    queue, ingestor, database, tmp_path, monkeypatch
):
    # A bug cannot be met on demand: the ingestor's parse raises a TypeError for one file (a stand-in, as an
    # error class that did not survive its trip back from the parsing process did). The file used to fail with
    # nothing recorded, and `kb aws status` showed its dead letter as "no error recorded".
    write(tmp_path / "CMP-SOP-911.md", markdown_document("CMP-SOP-911"))
    write(tmp_path / "CMP-SOP-912.md", markdown_document("CMP-SOP-912"))
    real_ingest = ingestor.ingest

    def ingest(data, *, name, **kwargs):  # type: ignore[no-untyped-def]
        if "912" in name:
            raise TypeError("__init__() missing 1 required positional argument: 'problem'")
        return real_ingest(data, name=name, **kwargs)

    monkeypatch.setattr(ingestor, "ingest", ingest)
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    messages = receive(queue, 2)
    failed = worker_for(queue, ingestor).process(messages)
    assert failed == {next(m["MessageId"] for m in messages if "CMP-SOP-912" in m["Body"])}
    assert sorted(documents(database)) == ["CMP-SOP-911"]
    with psycopg.connect(database.ingest) as conn:
        (detail,) = conn.execute(
            "SELECT detail FROM kb.ingest_log WHERE outcome = 'failed' AND source_uri LIKE '%CMP-SOP-912.md'"
        ).fetchone()
    assert detail.startswith("unexpected error (TypeError: __init__() missing 1 required positional argument")
    assert detail.endswith("a bug in the worker: report it with its log")


def test_a_dead_letter_whose_only_recorded_failure_is_an_earlier_uploads_says_its_own_went_unrecorded(
    queue, ingestor, database, tmp_path, monkeypatch
):
    # Found walking it: with the database down the worker cannot record why a file failed; its dead letter then
    # showed the failure of an earlier upload of the same file (fixed since) as its reason.
    monkeypatch.setattr("ingest.queue_status.CLOCK_SLACK", timedelta(0))  # the queue and the database share a clock
    uri = f"s3://{queue.settings.corpus_bucket}/CMP-SOP-921.md"
    # Version 1.0 stored from the object, then an upload that failed (recorded), before this message was sent.
    stored = ingestor.ingest(markdown_document("CMP-SOP-921").encode(), name="CMP-SOP-921.md", source_uri=uri)
    assert stored.outcome == "ingested"
    ingestor.log_refused(uri, "an earlier upload's failure")
    write(tmp_path / "CMP-SOP-921.md", markdown_document("CMP-SOP-921", version="1.1"))
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    (message,) = receive(queue, 1)
    # As SQS moves a message after its last receive: the same body, in the dead-letter queue.
    queue.sqs.send_message(QueueUrl=queue.stack.dlq_url, MessageBody=message["Body"])
    queue.sqs.delete_message(QueueUrl=queue.stack.queue_url, ReceiptHandle=message["ReceiptHandle"])
    (dead,) = queue_status_of(queue, database.ingest).dead
    assert (dead.source_uri, dead.last_error, dead.only_earlier_error) == (uri, None, True)
    # Nor is version 1.0, stored before the message was sent, the fix of this upload (found walking it).
    assert dead.since_ingested is None
    # A failure recorded after the message was sent is its own, and is shown.
    ingestor.log_refused(uri, "its own failure")
    (dead,) = queue_status_of(queue, database.ingest).dead
    assert (dead.last_error, dead.only_earlier_error) == ("its own failure", False)


def test_kb_aws_status_shows_a_files_repeated_outcome_once_with_a_count():
    at = datetime(2026, 12, 7, tzinfo=UTC)
    fail = Outcome(at, "failed", "s3://b/x.md", None, None, "bad header")
    other = Outcome(at, "failed", "s3://b/z.md", None, None, "bad header")
    lines = collapsed([fail, other, fail, Outcome(at, "ingested", "s3://b/y.md", "Y", "1.0", None), other, fail])
    # Interleaved, as the receives of several failing files are (found walking it): each file's once.
    assert [(o.source_uri, o.times) for o in lines] == [("s3://b/x.md", 3), ("s3://b/z.md", 2), ("s3://b/y.md", 1)]


def test_a_message_delivered_twice_creates_no_duplicate_and_no_second_embedding_call(
    queue, ingestor, database, counting_embedder, tmp_path
):
    write(tmp_path / "CMP-SOP-901.md", markdown_document("CMP-SOP-901"))
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    (message,) = receive(queue, 1)
    worker = worker_for(queue, ingestor)
    assert worker.process([message]) == set()
    calls = counting_embedder.calls
    assert worker.process([message]) == set()  # at-least-once delivery: the same message again
    assert counting_embedder.calls == calls
    with psycopg.connect(database.ingest) as conn:
        assert conn.execute("SELECT count(*) FROM kb.documents").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM kb.chunks").fetchone()[0] == 2


def two_documents_served(queue, ingestor, database, tmp_path):  # type: ignore[no-untyped-def]
    """CMP-SOP-901 and -902 uploaded from tmp_path and ingested by a worker, which is returned."""
    write(tmp_path / "CMP-SOP-901.md", markdown_document("CMP-SOP-901"))
    write(tmp_path / "CMP-SOP-902.md", markdown_document("CMP-SOP-902"))
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    worker = worker_for(queue, ingestor)
    run_until(worker, lambda: len(documents(database)) == 2)
    return worker


def test_deleting_an_object_withdraws_its_document(queue, ingestor, database, tmp_path):
    worker = two_documents_served(queue, ingestor, database, tmp_path)
    (tmp_path / "CMP-SOP-902.md").unlink()
    report = upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path, delete=True)
    assert report.deleted == ["CMP-SOP-902.md"]
    run_until(worker, lambda: statuses(database) == {"CMP-SOP-901": "effective", "CMP-SOP-902": "withdrawn"})
    with psycopg.connect(database.ingest) as conn:
        live_chunks = conn.execute(
            "SELECT d.doc_code, count(*) FILTER (WHERE c.is_effective) FROM kb.chunks c JOIN kb.documents d "
            "USING (doc_id) GROUP BY 1 ORDER BY 1"
        ).fetchall()
        log = conn.execute("SELECT outcome, doc_code FROM kb.ingest_log WHERE outcome = 'withdrawn'").fetchall()
    assert live_chunks == [("CMP-SOP-901", 2), ("CMP-SOP-902", 0)]  # kept, out of the search indexes
    assert log == [("withdrawn", "CMP-SOP-902")]


def test_a_file_renamed_or_moved_while_served_keeps_its_document_followed_from_its_new_object(
    queue, ingestor, database, tmp_path
):
    # Found walking it as the operator: the new key arrived "unchanged, identical to" the old one, then the old
    # key's removal withdrew the document, and uploading again changed nothing (the bucket already held it).
    worker = two_documents_served(queue, ingestor, database, tmp_path)
    (tmp_path / "archive").mkdir()
    (tmp_path / "CMP-SOP-902.md").rename(tmp_path / "archive" / "CMP-SOP-902.md")
    report = upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path, delete=True)
    assert report.deleted == ["CMP-SOP-902.md"] and report.uploaded == ["archive/CMP-SOP-902.md"]
    bucket = queue.settings.corpus_bucket

    def followed() -> bool:
        with psycopg.connect(database.ingest) as conn:
            return conn.execute("SELECT source_uri FROM kb.documents WHERE doc_code = 'CMP-SOP-902'").fetchone() == (
                f"s3://{bucket}/archive/CMP-SOP-902.md",
            )

    run_until(worker, followed)  # in either order of the two events: a withdrawn version's file reinstates it
    assert statuses(database) == {"CMP-SOP-901": "effective", "CMP-SOP-902": "effective"}
    # A copy kept under both names and then one deleted is the same case; deleting the last one withdraws.
    (tmp_path / "archive" / "CMP-SOP-902.md").unlink()
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path, delete=True)
    run_until(worker, lambda: statuses(database) == {"CMP-SOP-901": "effective", "CMP-SOP-902": "withdrawn"})


def test_the_dlq_alarm_watches_visible_messages(queue):
    from ingest.aws.clients import client

    (alarm,) = client("cloudwatch", queue.settings).describe_alarms(AlarmNames=[queue.stack.alarm_name])["MetricAlarms"]
    assert (alarm["MetricName"], alarm["Namespace"], alarm["Threshold"], alarm["ComparisonOperator"]) == (
        "ApproximateNumberOfMessagesVisible",
        "AWS/SQS",
        0.0,
        "GreaterThanThreshold",
    )
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": queue.settings.dead_letter_queue}]
    assert alarm["AlarmActions"] == [queue.stack.topic_arn]
    attributes = queue.sqs.get_queue_attributes(QueueUrl=queue.stack.queue_url, AttributeNames=["All"])["Attributes"]
    assert json.loads(attributes["RedrivePolicy"]) == {"deadLetterTargetArn": queue.stack.dlq_arn, "maxReceiveCount": 3}


def test_on_aws_the_redrive_uses_a_message_move_task_and_reports_its_progress():
    """moto does not implement StartMessageMoveTask, so this path is checked against botocore's Stubber:
    the calls and their arguments are the real API's, the answers are scripted."""
    import boto3
    from botocore.stub import Stubber

    sqs = boto3.client("sqs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    dlq, queue = "arn:aws:sqs:us-east-1:1:ingest-dlq", "arn:aws:sqs:us-east-1:1:ingest-queue"
    with Stubber(sqs) as stub:
        stub.add_response(
            "start_message_move_task", {"TaskHandle": "task-1"}, {"SourceArn": dlq, "DestinationArn": queue}
        )
        for status, moved in (("RUNNING", 1), ("COMPLETED", 3)):
            stub.add_response(
                "list_message_move_tasks",
                {
                    "Results": [
                        {
                            "Status": status,
                            "ApproximateNumberOfMessagesMoved": moved,
                            "ApproximateNumberOfMessagesToMove": 3,
                            "SourceArn": dlq,
                            "DestinationArn": queue,
                        }
                    ]
                },
                {"SourceArn": dlq, "MaxResults": 1},
            )
        said: list[str] = []
        report = redrive(
            sqs, dlq_url="u", dlq_arn=dlq, queue_url="q", queue_arn=queue, local=False, say=said.append, poll_s=0
        )
        stub.assert_no_pending_responses()
    assert (report.method, report.moved, report.status) == ("message-move-task", 3, "COMPLETED")
    assert said[-1] == "redrive completed: 3 of 3 messages moved"


def test_the_worker_backs_off_while_the_queue_is_unreachable_and_resumes(queue, ingestor, database, tmp_path):
    from ingest.aws.clients import client
    from kb_core.settings import AwsSettings

    down = AwsSettings(AWS_ENDPOINT_URL="http://127.0.0.1:9", KB_WORKER_WAIT_TIME_S=1)
    worker = worker_for(queue, ingestor)
    worker.sqs = client("sqs", down)  # the endpoint is down
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    time.sleep(2)
    write(tmp_path / "CMP-SOP-901.md", markdown_document("CMP-SOP-901"))
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    assert documents(database) == {}
    worker.sqs = queue.sqs  # the endpoint is back
    deadline = time.monotonic() + 60
    while not documents(database) and time.monotonic() < deadline:
        time.sleep(0.5)
    worker.stop.set()
    thread.join(timeout=30)
    assert list(documents(database)) == ["CMP-SOP-901"]


@pytest.mark.parametrize("heartbeat", [True, False], ids=["kept hidden", "control: no heartbeat"])
def test_a_batch_slower_than_the_visibility_timeout_is_not_delivered_again_while_in_hand(queue, heartbeat):
    """The queue's visibility timeout is 2 s; the handler takes 5 s. Another consumer polls all the while:
    with the heartbeat it never sees the message, and the message was received once; without it (the
    control, which shows the test can fail) the message comes back to the other consumer mid-batch."""
    from ingest.worker.poller import SqsWorker

    url = queue.stack.queue_url
    queue.sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"Records": []}))
    started = threading.Event()

    def slow_handler(event, context):  # type: ignore[no-untyped-def]
        started.set()
        time.sleep(5)
        return {"batchItemFailures": []}

    worker = SqsWorker(
        queue.sqs,
        url,
        queue.stack.queue_arn,
        slow_handler,
        region=queue.settings.region,
        wait_time_s=1,
        visibility_timeout_s=queue.settings.visibility_timeout_s if heartbeat else None,
    )
    thread = threading.Thread(target=lambda: worker.run(until=lambda: worker.stats.batches >= 1), daemon=True)
    thread.start()
    assert started.wait(30), "the worker never received the message"
    seen_by_another = receive(queue, 1, timeout=4.5)
    thread.join(30)
    assert worker.stats.batches == 1 and worker.stats.succeeded == 1
    if heartbeat:
        assert seen_by_another == []
        left = queue.sqs.receive_message(QueueUrl=url, WaitTimeSeconds=3).get("Messages", [])
        assert left == [], "the message was not deleted after its batch"
    else:
        assert len(seen_by_another) == 1
        assert seen_by_another[0]["Attributes"]["ApproximateReceiveCount"] == "2"


def test_kb_up_stopping_waits_for_the_batch_in_hand_and_not_for_an_idle_long_poll(queue):
    """Found walking it: Ctrl-C on `make run` mid-ingest stopped the database under the worker thread, and the
    file in hand was reported failed with a database error. Stopping now waits for the batch in hand (and only
    for it: an idle worker's long poll is not waited out)."""
    from rich.console import Console

    from ingest.worker.poller import SqsWorker
    from kb_cli.up import _stop_worker

    url = queue.stack.queue_url
    release, started = threading.Event(), threading.Event()

    def held_handler(event, context):  # type: ignore[no-untyped-def]
        started.set()
        release.wait(30)
        return {"batchItemFailures": []}

    worker = SqsWorker(queue.sqs, url, queue.stack.queue_arn, held_handler, region=queue.settings.region, wait_time_s=5)
    threading.Thread(target=worker.run, daemon=True).start()
    idle = time.monotonic()
    idle_worker = SqsWorker(queue.sqs, url, queue.stack.queue_arn, held_handler, region=queue.settings.region)
    _stop_worker(Console(quiet=True), idle_worker)
    assert time.monotonic() - idle < 1  # nothing in hand: no wait

    queue.sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"Records": []}))
    assert started.wait(30), "the worker never received the message"
    stopping = threading.Thread(target=_stop_worker, args=(Console(quiet=True), worker))
    stopping.start()
    stopping.join(1.5)
    assert stopping.is_alive(), "stopping did not wait for the batch in hand"
    release.set()
    stopping.join(10)
    assert not stopping.is_alive() and not worker.in_hand.is_set()
    assert worker.stats.batches == 1 and worker.stats.succeeded == 1  # finished and deleted, not cut off


def test_a_dead_letters_fix_says_whether_its_file_was_ingested_or_found_already_stored(database):
    # Found walking it as the operator: a file put back as it was stored read "was ingested from it" in
    # `kb aws status`, though the worker had found it unchanged.
    from ingest.queue_status import _recorded
    from ingest.upsert import log_event

    with psycopg.connect(database.ingest) as conn:
        for uri, outcome in (("s3://kb/put-back.md", "unchanged"), ("s3://kb/fixed.md", "ingested")):
            log_event(conn, uri, "failed", detail="bad header")
            log_event(conn, uri, outcome, doc_code="CMP-SOP-901", version="1.0")
    _, since, _, _ = _recorded(database.ingest, ["s3://kb/put-back.md", "s3://kb/fixed.md"], 10)
    assert since["s3://kb/put-back.md"][0] == "CMP-SOP-901 v1.0 was found already stored (unchanged) in it"
    assert since["s3://kb/fixed.md"][0] == "CMP-SOP-901 v1.0 was ingested from it"


def test_an_upload_whose_object_is_deleted_before_the_worker_reads_it_is_logged_skipped(
    queue, ingestor, database, tmp_path
):
    # Found walking it as an operator: a redriven message of a since-deleted object was logged "unchanged s3://…".
    from ingest.pipeline import OBJECT_GONE, result_line

    write(tmp_path / "CMP-SOP-903.md", markdown_document("CMP-SOP-903"))
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    queue.s3.delete_object(Bucket=queue.settings.corpus_bucket, Key="CMP-SOP-903.md")  # before any worker runs
    seen: list = []  # type: ignore[type-arg]
    run_until(worker_for(queue, ingestor, on_result=seen.append), lambda: len(seen) == 2)
    uri = f"s3://{queue.settings.corpus_bucket}/CMP-SOP-903.md"
    created = next(r for r in seen if r.outcome == "unchanged")
    assert (created.source_uri, created.reason) == (uri, OBJECT_GONE)
    assert result_line(created) == f"skipped {uri}: {OBJECT_GONE}"
    assert documents(database) == {}


def test_a_large_file_is_named_in_the_workers_log_when_it_starts(
    queue, ingestor, database, tmp_path, caplog, monkeypatch
):
    # Found walking it as an operator: a 3 MB file took minutes and `kb worker` logged nothing until it ended.
    monkeypatch.setattr("ingest.worker.handler.LARGE_FILE_BYTES", 20_000)  # 1 MB as served: this test's scale
    sections = {f"{n}. Clause {n}": "Wires above $10,000 need a second approver. " * 10 for n in range(1, 60)}
    big = write(tmp_path / "CMP-SOP-904.md", markdown_document("CMP-SOP-904", sections=sections))
    write(tmp_path / "CMP-SOP-905.md", markdown_document("CMP-SOP-905"))
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)
    with caplog.at_level("INFO", logger="kosha.worker"):
        run_until(worker_for(queue, ingestor), lambda: len(documents(database)) == 2)
    started = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ingesting ")]
    size = big.stat().st_size / 1e6
    assert started == [f"ingesting s3://{queue.settings.corpus_bucket}/CMP-SOP-904.md ({size:.1f} MB)"], started
