"""Hostile files for ingestion: fuzzed bytes for every parser, mutations of real corpus files (truncated,
bytes flipped, junk inserted, spans deleted or repeated), YAML alias bombs, NUL characters and documents
with nothing to index. Through `parse_document` each either parses (and then chunks and scans) or fails
with a ParseError; through `Ingestor.ingest` each either ingests or fails alone with that same reason,
nothing else escapes, and nothing partial is stored (no chunk without its document, no document without
chunks, and a failed file leaves the stored rows exactly as they were)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ingest.chunker import chunk_document
from ingest.document import ParseError
from ingest.parsers import FORMATS, parse_document
from ingest.scanner import scan_for_injection
from tests.conftest import REPO
from tests.support.documents import markdown_document

MAX_BYTES = 2_000_000  # the ingestor fixture's limit
EXTENSIONS = sorted(FORMATS)
SAMPLES = {  # the smallest real corpus file of each format: mutations of them reach deep into each parser
    suffix: min((REPO / "corpus").rglob(f"*{suffix}"), key=lambda p: p.stat().st_size)
    for suffix in (".md", ".pdf", ".docx", ".html", ".yaml", ".json")
}
MAGIC = [  # how each format starts, so fuzzed bytes get past the first check
    b"---\ndoc_code: CMP-SOP-901\n",
    b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<",
    b"PK\x03\x04\x14\x00\x06\x00",
    b'<html><body><dl class="document-control"><dt>Doc code</dt><dd>',
    b"openapi: 3.0.3\ninfo:\n  x-document-control:\n",
    b'{"openapi": "3.1.0", "info": {"x-document-control": ',
    b"\xef\xbb\xbf",
    b"\xff\xfe",
]
JUNK = st.binary(max_size=64) | st.sampled_from(
    [
        b"\x00",
        b"\xff\xfe\xfd",
        b"\xed\xa0\x80",
        b"\n---\n",
        b"\n## 9. Injected\n",
        b"|a|b|\n|-|-|\n|" + b"x|" * 200 + b"\n",
        b"<h2>",
        b"<table><tr><td>",
        b"]]>",
        b"&a [*a, *a]",
        b"*missing",
        b"!!python/object/apply:os.system ['true']",
        b"$ref: '#/components/schemas/Nope'",
        b'"$ref": "#/"',
        b"endstream endobj",
        b"xref\n0 1\n0000000000 65535 f \n",
        b"trailer << /Root 99 0 R /Size 1 >>",
        b"PK\x05\x06" + b"\x00" * 18,
        "\u202e\u200b\ufeff".encode(),
        b"[" * 500,
        b"{" * 500,
        b"> " * 500,
    ]
)


def parse_or_reason(data: bytes, name: str) -> str | None:
    """None when the file parses, chunks and scans; the ParseError's message when it fails. Anything else
    propagates and fails the test."""
    try:
        document = parse_document(data, name, max_bytes=MAX_BYTES)
    except ParseError as exc:
        assert str(exc).strip(), "a ParseError with no reason"
        return str(exc)
    for chunk in chunk_document(document):
        scan_for_injection(f"{chunk.section_path}\n{chunk.content}")
    return None


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    path = draw(st.sampled_from(sorted(SAMPLES.values())))
    data = bytearray(path.read_bytes())
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "repeat", "overwrite"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "truncate":
            del data[at:]
        elif kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            data[at:at] = draw(JUNK)
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 512))]
        elif kind == "repeat":
            data[at:at] = data[at : at + draw(st.integers(1, 256))] * draw(st.integers(2, 20))
        elif kind == "overwrite":
            junk = draw(JUNK)
            data[at : at + len(junk)] = junk
        event(f"{path.suffix} {kind}")
    return path.name, bytes(data)


FUZZED = st.tuples(
    st.sampled_from(EXTENSIONS).map(lambda ext: f"fuzzed{ext}"),
    st.binary(max_size=2048) | st.builds(lambda m, b: m + b, st.sampled_from(MAGIC), st.binary(max_size=2048)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=FUZZED)
def test_fuzzed_bytes_in_any_format_parse_or_fail_with_a_parse_error(case):
    name, data = case
    event("parsed" if parse_or_reason(data, name) is None else "ParseError")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated())
def test_mutated_corpus_files_parse_or_fail_with_a_parse_error(case):
    name, data = case
    event("parsed" if parse_or_reason(data, name) is None else "ParseError")


@dataclass(frozen=True)
class Stored:
    documents: frozenset[tuple]
    chunks: int
    orphan_chunks: int
    empty_documents: int


def stored(owner: str) -> Stored:
    with psycopg.connect(owner, autocommit=True) as conn:
        documents = conn.execute("SELECT doc_id, doc_code, version, status, source_sha256 FROM kb.documents")
        rows = frozenset(documents.fetchall())
        (chunks,) = conn.execute("SELECT count(*) FROM kb.chunks").fetchone()  # type: ignore[misc]
        (orphans,) = conn.execute(  # type: ignore[misc]
            "SELECT count(*) FROM kb.chunks c WHERE NOT EXISTS (SELECT 1 FROM kb.documents d WHERE d.doc_id = c.doc_id)"
        ).fetchone()
        (empty,) = conn.execute(  # type: ignore[misc]
            "SELECT count(*) FROM kb.documents d WHERE NOT EXISTS (SELECT 1 FROM kb.chunks c WHERE c.doc_id = d.doc_id)"
        ).fetchone()
    return Stored(rows, chunks, orphans, empty)


def ingest_and_check(ingestor, database, name: str, data: bytes, source_uri: str) -> str:  # type: ignore[no-untyped-def]
    """Ingest one file; check the outcome agrees with the parser's verdict and nothing partial is stored."""
    verdict = parse_or_reason(data, name)
    before = stored(database.owner)
    result = ingestor.ingest(data, name=name, source_uri=source_uri)  # nothing may escape
    after = stored(database.owner)
    assert (after.orphan_chunks, after.empty_documents) == (0, 0), (name, result)
    if verdict is not None:
        assert result.outcome == "failed" and result.reason == verdict, (name, result.reason, verdict)
        assert after == before, f"{name} failed but changed what was stored"
    else:
        assert result.outcome in ("ingested", "unchanged"), (name, result.outcome, result.reason)
    return result.outcome


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=mutated())
def test_mutated_corpus_files_through_the_ingestor_ingest_or_fail_alone_with_the_parsers_reason(
    ingestor, database, case
):
    name, data = case
    event(ingest_and_check(ingestor, database, name, data, f"s3://hostile/{name}"))


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A 'billion laughs' in YAML: a few hundred bytes that expand to width**levels strings."""
    refs = ", ".join(["*l{}"] * width)
    lines = ['  l0: &l0 ["lol"]'] + [f"  l{i}: &l{i} [{refs.format(*[i - 1] * width)}]" for i in range(1, levels + 1)]
    return "\n".join(lines)


def bombs() -> dict[str, bytes]:
    front_matter = markdown_document("CMP-SOP-931").replace(
        "regulatory_refs: []", "bomb:\n" + alias_bomb() + f"\nregulatory_refs: *l{9}"
    )
    title_bomb = markdown_document("CMP-SOP-932").replace(
        "title: Test Procedure", "bomb:\n" + alias_bomb() + "\ntitle: *l9"
    )
    openapi = (
        "openapi: 3.0.3\nx-bomb:\n" + alias_bomb() + "\ninfo:\n  title: Bomb\n  version: '1.0'\n"
        "  x-document-control:\n    doc_code: ENG-API-933\n    status: effective\n    effective_date: 2026-01-01\n"
        "    owner: X\n    department: engineering\n    classification: public\n    regulatory_refs: []\n"
        "paths:\n  /x:\n    get:\n      summary: bomb\n      description: *l9\n      responses:\n"
        "        '200':\n          description: ok\n          content:\n            application/json:\n"
        "              example: *l9\n"
    )
    cycle = openapi.replace("x-bomb:\n" + alias_bomb(), "x-bomb: &loop [*loop]").replace("*l9", "*loop")
    return {
        "front-matter-bomb.md": front_matter.encode(),
        "title-bomb.md": title_bomb.encode(),
        "openapi-bomb.yaml": openapi.encode(),
        "openapi-cycle.yaml": cycle.encode(),
    }


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(bombs()))
def test_a_yaml_alias_bomb_fails_fast_with_a_reason(ingestor, database, name):
    started = time.perf_counter()
    outcome = ingest_and_check(ingestor, database, name, bombs()[name], f"s3://hostile/{name}")
    assert outcome == "failed"
    assert time.perf_counter() - started < 10


def test_a_document_with_headings_but_no_text_fails_with_a_reason_and_stores_nothing(ingestor, database):
    empty = markdown_document("CMP-SOP-934", sections={"1. Purpose": "", "2. Scope": "<!-- nothing -->"})
    outcome = ingest_and_check(ingestor, database, "empty-sections.md", empty.encode(), "s3://hostile/empty.md")
    assert outcome == "failed"


NUL_JSON = (
    '{"openapi": "3.0.3", "info": {"title": "T", "version": "1.0", "x-document-control": {"doc_code": '
    '"ENG-API-937", "status": "effective", "effective_date": "2026-01-01", "owner": "Eng", "department": '
    '"engineering", "classification": "public", "regulatory_refs": []}}, "paths": {"/x": {"get": '
    '{"summary": "nul\\u0000here", "description": "a\\u0000b", "responses": {"200": {"description": "ok"}}}}}}'
)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("nul-after-4k.md", markdown_document("CMP-SOP-935", sections={"1. A": "word " * 1000 + "\x00 and after"})),
        ("nul-in-title.md", markdown_document("CMP-SOP-936", title='"Nul\\0Title"')),  # YAML's \0 escape
        ("nul-escape.json", NUL_JSON),  # JSON's \u0000 escape: no NUL byte in the file at all
    ],
)
def test_nul_characters_anywhere_in_a_text_file_fail_alone_with_a_parse_error_or_are_dropped(
    ingestor, database, name, text
):
    """PostgreSQL text cannot hold NUL: the file must not reach the database with one and fail there."""
    ingest_and_check(ingestor, database, name, text.encode(), f"s3://hostile/{name}")
