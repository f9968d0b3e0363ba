"""Checks shared by the ingestion tests: what the parser says about a file, what is stored, and one file
ingested with both compared."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import psycopg

from ingest.chunker import chunk_document
from ingest.document import ParseError
from ingest.parsers import parse_document
from ingest.pipeline import IngestResult
from ingest.scanner import scan_for_injection

MAX_BYTES = 2_000_000  # the ingestor fixture's limit


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


def stored_with_other_content(owner: str, data: bytes, name: str) -> bool:
    """Whether the file's doc code and version are already stored from other bytes: a version's text never
    changes once stored, so such a file is refused whatever its body."""
    header = parse_document(data, name, max_bytes=MAX_BYTES).header
    with psycopg.connect(owner, autocommit=True) as conn:
        row = conn.execute(
            "SELECT source_sha256 FROM kb.documents WHERE doc_code = %s AND version = %s",
            (header.doc_code, header.version),
        ).fetchone()
    return row is not None and row[0] != hashlib.sha256(data).hexdigest()


def ingest_and_check(ingestor, database, name: str, data: bytes, source_uri: str) -> IngestResult:  # type: ignore[no-untyped-def]
    """Ingest one file; check the outcome agrees with the parser's verdict (and, for a file that parses, with
    what is stored under its version) and nothing partial is stored."""
    verdict = parse_or_reason(data, name)
    revision = verdict is None and stored_with_other_content(database.owner, data, name)
    before = stored(database.owner)
    result = ingestor.ingest(data, name=name, source_uri=source_uri)  # nothing may escape
    after = stored(database.owner)
    assert (after.orphan_chunks, after.empty_documents) == (0, 0), (name, result)
    if verdict is not None:
        assert result.outcome == "failed" and result.reason == verdict, (name, result.reason, verdict)
        assert after == before, f"{name} failed but changed what was stored"
    elif revision:
        assert result.outcome == "failed" and "is already stored" in (result.reason or ""), (name, result.reason)
        assert after == before, f"{name} was refused but changed what was stored"
    else:
        assert result.outcome in ("ingested", "unchanged"), (name, result.outcome, result.reason)
    return result
