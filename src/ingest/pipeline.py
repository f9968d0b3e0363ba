"""Everything the worker does to one file, callable directly: hash, skip if unchanged, parse, chunk,
scan, embed, store. Each file succeeds or fails alone; a failure leaves the database as it was.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from ingest.chunker import chunk_document
from ingest.document import ParseError
from ingest.injection import scan_chunk
from ingest.parsers import FORMATS, parse_document
from ingest.upsert import (
    PreparedChunk,
    VersionConflict,
    check_version_claim,
    embedding_sha256,
    find_by_source_hash,
    log_event,
    reusable_embeddings,
    store_document,
    withdraw,
)
from kb_core.db.embedding_space import check_embedding_space
from kb_core.embedders.base import Embedder, EmbeddingError
from kb_core.settings import DEFAULT_MAX_DECOMPRESSED_BYTES, DEFAULT_MAX_PARSE_SECONDS
from kb_core.token_count import EMBEDDING_INPUT_LIMIT

FAILURES = (ParseError, EmbeddingError, VersionConflict, psycopg.Error)


@dataclass(frozen=True)
class IngestResult:
    source_uri: str
    outcome: str  # 'ingested' | 'unchanged' | 'failed' | 'withdrawn'
    doc_code: str | None = None
    version: str | None = None
    status: str | None = None
    department: str | None = None
    classification: str | None = None
    source_format: str | None = None
    chunks: int = 0
    suspect_chunks: int = 0
    embedded: int = 0  # chunks sent to the embedder (the rest reused a stored vector)
    tokens: int = 0
    seconds: float = 0.0
    reason: str | None = None
    timings: dict[str, float] = field(default_factory=dict)


class Ingestor:
    """Ingests files as the writer, over one connection; check the embedding space once, up front."""

    def __init__(
        self,
        conninfo: str,
        embedder: Embedder,
        *,
        max_bytes: int,
        max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
        max_parse_seconds: float = DEFAULT_MAX_PARSE_SECONDS,
        contextual_prefix: bool = True,
        withdrawn_retention_days: int | None = None,
    ) -> None:
        self.conninfo = conninfo
        self.withdrawn_retention_days = withdrawn_retention_days  # None: keep withdrawn versions for ever
        self.contextual_prefix = contextual_prefix  # off only for the evals' ablation
        self.conn = self._connect()
        self.embedder = embedder
        self.max_bytes = max_bytes
        self.max_decompressed_bytes = max_decompressed_bytes
        self.max_parse_seconds = max_parse_seconds
        with self.conn.transaction():
            check_embedding_space(self.conn, embedder.space)

    def _connect(self) -> psycopg.Connection:
        conn = psycopg.connect(self.conninfo)
        register_vector(conn)
        return conn

    def _ensure_connected(self) -> None:
        """A long-lived worker outlives database restarts: reconnect when the connection is gone."""
        if self.conn.closed or self.conn.broken:
            self.conn.close()
            self.conn = self._connect()

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Ingestor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ingest(self, data: bytes, *, name: str, source_uri: str) -> IngestResult:
        started = time.perf_counter()
        timings: dict[str, float] = {}
        sha256 = hashlib.sha256(data).hexdigest()
        try:
            self._ensure_connected()
            with self.conn.transaction():
                known = find_by_source_hash(self.conn, sha256)
            if known is not None:
                uri, doc_code, version = known
                with self.conn.transaction():
                    log_event(self.conn, source_uri, "unchanged", sha256=sha256, doc_code=doc_code, version=version)
                return IngestResult(
                    source_uri,
                    "unchanged",
                    doc_code,
                    version,
                    seconds=time.perf_counter() - started,
                    reason=None if uri == source_uri else f"identical to {uri}",
                )
            mark = time.perf_counter()
            document = parse_document(
                data,
                name,
                max_bytes=self.max_bytes,
                max_decompressed_bytes=self.max_decompressed_bytes,
                max_parse_seconds=self.max_parse_seconds,
            )
            # The configured embedder's input limit; the local model windows any length, so the production one.
            limit = getattr(self.embedder, "max_input_tokens", None) or EMBEDDING_INPUT_LIMIT
            chunks = chunk_document(document, max_tokens=limit)
            header = document.header
            prepared = [
                PreparedChunk(
                    chunk,
                    text := chunk.embedding_text(header.title) if self.contextual_prefix else chunk.content,
                    embedding_sha256(self.embedder.space.model, text),
                    tuple(scan_chunk(chunk.section_path, chunk.content)),
                )
                for chunk in chunks
            ]
            timings["parse"] = time.perf_counter() - mark

            mark = time.perf_counter()
            with self.conn.transaction():
                check_version_claim(self.conn, header, source_uri=source_uri, source_sha256=sha256)
                known_vectors = reusable_embeddings(self.conn, [p.embedding_sha256 for p in prepared])
            missing = [p for p in prepared if p.embedding_sha256 not in known_vectors]
            tokens = 0
            if missing:
                embeddings = self.embedder.embed([p.embedding_text for p in missing])
                tokens = embeddings.tokens
                known_vectors.update({p.embedding_sha256: v for p, v in zip(missing, embeddings.vectors, strict=True)})
            vectors = np.vstack([known_vectors[p.embedding_sha256] for p in prepared])
            timings["embed"] = time.perf_counter() - mark

            mark = time.perf_counter()
            with self.conn.transaction():
                stored = store_document(
                    self.conn,
                    header,
                    source_uri=source_uri,
                    source_format=document.source_format,
                    source_sha256=sha256,
                    chunks=prepared,
                    vectors=vectors,
                    embedding_tokens=tokens,
                )
            timings["store"] = time.perf_counter() - mark
        except FAILURES as exc:
            reason = _reason(exc)
            self._log_failure(source_uri, sha256, reason)
            return IngestResult(source_uri, "failed", reason=reason, seconds=time.perf_counter() - started)
        return IngestResult(
            source_uri,
            "ingested",
            header.doc_code,
            header.version,
            stored.status,
            header.department,
            header.classification.value,
            document.source_format,
            len(prepared),
            sum(1 for p in prepared if p.findings),
            len(missing),
            tokens,
            time.perf_counter() - started,
            f"superseded version {stored.superseded}" if stored.superseded else None,
            timings,
        )

    def withdraw(self, source_uri: str) -> IngestResult:
        self._ensure_connected()
        with self.conn.transaction():
            removed = withdraw(self.conn, source_uri, retention_days=self.withdrawn_retention_days)
        versions = ", ".join(f"{code} v{version}" for code, version in removed) or "nothing was stored from it"
        return IngestResult(source_uri, "withdrawn", reason=versions)

    def _log_failure(self, source_uri: str, sha256: str, reason: str) -> None:
        try:
            with self.conn.transaction():
                log_event(self.conn, source_uri, "failed", sha256=sha256, detail=reason[:2000])
        except psycopg.Error:
            pass  # the database itself is what failed; the caller reports the reason


def _reason(exc: BaseException) -> str:
    if isinstance(exc, psycopg.Error):
        return f"database error: {exc.__class__.__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
    return str(exc)


def document_files(paths: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    """Files to ingest, and files skipped: folders are walked for the known formats; named files are kept
    whatever their type, so that a wrong one fails with its reason rather than vanishing."""
    chosen: list[Path] = []
    skipped: list[Path] = []
    for path in paths:
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if not child.is_file() or any(p.startswith((".", "_")) for p in child.relative_to(path).parts):
                    continue
                (chosen if child.suffix.lower() in FORMATS else skipped).append(child)
        else:
            chosen.append(path)
    return chosen, skipped


def ingest_files(
    ingestor: Ingestor, files: list[Path], on_result: Callable[[IngestResult], None] | None = None
) -> Iterator[IngestResult]:
    for path in files:
        uri = path.resolve().as_uri()
        try:
            data = path.read_bytes()
        except OSError as exc:
            result = IngestResult(uri, "failed", reason=f"cannot read the file: {exc.strerror}")
        else:
            result = ingestor.ingest(data, name=path.name, source_uri=uri)
        if on_result:
            on_result(result)
        yield result
