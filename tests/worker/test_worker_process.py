"""`kb worker` as its own process: killed mid-batch or stopped with SIGTERM, it loses no message."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from psycopg import conninfo as pg_conninfo
from tests.support.documents import markdown_document, write
from tests.worker.conftest import worker_for
from tests.worker.test_queue_ingestion import documents, run_until

from ingest.aws.upload import upload_folder

COUNT = 12


def start_worker(queue, database, log: Path, **more: str) -> subprocess.Popen:  # type: ignore[no-untyped-def,type-arg]
    params = pg_conninfo.conninfo_to_dict(database.owner)
    env = {
        **os.environ,
        **queue.env(),
        "KB_STATE_DIR": str(log.parent / "state"),
        "DATABASE_URL": f"postgresql://{params['user']}@/{params['dbname']}?host={params['host']}",
        **more,
    }
    with log.open("w") as out:
        return subprocess.Popen(
            [str(Path(sys.executable).parent / "kb"), "worker"], env=env, stdout=out, stderr=subprocess.STDOUT
        )


def wait_for(log: Path, text: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


def upload_many(queue, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sections = {f"{n}. Rule {n}": f"Rule {n}: breaks above ${n},000 are escalated." for n in range(1, 9)}
    for n in range(COUNT):
        write(tmp_path / f"CMP-SOP-{900 + n}.md", markdown_document(f"CMP-SOP-{900 + n}", sections=sections))
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path)


def test_a_worker_killed_mid_batch_loses_nothing(queue, database, ingestor, tmp_path):
    upload_many(queue, tmp_path / "docs")
    log = tmp_path / "worker.log"
    process = start_worker(queue, database, log)
    wait_for(log, "ingested s3://")
    process.send_signal(signal.SIGKILL)  # no chance to finish or hand anything back
    process.wait(timeout=30)
    assert 0 < len(documents(database)) < COUNT
    run_until(worker_for(queue, ingestor), lambda: len(documents(database)) == COUNT, timeout=180)
    with psycopg.connect(database.ingest) as conn:
        assert conn.execute("SELECT count(*) FROM kb.chunks").fetchone()[0] == COUNT * 8  # nothing doubled


def test_sigterm_finishes_the_batch_in_hand_then_stops(queue, database, ingestor, tmp_path):
    upload_many(queue, tmp_path / "docs")
    log = tmp_path / "worker.log"
    process = start_worker(queue, database, log)
    wait_for(log, "ingested s3://")
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=120) == 0
    text = log.read_text()
    assert "finishing the batch in hand, if any" in text
    # Each file's line names what was stored, as make run's does (found walking it: "ingested s3://…" alone).
    assert re.search(r"INFO ingested s3://\S+\.md: CMP-SOP-\d+ v1\.0", text), text
    reported = re.search(r"stopped: \d+ batch(?:es)?, (\d+) messages? done, 0 failed", text)
    assert reported, text
    assert int(reported.group(1)) == len(documents(database))  # what it took, it finished
    assert (tmp_path / "state" / "worker.heartbeat").exists()  # what the compose health check reads
    run_until(worker_for(queue, ingestor), lambda: len(documents(database)) == COUNT, timeout=180)


def test_sigterm_to_an_idle_worker_does_not_wait_out_its_long_poll(queue, database, tmp_path):
    # Found walking it: an idle `kb worker` took the rest of its 10 s long poll to stop, as long as Docker's
    # default grace before SIGKILL. Here the poll is 20 s; the stop must not wait for it.
    log = tmp_path / "worker.log"
    process = start_worker(queue, database, log, KB_WORKER_WAIT_TIME_S="20")
    wait_for(log, "polling ")
    time.sleep(1)  # inside a long poll now
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    assert time.monotonic() - signalled < 10, log.read_text()
    assert "stopped: 0 batches, 0 messages done, 0 failed" in log.read_text()


def test_a_second_sigterm_stops_a_worker_at_once_without_finishing_the_file_in_hand(queue, database, tmp_path):
    # Found walking it as the operator: "finishing the batch in hand" took 130 s for a 1 MB file, with no way to
    # stop sooner but SIGKILL. A second signal now stops at once; nothing of the file is stored.
    sentence = "Reconciliation breaks above the threshold are escalated to the treasury lead within two hours. "
    sections = {f"{n}. Section {n}": sentence * 60 for n in range(1, 121)}
    write(tmp_path / "docs" / "CMP-SOP-990.md", markdown_document("CMP-SOP-990", sections=sections))
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path / "docs")
    log = tmp_path / "worker.log"
    process = start_worker(queue, database, log)
    wait_for(log, "polling ")
    time.sleep(6)  # received, and embedding (about a minute of it)
    process.send_signal(signal.SIGTERM)
    wait_for(log, "finishing the batch in hand, if any, then stopping (signal again to stop at once)")
    assert process.poll() is None, log.read_text()  # still at it: the file was in hand
    again = time.monotonic()
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 128 + signal.SIGTERM
    assert time.monotonic() - again < 10
    text = log.read_text()
    assert "stopping at once; the batch in hand is not finished" in text and "Traceback" not in text, text
    assert "and is back in the queue (1 message)" in text, text
    assert not documents(database)


def test_a_worker_stopping_at_once_hands_its_batch_back_to_the_queue_at_once(queue, ingestor, tmp_path):
    # Found walking it as the operator: after a second SIGTERM the file in hand stayed in flight for the
    # visibility timeout (6 minutes on the LLD's queue), and a restarted worker sat idle until then.
    import threading

    from ingest.worker.poller import visibility_entries

    write(tmp_path / "docs" / "CMP-SOP-991.md", markdown_document("CMP-SOP-991"))
    worker = worker_for(queue, ingestor)
    held, release = threading.Event(), threading.Event()

    def in_hand(messages):  # type: ignore[no-untyped-def]
        # As a production queue's heartbeat keeps it: hidden for the LLD's 360 s while it is worked on.
        queue.sqs.change_message_visibility_batch(
            QueueUrl=queue.stack.queue_url, Entries=visibility_entries(messages, 360)
        )
        held.set()
        release.wait(30)
        return set()

    worker.process = in_hand  # type: ignore[method-assign]
    thread = threading.Thread(target=worker.run, kwargs={"until": release.is_set}, daemon=True)
    thread.start()
    upload_folder(queue.s3, queue.settings.corpus_bucket, tmp_path / "docs")
    assert held.wait(30)
    assert worker.hand_back() == 1
    again = queue.sqs.receive_message(QueueUrl=queue.stack.queue_url, WaitTimeSeconds=5).get("Messages", [])
    release.set()
    thread.join(10)
    assert len(again) == 1 and "CMP-SOP-991.md" in again[0]["Body"]
