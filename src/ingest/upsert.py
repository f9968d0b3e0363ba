"""Store one document version and its chunks in one transaction, as the writer (kb_ingest).

- Versions: a new `effective` version supersedes the doc code's current effective one when its
  (effective date, version) is later; an older version arriving late is stored as `superseded`.
- A changed file (same doc code and version, new bytes) replaces its chunks.
- Chunks whose embedded text was embedded before (same model, same text) reuse that vector.
- Anything that fails rolls the whole transaction back: what was stored before stays as it was.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import psycopg

from ingest.chunker import Chunk
from ingest.document import Header
from ingest.scanner import InjectionFinding

CHUNK_COLUMNS = (
    "doc_id, classification, department, is_effective, ordinal, section_path, anchor, title, content, "
    "token_count, embedding_sha256, injection_suspect, injection_rule, metadata, embedding"
)


class VersionConflict(Exception):
    """Two different files claim the same doc code and version."""


@dataclass(frozen=True)
class PreparedChunk:
    chunk: Chunk
    embedding_text: str
    embedding_sha256: str
    findings: tuple[InjectionFinding, ...]


@dataclass(frozen=True)
class StoredDocument:
    doc_id: int
    status: str  # as stored: the header's, or 'superseded' for a version older than the current one
    superseded: str | None  # the version this one superseded


def embedding_sha256(model: str, text: str) -> str:
    return hashlib.sha256(f"{model}\n{text}".encode()).hexdigest()


def find_by_source_hash(conn: psycopg.Connection, sha256: str) -> tuple[str, str, str] | None:
    """(source_uri, doc_code, version) of a version stored from these exact bytes, if any."""
    row = conn.execute(
        "SELECT source_uri, doc_code, version FROM kb.documents WHERE source_sha256 = %s ORDER BY doc_id LIMIT 1",
        (sha256,),
    ).fetchone()
    return (row[0], row[1], row[2]) if row else None


def reusable_embeddings(conn: psycopg.Connection, hashes: Sequence[str]) -> dict[str, np.ndarray]:
    if not hashes:
        return {}
    rows = conn.execute(
        "SELECT DISTINCT ON (embedding_sha256) embedding_sha256, embedding FROM kb.chunks "
        "WHERE embedding_sha256 = ANY(%s)",
        (list(set(hashes)),),
    ).fetchall()
    return {sha: np.asarray(vector.to_numpy() if hasattr(vector, "to_numpy") else vector) for sha, vector in rows}


def store_document(
    conn: psycopg.Connection,
    header: Header,
    *,
    source_uri: str,
    source_format: str,
    source_sha256: str,
    chunks: Sequence[PreparedChunk],
    vectors: np.ndarray,
    embedding_tokens: int,
) -> StoredDocument:
    """Write the version and its chunks; the caller's transaction commits or rolls back all of it."""
    # Writers of one doc code queue here, so two versions arriving at once cannot both stay effective.
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (header.doc_code,))
    same = conn.execute(
        "SELECT doc_id, source_uri FROM kb.documents WHERE doc_code = %s AND version = %s FOR UPDATE",
        (header.doc_code, header.version),
    ).fetchone()
    if same is not None and same[1] != source_uri:
        raise VersionConflict(
            f"{header.doc_code} version {header.version} is already stored from {same[1]}, with other content; "
            "give this file a new version number, or remove one of the two files"
        )
    current = conn.execute(
        "SELECT doc_id, version, effective_date, version_key FROM kb.documents "
        "WHERE doc_code = %s AND status = 'effective' AND version <> %s FOR UPDATE",
        (header.doc_code, header.version),
    ).fetchone()

    status, superseded = header.status, None
    if header.status == "effective" and current is not None:
        newer = (header.effective_date, list(header.version_key)) > (current[2], list(current[3]))
        if newer:
            conn.execute("UPDATE kb.documents SET status = 'superseded' WHERE doc_id = %s", (current[0],))
            conn.execute("UPDATE kb.chunks SET is_effective = false WHERE doc_id = %s", (current[0],))
            superseded = current[1]
        else:
            status = "superseded"  # an older version that arrived after the current one

    values = (
        header.title,
        status,
        header.effective_date,
        header.owner,
        header.department,
        header.classification.value,
        list(header.regulatory_refs),
        source_uri,
        source_format,
        source_sha256,
        embedding_tokens,
    )
    if same is not None:
        doc_id = same[0]
        conn.execute("DELETE FROM kb.chunks WHERE doc_id = %s", (doc_id,))
        conn.execute(
            """UPDATE kb.documents SET title = %s, status = %s, effective_date = %s, owner = %s, department = %s,
                   classification = %s, regulatory_refs = %s, source_uri = %s, source_format = %s,
                   source_sha256 = %s, embedding_tokens = %s, ingested_at = now()
               WHERE doc_id = %s""",
            (*values, doc_id),
        )
    else:
        row = conn.execute(
            """INSERT INTO kb.documents (title, status, effective_date, owner, department, classification,
                   regulatory_refs, source_uri, source_format, source_sha256, embedding_tokens,
                   doc_code, version, version_key)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING doc_id""",
            (*values, header.doc_code, header.version, list(header.version_key)),
        ).fetchone()
        assert row is not None
        doc_id = row[0]

    with conn.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO kb.chunks ({CHUNK_COLUMNS}) VALUES ({', '.join(['%s'] * 15)})",
            [
                _chunk_row(doc_id, header, status, prepared, vector)
                for prepared, vector in zip(chunks, vectors, strict=True)
            ],
        )
    log_event(
        conn,
        source_uri,
        "ingested",
        sha256=source_sha256,
        doc_code=header.doc_code,
        version=header.version,
        chunks=len(chunks),
        tokens=embedding_tokens,
        detail=f"status {status}" + (f"; superseded version {superseded}" if superseded else ""),
    )
    return StoredDocument(doc_id, status, superseded)


def _chunk_row(doc_id: int, header: Header, status: str, prepared: PreparedChunk, vector: np.ndarray) -> tuple:
    chunk = prepared.chunk
    rules = [f.rule for f in prepared.findings]
    metadata = {"injection": [{"rule": f.rule, "excerpt": f.excerpt} for f in prepared.findings]} if rules else {}
    return (
        doc_id,
        header.classification.value,
        header.department,
        status == "effective",
        chunk.ordinal,
        chunk.section_path,
        chunk.anchor,
        header.title,
        chunk.content,
        chunk.token_count,
        prepared.embedding_sha256,
        bool(rules),
        ",".join(rules) if rules else None,
        json.dumps(metadata),
        vector,
    )


def withdraw(conn: psycopg.Connection, source_uri: str) -> list[tuple[str, str]]:
    """Delete every version stored from `source_uri` (its chunks go with it); return (doc code, version)s."""
    rows = conn.execute(
        "DELETE FROM kb.documents WHERE source_uri = %s RETURNING doc_code, version", (source_uri,)
    ).fetchall()
    for doc_code, version in rows:
        log_event(conn, source_uri, "withdrawn", doc_code=doc_code, version=version, detail="source object removed")
    return [(r[0], r[1]) for r in rows]


def log_event(
    conn: psycopg.Connection,
    source_uri: str,
    outcome: str,
    *,
    sha256: str | None = None,
    doc_code: str | None = None,
    version: str | None = None,
    chunks: int | None = None,
    tokens: int | None = None,
    detail: str | None = None,
) -> None:
    conn.execute(
        """INSERT INTO kb.ingest_log (source_uri, source_sha256, outcome, doc_code, version, chunks,
               embedding_tokens, detail) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)""",
        (source_uri, sha256, outcome, doc_code, version, chunks, tokens, detail),
    )
