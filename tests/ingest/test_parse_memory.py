"""The per-file memory budget: a parse runs in a real forked child capped at KB_MAX_PARSE_MEMORY_BYTES more
memory than this process; past it the file fails with the budget named, and this process goes on."""

from __future__ import annotations

import json

import psycopg
import pytest
from tests.conftest import REPO
from tests.support.documents import markdown_document

from ingest.document import HeaderError, ParseError
from ingest.parsers import child, parse_document

MiB = 1024 * 1024


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
    monkeypatch.setattr(child, "_HARD_STOP_GRACE_S", 0.0)  # no grace: the child cannot answer within 1 µs
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
    import time

    from ingest import pipeline

    real_scan = pipeline.scan_chunk

    def slow_scan(section_path: str, content: str):  # type: ignore[no-untyped-def]
        time.sleep(0.05)
        return real_scan(section_path, content)

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
    # 500 MB worker. Here a look is made to cost 10 ms and the parse to last 0.6 s (the child inherits both
    # by the fork): looking every 20 ms would take ~20 looks, a tenth of a core allows about 6.
    import time

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
    document = parse_document(markdown_document().encode(), "x.md", max_bytes=10**6, max_parse_memory_bytes=256 * MiB)
    assert document.header.title
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
    with pytest.raises(ParseError) as crashed:
        parse_document(markdown_document().encode(), "x.md", max_bytes=10**6, max_parse_memory_bytes=256 * MiB)
    message = str(crashed.value)
    assert message.startswith("the parser crashed (signal SIGSEGV) reading this file")
    assert "KB_MAX_PARSE_MEMORY_BYTES" in message and "\n" not in message
