"""The per-file memory budget: a parse runs in a real forked child of the parse server (a real process of its
own), capped at KB_MAX_PARSE_MEMORY_BYTES more memory; past it the file fails with the budget named, and this
process goes on. The tests that change a parser's behaviour fork from this process (child.parse_forked, what the
server runs for each file), since a change made here does not reach the server."""

from __future__ import annotations

import json
import os
import time

import psycopg
import pytest
from tests.conftest import REPO
from tests.support.documents import markdown_document

from ingest.document import HeaderError, ParseError
from ingest.parsers import child, parse_document, parse_server

MiB = 1024 * 1024


def forked(data: bytes, name: str) -> child.Outcome:
    """One parse in a child forked from this process, as the parse server runs each file."""
    return child.parse_forked(data, name, max_memory_bytes=256 * MiB, max_parse_seconds=60, grace_s=10, max_bytes=10**8)


def big_markdown() -> bytes:
    section = "## {n}. Control {n}\n\nThe analyst records case {n}.\n\n- Check entry {n}\n- Confirm it\n\n"
    return (markdown_document() + "".join(section.format(n=n) for n in range(1_500))).encode()


def big_openapi() -> bytes:
    spec = json.loads((REPO / "corpus/engineering/ENG-API-008.json").read_text())
    spec["x-padding"] = [{"field": f"value {n}", "more": [n, n + 1]} for n in range(20_000)]
    return json.dumps(spec).encode()


@pytest.mark.parametrize(("make", "name"), [(big_markdown, "big.md"), (big_openapi, "big.json")])
def test_a_parse_over_the_memory_budget_fails_naming_the_budget_and_this_process_goes_on(make, name):
    data = make()
    with pytest.raises(ParseError) as refused:
        parse_document(data, name, max_bytes=10**8, max_parse_memory_bytes=4 * MiB)
    # Reported by the child (MemoryError), by its death (markdown-it aborts when an allocation fails), or
    # by this process watching the child's memory: each names the budget and its setting.
    message = str(refused.value)
    assert "the 4 MiB parse memory limit (KB_MAX_PARSE_MEMORY_BYTES)" in message and "\n" not in message
    # Within a budget the child's document is the one this process would parse.
    in_child = parse_document(data, name, max_bytes=10**8, max_parse_memory_bytes=256 * MiB)
    assert in_child == parse_document(data, name, max_bytes=10**8)


def test_a_file_refused_for_its_content_in_the_child_gets_the_error_it_gets_in_process():
    data = markdown_document().replace("department: compliance\n", "").encode()
    with pytest.raises(HeaderError, match="Department"):
        parse_document(data, "x.md", max_bytes=10**6, max_parse_memory_bytes=256 * MiB)


def test_a_child_still_parsing_past_the_time_budget_is_stopped_with_the_time_budget_named(monkeypatch):
    monkeypatch.setattr(child, "HARD_STOP_GRACE_S", 0.0)  # no grace (sent with the job): no answer within 1 µs
    with pytest.raises(ParseError, match=r"1e-06 s limit \(KB_MAX_PARSE_SECONDS\) and was stopped"):
        parse_document(
            big_markdown(), "x.md", max_bytes=10**8, max_parse_seconds=1e-6, max_parse_memory_bytes=256 * MiB
        )


def test_the_ingestor_reports_a_file_over_the_memory_budget_as_failed_and_stores_nothing(database, counting_embedder):
    from ingest.pipeline import Ingestor

    with Ingestor(database.ingest, counting_embedder, max_bytes=10**8, max_parse_memory_bytes=4 * MiB) as ingestor:
        failed = ingestor.ingest(big_openapi(), name="big.json", source_uri="file:///inbox/big.json")
    assert failed.outcome == "failed" and "KB_MAX_PARSE_MEMORY_BYTES" in (failed.reason or "")
    assert counting_embedder.calls == 0
    with psycopg.connect(database.ingest) as conn:
        assert conn.execute("SELECT count(*) FROM kb.documents").fetchone() == (0,)


def test_a_file_whose_chunks_take_too_long_to_scan_fails_naming_the_parse_time_limit(
    database, counting_embedder, monkeypatch
):
    # The parse of these 40 sections takes milliseconds; the scan is made slow (a stand-in for the thousands of
    # chunks of a large file, at a few ms each): KB_MAX_PARSE_SECONDS must cover it too, and nothing is stored.

    from ingest import pipeline

    real_scan = pipeline.scan_chunk

    def slow_scan(section_path: str, content: str, header=None):  # type: ignore[no-untyped-def]
        time.sleep(0.05)
        return real_scan(section_path, content, header)

    monkeypatch.setattr(pipeline, "scan_chunk", slow_scan)
    sections = {f"{n}. Control {n}": f"The analyst records case {n} and its reason." for n in range(1, 41)}
    data = markdown_document(sections=sections).encode()
    with pipeline.Ingestor(database.ingest, counting_embedder, max_bytes=10**8, max_parse_seconds=0.5) as ingestor:
        failed = ingestor.ingest(data, name="slow.md", source_uri="file:///inbox/slow.md")
        assert failed.outcome == "failed"
        assert "0.5 s limit (KB_MAX_PARSE_SECONDS)" in (failed.reason or "") and "injection scan" in failed.reason
        assert counting_embedder.calls == 0
        with psycopg.connect(database.ingest) as conn:
            assert conn.execute("SELECT count(*) FROM kb.documents").fetchone() == (0,)
        # With time enough, the same file ingests.
        ingestor.max_parse_seconds = 120
        assert ingestor.ingest(data, name="slow.md", source_uri="file:///inbox/slow.md").outcome == "ingested"


def test_the_childs_memory_is_looked_at_less_often_when_a_look_is_costly(monkeypatch):
    # A look reads /proc/<pid>/smaps_rollup, which walks every page the child maps: ~8 ms for the child of a
    # 500 MB process. Here a look is made to cost 10 ms and the parse to last 0.6 s (the child inherits both
    # by the fork): looking every 20 ms would take ~20 looks, a tenth of a core allows about 6.

    from ingest.parsers import markdown

    looks = []
    real_look = child._private_memory

    def costly_look(pid):  # type: ignore[no-untyped-def]
        looks.append(pid)
        time.sleep(0.01)
        return real_look(pid)

    real_parse = markdown.parse_markdown

    def slow_parse(data, deadline=None):  # type: ignore[no-untyped-def]
        time.sleep(0.6)
        return real_parse(data, deadline)

    monkeypatch.setattr(child, "_private_memory", costly_look)
    monkeypatch.setattr(markdown, "parse_markdown", slow_parse)
    kind, document = forked(markdown_document().encode(), "x.md")
    assert kind == "document" and document.header.title
    assert 1 <= len(looks) <= 8


def test_a_parser_crashing_in_the_child_is_reported_as_a_crash_and_this_process_goes_on(monkeypatch):
    # The child really dies of SIGSEGV (a NULL read, as a parser library overflowing its stack would).
    import ctypes
    import faulthandler

    from ingest.parsers import markdown

    def crashing_parse(data, deadline=None):  # type: ignore[no-untyped-def]
        faulthandler.disable()  # the crash is the point: no "Fatal Python error" dump in the test run's output
        ctypes.string_at(0)

    monkeypatch.setattr(markdown, "parse_markdown", crashing_parse)
    outcome = forked(markdown_document().encode(), "x.md")
    assert outcome == ("died", -11)
    with pytest.raises(ParseError) as crashed:
        child.document_or_raise(outcome, 256 * MiB, 60)
    message = str(crashed.value)
    assert message.startswith("the parser crashed (signal SIGSEGV) reading this file")
    assert "KB_MAX_PARSE_MEMORY_BYTES" in message and "\n" not in message


def _server_pid() -> int:
    process = parse_server._SERVER._process
    assert process is not None and process.poll() is None, "no parse server is running"
    return process.pid


def test_a_pdf_parsed_under_the_budget_never_loads_the_pdf_library_into_this_process():
    # A process of its own: this test run has parsed PDFs in process elsewhere.
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from ingest.parsers import parse_document\n"
        "data = Path('corpus/risk/RSK-STD-003.pdf').read_bytes()\n"
        "document = parse_document(data, 'RSK-STD-003.pdf', max_bytes=10**8, max_parse_memory_bytes=256 * 2**20)\n"
        "print(len(document.blocks), 'pymupdf' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    blocks, loaded = done.stdout.split()
    assert int(blocks) > 10 and loaded == "False"


def test_a_parse_server_killed_between_files_is_replaced_and_the_next_file_parses():
    import signal

    data = markdown_document().encode()
    first = parse_document(data, "x.md", max_bytes=10**6, max_parse_memory_bytes=256 * MiB)
    pid = _server_pid()
    os.kill(pid, signal.SIGKILL)
    again = parse_document(data, "x.md", max_bytes=10**6, max_parse_memory_bytes=256 * MiB)
    assert again == first and _server_pid() != pid


def test_a_parse_server_killed_mid_file_fails_that_file_with_a_reason_and_the_next_file_parses():
    import signal
    import threading

    import psutil

    parse_document(markdown_document().encode(), "x.md", max_bytes=10**6, max_parse_memory_bytes=256 * MiB)
    server = psutil.Process(_server_pid())
    outcome: list[BaseException | object] = []

    def parse_big() -> None:
        try:
            outcome.append(parse_document(big_markdown(), "big.md", max_bytes=10**8, max_parse_memory_bytes=2**30))
        except ParseError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=parse_big)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.children() and time.monotonic() < deadline:
        time.sleep(0.001)  # until the server has forked the file's child
    os.kill(server.pid, signal.SIGKILL)
    thread.join(60)
    assert len(outcome) == 1 and isinstance(outcome[0], ParseError), outcome
    message = str(outcome[0])
    assert message.startswith("the parse server stopped answering while parsing this file") and "\n" not in message
    again = parse_document(markdown_document().encode(), "x.md", max_bytes=10**6, max_parse_memory_bytes=256 * MiB)
    assert again.header.title


def test_the_parse_server_stops_when_the_process_that_started_it_is_killed():
    import subprocess
    import sys

    import psutil

    script = (
        "from ingest.parsers.parse_server import _SERVER\n"
        "_SERVER.start()\n"
        "print(_SERVER._process.pid, flush=True)\n"
        "import time; time.sleep(600)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    owner = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    server = psutil.Process(int(owner.stdout.readline()))
    owner.kill()  # SIGKILL: no atexit, no cleanup of its own
    owner.wait()
    deadline = time.monotonic() + 30
    while server.is_running() and server.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server.is_running() or server.status() == psutil.STATUS_ZOMBIE


def test_the_parse_server_maps_no_library_that_parsing_does_not_need():
    # Its imports are its memory: the settings' validation library and the model runtime (which the PDF
    # library's add-ons brought) are not needed to parse, and the server holds neither after a PDF and a DOCX.
    for path in (REPO / "corpus/risk/RSK-STD-003.pdf", REPO / "corpus/compliance/CMP-GDE-008.docx"):
        assert parse_document(path.read_bytes(), path.name, max_bytes=10**8, max_parse_memory_bytes=256 * MiB).blocks
    with open(f"/proc/{_server_pid()}/maps") as maps:
        mapped = maps.read()
    assert "pymupdf" in mapped  # the check reads the right process
    assert "pydantic_core" not in mapped and "onnxruntime" not in mapped


def test_a_header_field_given_twice_comes_back_from_the_child_as_the_error_naming_it():
    # Found walking it: the error's class could not be unpickled (its __init__ takes the field and the problem),
    # so the worker failed the file with no reason recorded, and after 3 receives it was dead-lettered as
    # "no error recorded".
    twice = "classification: internal\nclassification: public\n"
    data = markdown_document().replace("classification: internal\n", twice)
    kind, error = forked(data.encode(), "twice.md")
    assert kind == "error" and isinstance(error, HeaderError)
    assert "Classification (classification) is given twice" in str(error)


class _TwoArgumentError(ParseError):
    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what}: {why}")


def test_a_parse_error_that_would_not_unpickle_comes_back_as_a_plain_parse_error_with_its_message():
    sent = child._sendable(_TwoArgumentError("the table", "has no header row"))
    assert type(sent) is ParseError and str(sent) == "the table: has no header row"
