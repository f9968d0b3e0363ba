"""Everything the worker does to one file, callable directly: hash, skip if unchanged, parse, chunk,
scan, embed, store. Each file succeeds or fails alone; a failure leaves the database as it was.

`ingest_files` runs the same stages overlapped (the next file parses while this one embeds and the one
before is stored), with the same outcomes, reasons and log entries, in file order.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from ingest.chunker import chunk_document
from ingest.document import Header, ParseError
from ingest.embedding_parts import EmbeddingProgress, Report, embed_in_parts
from ingest.injection import header_text, scan_chunk
from ingest.parsers import FORMATS, detect_format, parse_document
from ingest.parsers.budget import Deadline, ParseLimit
from ingest.parsers.parse_server import start_parse_server
from ingest.parsers.sniff import check_content_matches
from ingest.upsert import (
    PreparedChunk,
    VersionConflict,
    adopt_bucket_object,
    check_version_claim,
    embedding_sha256,
    find_by_source_hash,
    follow_copy,
    log_event,
    reusable_embeddings,
    store_document,
    withdraw,
)
from kb_core.db.embedding_space import check_embedding_space
from kb_core.embedders.base import Embedder, EmbeddingError, Embeddings
from kb_core.file_limits import DEFAULT_MAX_DECOMPRESSED_BYTES, DEFAULT_MAX_PARSE_SECONDS
from kb_core.settings import AwsSettings
from kb_core.token_count import EMBEDDING_INPUT_LIMIT

FAILURES = (ParseError, EmbeddingError, VersionConflict, psycopg.Error)
NOTHING_STORED = "nothing was stored from it"  # a withdrawal's reason when its object held no stored version
# An upload's event for an object deleted since: nothing to do (its deletion's own event withdraws what it held).
OBJECT_GONE = "the object no longer exists (deleted since it was uploaded): nothing to ingest"


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


class _Failed(Exception):
    """A stage's failure, carried to the store stage, which logs it in file order."""


@dataclass(frozen=True)
class _Parsed:
    """A file after hashing and parsing: its chunks, or already an outcome (known bytes, or a failure)."""

    source_uri: str
    sha256: str
    started: float
    header: Header | None = None
    source_format: str = ""
    prepared: list[PreparedChunk] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    known: tuple[str, str, str] | None = None  # (source_uri, doc_code, version) stored from these bytes
    failure: str | None = None


@dataclass(frozen=True)
class _Borrowed:
    """A vector another file of this run is embedding: its embedding call and the row in it."""

    embedding: Future[Embeddings]
    row: int


@dataclass
class _Job:
    """A parsed file waiting for its vectors and its store."""

    parsed: _Parsed
    stored: dict[str, np.ndarray] = field(default_factory=dict)  # vectors reused from the database
    borrowed: dict[str, _Borrowed] = field(default_factory=dict)
    missing: list[PreparedChunk] = field(default_factory=list)  # what this file sends to the embedder
    embedding: Future[Embeddings] | None = None
    claim_s: float = 0.0


Submit = Callable[..., Future]


def _run_now(function: Callable[..., Any], *args: Any) -> Future:
    """Run now, in this thread, with the answer (or the exception) in a future."""
    future: Future = Future()
    try:
        future.set_result(function(*args))
    except Exception as exc:
        future.set_exception(exc)
    return future


def log_embedding_progress(progress: EmbeddingProgress) -> None:
    """A large file's progress as an INFO line of the worker's log (`kb worker`, the Lambda's)."""
    logging.getLogger("kosha.ingest").info(progress.line())


class Ingestor:
    """Ingests files as the writer, over one connection; check the embedding space once, up front.
    `report_embedding` hears how far a large file's embedding has got (ingest.embedding_parts)."""

    def __init__(
        self,
        conninfo: str,
        embedder: Embedder,
        *,
        max_bytes: int,
        max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
        max_parse_seconds: float = DEFAULT_MAX_PARSE_SECONDS,
        max_parse_memory_bytes: int | None = None,
        contextual_prefix: bool = True,
        withdrawn_retention_days: int | None = None,
        report_embedding: Report | None = log_embedding_progress,
    ) -> None:
        self.conninfo = conninfo
        self.report_embedding = report_embedding
        self.withdrawn_retention_days = withdrawn_retention_days  # None: keep withdrawn versions for ever
        self.contextual_prefix = contextual_prefix  # off only for the evals' ablation
        self.conn = self._connect()
        self.embedder = embedder
        self.max_bytes = max_bytes
        self.max_decompressed_bytes = max_decompressed_bytes
        self.max_parse_seconds = max_parse_seconds
        self.max_parse_memory_bytes = max_parse_memory_bytes  # None: parse in this process, uncapped
        if max_parse_memory_bytes:
            start_parse_server()  # its imports run beside the embedding model's loading, not before the first file
        with self.conn.transaction():
            check_embedding_space(self.conn, embedder.space)

    @classmethod
    def from_settings(
        cls,
        conninfo: str,
        embedder: Embedder,
        limits: AwsSettings,
        report_embedding: Report | None = log_embedding_progress,
    ) -> Ingestor:
        """With the per-file budgets and the retention the operator set (KB_MAX_*, KB_WITHDRAWN_RETENTION_DAYS)."""
        return cls(
            conninfo,
            embedder,
            max_bytes=limits.max_file_bytes,
            max_decompressed_bytes=limits.max_decompressed_bytes,
            max_parse_seconds=limits.max_parse_seconds,
            max_parse_memory_bytes=limits.max_parse_memory_bytes or None,
            withdrawn_retention_days=limits.withdrawn_retention_days,
            report_embedding=report_embedding,
        )

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

    def ingest(self, data: bytes, *, name: str, source_uri: str, limit: ParseLimit | None = None) -> IngestResult:
        """One file, start to end, in this thread. `limit`: this file's parse budget instead of
        KB_MAX_PARSE_SECONDS (the Lambda worker's, cut to its invocation's time left)."""
        admitted = self._admit(data, name=name, source_uri=source_uri, limit=limit)
        parsed = admitted if isinstance(admitted, _Parsed) else admitted()
        return self._store(self._claim(parsed, _run_now, {}), {})

    # The stages. `ingest_files` runs them overlapped: while one file embeds, the next is parsed and the one
    # before is stored. All database work stays on this thread's connection, in each file's own transactions;
    # parsing and embedding run in other threads and touch no connection.

    def _admit(
        self, data: bytes, *, name: str, source_uri: str, limit: ParseLimit | None = None
    ) -> _Parsed | Callable[[], _Parsed]:
        """Hash the bytes and look them up: a finished outcome, or the parse still to run (on any thread)."""
        started = time.perf_counter()
        sha256 = hashlib.sha256(data).hexdigest()
        # The type check first, as cheap as the hash: a document's bytes under another extension (a Markdown
        # file saved as .pdf) otherwise matched the stored version and passed as "unchanged".
        try:
            check_content_matches(detect_format(name), data, name)
        except ParseError as exc:
            return _Parsed(source_uri, sha256, started, failure=_reason(exc))
        try:
            self._ensure_connected()
            with self.conn.transaction():
                known = find_by_source_hash(self.conn, sha256)
        except psycopg.Error as exc:
            return _Parsed(source_uri, sha256, started, failure=_reason(exc))
        if known is not None:
            return _Parsed(source_uri, sha256, started, known=known)
        limit = limit or ParseLimit(self.max_parse_seconds)
        return functools.partial(self._parse, data, name, source_uri, sha256, started, limit)

    def _parse(
        self, data: bytes, name: str, source_uri: str, sha256: str, started: float, limit: ParseLimit
    ) -> _Parsed:
        """Parse, chunk and scan: CPU work alone, no database. KB_MAX_PARSE_SECONDS covers all three: scanning
        a chunk costs a few milliseconds, so a file of many thousand chunks could otherwise run past the
        worker's timeout after its parse finished in time."""
        mark = time.perf_counter()
        deadline = Deadline(limit.seconds, limit.setting)
        try:
            document = parse_document(
                data,
                name,
                max_bytes=self.max_bytes,
                max_decompressed_bytes=self.max_decompressed_bytes,
                max_parse_seconds=limit.seconds,
                max_parse_memory_bytes=self.max_parse_memory_bytes,
                parse_limit_setting=limit.setting,
            )
        except ParseError as exc:
            return _Parsed(source_uri, sha256, started, failure=_reason(exc))
        # The configured embedder's input limit; the local model windows any length, so the production one.
        max_tokens = getattr(self.embedder, "max_input_tokens", None) or EMBEDDING_INPUT_LIMIT
        header = document.header
        try:
            chunks = chunk_document(document, max_tokens=max_tokens)
            deadline.check("document", "its chunking")
            prepared = []
            fields = header_text(header.title, header.owner, header.regulatory_refs)
            for number, chunk in enumerate(chunks, start=1):
                text = chunk.embedding_text(header.title) if self.contextual_prefix else chunk.content
                findings = tuple(scan_chunk(chunk.section_path, chunk.content, fields))
                prepared.append(PreparedChunk(chunk, text, embedding_sha256(self.embedder.space.model, text), findings))
                deadline.check("document", f"the injection scan of chunk {number:,} of {len(chunks):,}")
        except ParseError as exc:
            return _Parsed(source_uri, sha256, started, failure=_reason(exc))
        return _Parsed(
            source_uri,
            sha256,
            started,
            header=header,
            source_format=document.source_format,
            prepared=prepared,
            timings={"parse": time.perf_counter() - mark},
        )

    def _claim(self, parsed: _Parsed, submit: Submit, in_flight: dict[str, _Borrowed]) -> _Job:
        """Check the file may be stored, find the vectors it can reuse (stored ones, and those an earlier
        file of this run is still embedding), and send the rest to the embedder."""
        if parsed.header is None:
            return _Job(parsed)
        mark = time.perf_counter()
        try:
            self._ensure_connected()
            with self.conn.transaction():
                known = find_by_source_hash(self.conn, parsed.sha256)  # an earlier file of this run, stored since
                if known is not None:
                    return _Job(replace(parsed, known=known))
                check_version_claim(self.conn, parsed.header, source_uri=parsed.source_uri, source_sha256=parsed.sha256)
                stored = reusable_embeddings(self.conn, [p.embedding_sha256 for p in parsed.prepared])
        except FAILURES as exc:
            return _Job(replace(parsed, failure=_reason(exc)))
        borrowed = {
            p.embedding_sha256: in_flight[p.embedding_sha256]
            for p in parsed.prepared
            if p.embedding_sha256 not in stored and p.embedding_sha256 in in_flight
        }
        missing = [
            p for p in parsed.prepared if p.embedding_sha256 not in stored and p.embedding_sha256 not in borrowed
        ]
        job = _Job(parsed, stored, borrowed, missing)
        if missing:
            job.embedding = submit(self._embed, parsed.source_uri, [p.embedding_text for p in missing])
            for row, p in enumerate(missing):
                in_flight.setdefault(p.embedding_sha256, _Borrowed(job.embedding, row))
        job.claim_s = time.perf_counter() - mark
        return job

    def _embed(self, source_uri: str, texts: list[str]) -> Embeddings:
        name = source_uri.rsplit("/", 1)[-1]
        return embed_in_parts(self.embedder, texts, name=name, report=self.report_embedding)

    def _store(self, job: _Job, in_flight: dict[str, _Borrowed]) -> IngestResult:
        """Wait for the file's vectors and store it in one transaction (or log why not)."""
        try:
            return self._store_parsed(job)
        finally:
            for p in job.missing:  # stored now, or failed: later files look in the database again
                if (entry := in_flight.get(p.embedding_sha256)) is not None and entry.embedding is job.embedding:
                    del in_flight[p.embedding_sha256]

    def _store_parsed(self, job: _Job) -> IngestResult:
        parsed = job.parsed
        timings = dict(parsed.timings)
        try:
            if parsed.failure is not None:
                raise _Failed(parsed.failure)
            if parsed.known is None:
                assert parsed.header is not None
                mark = time.perf_counter()
                vectors, embedded, tokens = self._vectors(job)
                timings["embed"] = job.claim_s + time.perf_counter() - mark
                mark = time.perf_counter()
                self._ensure_connected()
                with self.conn.transaction():
                    # A file of this run with the same bytes may have been stored while this one was embedding.
                    known = find_by_source_hash(self.conn, parsed.sha256)
                    if known is None:
                        stored = store_document(
                            self.conn,
                            parsed.header,
                            source_uri=parsed.source_uri,
                            source_format=parsed.source_format,
                            source_sha256=parsed.sha256,
                            chunks=parsed.prepared,
                            vectors=vectors,
                            embedding_tokens=tokens,
                        )
                timings["store"] = time.perf_counter() - mark
                if known is None:
                    header = parsed.header
                    return IngestResult(
                        parsed.source_uri,
                        "ingested",
                        header.doc_code,
                        header.version,
                        stored.status,
                        header.department,
                        header.classification.value,
                        parsed.source_format,
                        len(parsed.prepared),
                        sum(1 for p in parsed.prepared if p.findings),
                        embedded,
                        tokens,
                        time.perf_counter() - parsed.started,
                        f"superseded version {stored.superseded}" if stored.superseded else None,
                        timings,
                    )
                parsed = replace(parsed, known=known)
            assert parsed.known is not None
            uri, doc_code, version = parsed.known
            with self.conn.transaction():
                adopted = adopt_bucket_object(self.conn, uri, parsed.source_uri, parsed.sha256)
                log_event(
                    self.conn, parsed.source_uri, "unchanged", sha256=parsed.sha256, doc_code=doc_code, version=version
                )
            same = uri == parsed.source_uri
            return IngestResult(
                parsed.source_uri,
                "unchanged",
                doc_code,
                version,
                seconds=time.perf_counter() - parsed.started,
                reason=None if same else f"identical to {uri}" + ("; now followed from this object" if adopted else ""),
            )
        except (*FAILURES, _Failed) as exc:
            reason = str(exc) if isinstance(exc, _Failed) else _reason(exc)
            self._log_failure(parsed.source_uri, parsed.sha256, reason)
            return IngestResult(
                parsed.source_uri, "failed", reason=reason, seconds=time.perf_counter() - parsed.started
            )

    def _vectors(self, job: _Job) -> tuple[np.ndarray, int, int]:
        """The file's vectors in chunk order, how many texts it sent to the embedder, and their tokens."""
        vectors = dict(job.stored)
        embedded, tokens = len(job.missing), 0
        if job.embedding is not None:
            embeddings = job.embedding.result()  # an EmbeddingError is this file's failure
            tokens = embeddings.tokens
            vectors.update({p.embedding_sha256: v for p, v in zip(job.missing, embeddings.vectors, strict=True)})
        orphans = []
        for sha, entry in job.borrowed.items():
            try:
                vectors[sha] = entry.embedding.result().vectors[entry.row]
            except EmbeddingError:
                orphans.append(sha)  # the earlier file's embedding failed: embed its texts here
        if orphans:
            texts = {p.embedding_sha256: p.embedding_text for p in job.parsed.prepared}
            again = self.embedder.embed([texts[sha] for sha in orphans])
            vectors.update(zip(orphans, again.vectors, strict=True))
            embedded, tokens = embedded + len(orphans), tokens + again.tokens
        return np.vstack([vectors[p.embedding_sha256] for p in job.parsed.prepared]), embedded, tokens

    def withdraw(self, source_uri: str, still_there: Callable[[str], bool] | None = None) -> IngestResult:
        """Withdraw what was stored from a deleted object; `still_there` (whether an object exists) lets a
        renamed or moved file's document be followed from its new object instead (upsert.follow_copy)."""
        self._ensure_connected()
        with self.conn.transaction():
            followed = follow_copy(self.conn, source_uri, still_there) if still_there else None
            if followed is not None:
                moved = f"moved: now followed from {followed}"
                log_event(self.conn, source_uri, "unchanged", detail=moved)
                return IngestResult(source_uri, "unchanged", reason=moved)
            removed = withdraw(self.conn, source_uri, retention_days=self.withdrawn_retention_days)
        versions = ", ".join(f"{code} v{version}" for code, version in removed) or NOTHING_STORED
        return IngestResult(source_uri, "withdrawn", reason=versions)

    def log_deferred(self, source_uri: str, reason: str) -> None:
        """A file handed back to the queue unstarted (the Lambda invocation had no time left): recorded, so that
        `kb aws status` can say why should its message reach the dead-letter queue, but not as failed."""
        try:
            self._ensure_connected()
            with self.conn.transaction():
                log_event(self.conn, source_uri, "deferred", detail=reason[:2000])
        except psycopg.Error:
            pass  # the record is handed back whatever the database says; the worker's log has the reason

    def log_refused(self, source_uri: str, reason: str) -> None:
        """A file failed before it reached the ingestor (the worker refuses an object over the size limit
        unread): recorded as failed, as a parse failure is, so `kb aws status` can show why."""
        try:
            self._ensure_connected()
            with self.conn.transaction():
                log_event(self.conn, source_uri, "failed", detail=reason[:2000])
        except psycopg.Error:
            pass  # the record fails whatever the database says; the worker's log has the reason

    def _log_failure(self, source_uri: str, sha256: str, reason: str) -> None:
        try:
            with self.conn.transaction():
                log_event(self.conn, source_uri, "failed", sha256=sha256, detail=reason[:2000])
        except psycopg.Error:
            pass  # the database itself is what failed; the caller reports the reason


def result_line(result: IngestResult) -> str:
    """One file's outcome for a log: 'ingested s3://…: CMP-SOP-004 v3.1', 'failed s3://…: <why>'."""
    if result.outcome == "withdrawn" and result.reason == NOTHING_STORED:
        return f"deleted {result.source_uri}: {NOTHING_STORED}"
    if result.outcome == "unchanged" and result.reason == OBJECT_GONE:
        # Found walking it: a redriven message of a deleted object was logged "unchanged s3://…".
        return f"skipped {result.source_uri}: {OBJECT_GONE}"
    what = f"{result.doc_code} v{result.version}" if result.doc_code else result.reason or ""
    why = f" ({result.reason})" if result.doc_code and result.reason else ""
    return f"{result.outcome} {result.source_uri}: {what}{why}".rstrip(": ")


# Found walking it as an operator: a worker whose database had stopped logged "database error: OperationalError:
# connection is bad: connection to server on socket ... failed: No such file or directory", naming no fix.
DATABASE_DOWN = (
    "the database is unreachable ({cause}): nothing of this file was stored; start the database (`kb db start`, or "
    "check DATABASE_URL) and ingest it again (a queued file's message is retried; `kb aws redrive` for one in the "
    "dead-letter queue)"
)


def _database_down(exc: psycopg.Error) -> bool:
    """The connection failed or the server is shutting down (no SQLSTATE: the client's own connection error;
    08: connection exception; 57P: shutdown), not a statement that failed."""
    return isinstance(exc, psycopg.OperationalError) and (
        exc.sqlstate is None or exc.sqlstate.startswith(("08", "57P"))
    )


def _reason(exc: BaseException) -> str:
    if not isinstance(exc, psycopg.Error):
        return str(exc)
    said = f"{exc.__class__.__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return DATABASE_DOWN.format(cause=said[:200]) if _database_down(exc) else f"database error: {said}"


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
    """Ingest files in order, each alone (its own transactions, its own outcome), overlapped: the next file
    is parsed while this one embeds and the one before is stored. The embedder releases the GIL while its
    model runs, so parsing and storing cost little on top of the embedding calls. An embedder with
    `requests_in_flight` > 1 (the OpenAI one) gets that many files' embedding calls at once."""
    in_flight = max(1, int(getattr(ingestor.embedder, "requests_in_flight", 1)))
    borrowable: dict[str, _Borrowed] = {}
    parsing: deque[Future[_Parsed] | IngestResult] = deque()
    jobs: deque[_Job | IngestResult] = deque()
    # One parser thread: a second would only contend with the embedder for the cores and the GIL.
    parser = ThreadPoolExecutor(1, thread_name_prefix="kb-parse")
    embedder = ThreadPoolExecutor(in_flight, thread_name_prefix="kb-embed")

    def claim(entry: Future[_Parsed] | IngestResult) -> _Job | IngestResult:
        return (
            entry if isinstance(entry, IngestResult) else ingestor._claim(entry.result(), embedder.submit, borrowable)
        )

    def finish(job: _Job | IngestResult) -> IngestResult:
        result = job if isinstance(job, IngestResult) else ingestor._store(job, borrowable)
        if on_result:
            on_result(result)
        return result

    try:
        for path in files:
            uri = path.resolve().as_uri()
            try:
                data = path.read_bytes()
            except OSError as exc:
                parsing.append(IngestResult(uri, "failed", reason=f"cannot read the file: {exc.strerror}"))
            else:
                admitted = ingestor._admit(data, name=path.name, source_uri=uri)
                del data  # the parser holds the bytes until it is done with them
                parsing.append(_done(admitted) if isinstance(admitted, _Parsed) else parser.submit(admitted))
            # The parser works one file ahead; `in_flight` files wait for their vectors.
            while len(parsing) > 1:
                jobs.append(claim(parsing.popleft()))
                while len(jobs) > in_flight:
                    yield finish(jobs.popleft())
        while parsing:
            jobs.append(claim(parsing.popleft()))
        while jobs:
            yield finish(jobs.popleft())
    finally:
        parser.shutdown(cancel_futures=True)
        embedder.shutdown(cancel_futures=True)


def _done(value: _Parsed) -> Future[_Parsed]:
    future: Future[_Parsed] = Future()
    future.set_result(value)
    return future
