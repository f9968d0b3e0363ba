"""The retrieval audit log: one record per tool call and resource read, written before the answer leaves.

`AuditedMCPServer` wraps the two entry points every tool and every resource goes through (`call_tool`,
`read_resource`), so no tool can forget it and a new one is audited without a line of its own. Each
record holds who asked (caller and role), what (tool or resource URI, the arguments with the query
text), what the answer cited (its kb:// citations) and which of those it flagged as looking like instructions
to an AI, how many results, whether it was degraded, and how long it took. Failed calls are recorded too
(outcome 'error').

The record is written before the answer is returned. If it cannot be written, the caller gets an error
and not the answer: an unaudited answer is what the log exists to rule out. The table is append-only
in the database itself (sql/005_audit_log.sql); reading it is `kb audit` (kb_core.db.audit_log).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import CallToolResult
from psycopg import AsyncConnection
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from kb_core.roles import Role
from kb_server.citations import CitationError, parse_citation
from kb_server.db.pools import ReaderPools
from kb_server.identifiers import document_codes_in

logger = logging.getLogger(__name__)

UNAVAILABLE = "the knowledge base is temporarily unavailable (database unreachable); try again shortly"
AUDIT_FAILED = (
    "the answer was withheld because its audit record could not be written; "
    "try again shortly, and tell the operator if it persists"
)
FAILED_CALL_WAIT_S = 0.5
MAX_TEXT = 4096  # per argument string: an oversize query is recorded by its start and its length
MAX_DEPTH = 8
_INSERT = """
INSERT INTO kb.audit_log (caller, role, transport, kind, operation, arguments, citations, doc_codes,
                          result_count, degraded, outcome, error, duration_ms, flagged)
VALUES (%(caller)s, %(role)s, %(transport)s, %(kind)s, %(operation)s, %(arguments)s, %(citations)s,
        %(doc_codes)s, %(result_count)s, %(degraded)s, %(outcome)s, %(error)s, %(duration_ms)s, %(flagged)s)"""


@dataclass(frozen=True)
class Caller:
    name: str
    role: str
    transport: str  # 'stdio' (in-process too) or 'http'


@dataclass(frozen=True)
class AuditRecord:
    caller: Caller
    kind: str  # 'tool' or 'resource'
    operation: str  # the tool's name or the resource's URI
    arguments: Mapping[str, Any]
    duration_ms: float
    citations: list[str] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)  # of the citations, those of chunks flagged injection_suspect
    result_count: int = 0
    degraded: bool = False
    error: str | None = None

    def row(self) -> dict[str, Any]:
        return {
            "caller": clean_text(self.caller.name),
            "role": clean_text(self.caller.role),
            "transport": self.caller.transport,
            "kind": self.kind,
            "operation": clean_text(self.operation),
            "arguments": Jsonb(clean_value(dict(self.arguments))),
            "citations": [clean_text(c) for c in self.citations],
            "doc_codes": doc_codes_of(self.arguments, self.citations),
            "result_count": self.result_count,
            "degraded": self.degraded,
            "outcome": "ok" if self.error is None else "error",
            "error": None if self.error is None else clean_text(self.error)[:1000],
            "duration_ms": round(max(self.duration_ms, 0.0), 3),
            "flagged": [clean_text(c) for c in self.flagged],
        }

    def row_json(self) -> str:
        row = self.row()
        row["arguments"] = row["arguments"].obj
        return json.dumps(row, ensure_ascii=False)


class AuditWriter(Protocol):
    async def write(self, record: AuditRecord, *, wait_s: float | None = None) -> None:
        """Store the record or raise; `wait_s` bounds the wait for a connection (None: the pool's timeout)."""
        ...


class DatabaseAuditWriter:
    """Appends records to kb.audit_log as the server's login (which may INSERT and nothing else), on the
    connection the request already read with when there is one: the record then costs one round trip.
    Otherwise on a connection of the record's role's login (kb_server.db.pools)."""

    def __init__(self, pools: ReaderPools, *, on_request_connection: bool = True) -> None:
        self.pools = pools
        # False when the records go to another database than the reads (the primary of a read replica).
        self.on_request_connection = on_request_connection

    async def write(self, record: AuditRecord, *, wait_s: float | None = None) -> None:
        held = _held.get() if self.on_request_connection else None
        if held is not None and held.usable():
            assert held.conn is not None
            await held.conn.execute(_INSERT, record.row())
            return
        pool = await self.pools.get(Role(record.caller.role))
        async with pool.connection(timeout=wait_s) as conn:
            await conn.execute(_INSERT, record.row())


# -- one connection per request, the read's and the record's ----------------------------------------------


@dataclass
class _HeldConnection:
    pool: AsyncConnectionPool | None = None
    conn: AsyncConnection | None = None

    def usable(self) -> bool:
        return (
            self.conn is not None
            and not self.conn.closed
            and self.conn.info.transaction_status == TransactionStatus.IDLE
        )


_held: ContextVar[_HeldConnection | None] = ContextVar("kb_request_connection", default=None)


@asynccontextmanager
async def request_connection(pool: AsyncConnectionPool) -> AsyncIterator[AsyncConnection]:
    """The request's pooled connection. Inside an audited call it is taken on first use and kept until the
    call's record is written on it (one pool checkout, with its health check, per call instead of two);
    outside one, a plain pooled connection."""
    held = _held.get()
    if held is None:
        async with pool.connection() as conn:
            yield conn
        return
    if held.conn is None:
        held.conn = await pool.getconn()
        held.pool = pool
    yield held.conn


@asynccontextmanager
async def holding_request_connection() -> AsyncIterator[None]:
    held = _HeldConnection()
    token = _held.set(held)
    try:
        yield
    finally:
        _held.reset(token)
        if held.conn is not None and held.pool is not None:
            await held.pool.putconn(held.conn)  # the pool rolls back or discards a connection left unusable


class HasAuditWriter(Protocol):
    audit: AuditWriter


# -- what an answer cited --------------------------------------------------------------------------------


# verify_quote's pointers to where a quote is when not where it was cited (found walking it: the audit record of
# an answer that sent the caller to a superseded version's text did not name that version).
OTHER_CITATION_FIELDS = frozenset({"found_in", "found_in_version"})


def _fields(value: Any) -> Iterator[tuple[Mapping[str, Any], Any, Any]]:
    """(object, key, item) for every field of every object in a structured answer, depth first, in order."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield value, key, item
            yield from _fields(item)
    elif isinstance(value, list):
        for item in value:
            yield from _fields(item)


def citations_in(value: Any) -> list[str]:
    """Every citation in a structured answer (fields named `citation`, `*_citation`, `citations`, or one of
    OTHER_CITATION_FIELDS), in order, each once."""
    found: dict[str, None] = {}
    for _, key, item in _fields(value):
        if isinstance(item, str) and (
            key == "citation" or str(key).endswith("_citation") or key in OTHER_CITATION_FIELDS
        ):
            found.setdefault(item)
        elif key == "citations" and isinstance(item, list):
            found.update(dict.fromkeys(c for c in item if isinstance(c, str)))
    return list(found)


# Where a flagged item says which text was flagged: verify_quote's passage (its own citation is the one checked),
# compare_versions' newer section, and everything else's own citation.
FLAGGED_CITATION_FIELDS = ("passage_citation", "to_citation", "citation")


def flagged_in(value: Any) -> list[str]:
    """The citations of the items of a structured answer that carry `injection_suspect: true`, in order, each
    once (a document whose header is flagged names its own citation)."""
    found: dict[str, None] = {}
    for node, key, item in _fields(value):
        if key == "injection_suspect" and item is True:
            cited = next((node[k] for k in FLAGGED_CITATION_FIELDS if isinstance(node.get(k), str)), None)
            if cited is not None:
                found.setdefault(cited)
    return list(found)


@dataclass(frozen=True)
class AnswerSummary:
    """What an answer's audit record says of it."""

    citations: list[str] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    count: int = 0
    degraded: bool = False


def result_count_of(structured: Mapping[str, Any]) -> int:
    """How many results an answer holds: the items of its top-level lists of objects (chunks, documents,
    sections, changed sections); an answer without such a list is one result."""
    lists = [v for v in structured.values() if isinstance(v, list) and all(isinstance(i, Mapping) for i in v)]
    return sum(len(v) for v in lists) if lists else 1


def doc_codes_of(arguments: Mapping[str, Any], citations: Iterable[str]) -> list[str]:
    """The doc codes a record is about: those named in its arguments and those it cited (for `kb audit
    --doc`)."""
    codes: dict[str, None] = {}
    doc_code = arguments.get("doc_code")
    if isinstance(doc_code, str) and doc_code.strip():
        codes.setdefault(clean_text(doc_code.strip().upper())[:40])
    for text in [arguments.get("citation"), arguments.get("uri"), *citations]:
        if not isinstance(text, str):
            continue
        try:
            codes.setdefault(parse_citation(text).doc_code)
        except CitationError:
            # A malformed citation still names the document it was about (kb://…/CMP-SOP-004@3.1# with no
            # section): `kb audit --doc` finds the request all the same.
            if text.startswith("kb://"):
                codes.update(dict.fromkeys(document_codes_in(text[:300].upper())[:1]))
    return list(codes)


def clean_text(text: str) -> str:
    # PostgreSQL text and jsonb hold neither NUL nor lone surrogates; hostile arguments carry both, and a
    # record that cannot be stored would fail the call.
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def clean_value(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        text = clean_text(value)
        return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"… [{len(text)} characters]"
    if isinstance(value, Mapping | list | tuple) and depth >= MAX_DEPTH:
        # Hostile arguments nest hundreds deep; no tool takes more than two levels, and recursing further
        # would exhaust the stack and fail the call for want of a record.
        return f"[nested deeper than {MAX_DEPTH} levels]"
    if isinstance(value, Mapping):
        return {clean_text(str(k))[:200]: clean_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_value(v, depth + 1) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return clean_text(str(value))[:MAX_TEXT]


def summarize_tool_result(result: Any) -> AnswerSummary:
    """What a tool's answer cited, flagged and counted, and whether it was degraded."""
    if not isinstance(result, CallToolResult) or result.is_error:
        return AnswerSummary()
    structured = result.structured_content
    if not isinstance(structured, Mapping):
        return AnswerSummary(count=1)
    count = result_count_of(structured)
    if isinstance(structured.get("found"), bool):
        # verify_quote: what an auditor asks of the trail is whether the quote was found (1) or not (0); every
        # answer counted 1 (found walking it).
        count = int(structured["found"])
    return AnswerSummary(
        citations_in(structured), flagged_in(structured), count, bool(structured.get("degraded", False))
    )


def summarize_resource(contents: Any) -> AnswerSummary:
    """What a resource read cited, flagged and counted: the resources hold JSON documents."""
    citations: dict[str, None] = {}
    flagged: dict[str, None] = {}
    count = 0
    for item in contents if isinstance(contents, Iterable) else []:
        text = getattr(item, "content", None)
        try:
            payload = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            payload = None
        if isinstance(payload, Mapping):
            citations.update(dict.fromkeys(citations_in(payload)))
            flagged.update(dict.fromkeys(flagged_in(payload)))
            count += result_count_of(payload)
        else:
            count += 1
    return AnswerSummary(list(citations), list(flagged), count)


# -- the server --------------------------------------------------------------------------------------------


class AuditedMCPServer(MCPServer):
    """An MCPServer whose every tool call and resource read is recorded before its answer is returned.

    `identify(ctx)` says who is asking; the lifespan context must carry an `audit` writer.
    """

    def __init__(self, *args: Any, identify: Callable[[Context], Caller], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._identify = identify

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        async with holding_request_connection():
            return await self._audited_call_tool(name, arguments, context)

    async def read_resource(self, uri: Any, context: Context | None = None) -> Any:
        async with holding_request_connection():
            return await self._audited_read_resource(uri, context)

    async def _audited_call_tool(self, name: str, arguments: dict[str, Any], context: Context | None) -> Any:
        started = time.perf_counter()
        try:
            result = await super().call_tool(name, arguments, context)
        except Exception as exc:
            record = self._record(context, "tool", name, arguments, started, error=str(exc) or type(exc).__name__)
            await self._write_failed_call(context, record)
            raise
        error = None
        if isinstance(result, CallToolResult) and result.is_error:
            error = " ".join(getattr(c, "text", "") for c in result.content) or "error"
        record = self._record(
            context, "tool", name, arguments, started, answer=summarize_tool_result(result), error=error
        )
        await self._write(context, record, ToolError)
        return result

    async def _audited_read_resource(self, uri: Any, context: Context | None) -> Any:
        started = time.perf_counter()
        arguments = {"uri": str(uri)}
        try:
            contents = await super().read_resource(uri, context)
        except Exception as exc:
            record = self._record(
                context, "resource", str(uri), arguments, started, error=str(exc) or type(exc).__name__
            )
            await self._write_failed_call(context, record)
            raise
        record = self._record(context, "resource", str(uri), arguments, started, answer=summarize_resource(contents))
        await self._write(context, record, ResourceError)
        return contents

    def _record(
        self,
        context: Context | None,
        kind: str,
        operation: str,
        arguments: Mapping[str, Any],
        started: float,
        *,
        answer: AnswerSummary | None = None,
        error: str | None = None,
    ) -> AuditRecord:
        try:
            caller = self._identify(context) if context is not None else Caller("unknown", "none", "stdio")
        except Exception:  # an unidentified caller is still recorded; its call has failed already
            caller = Caller("unidentified", "none", "http")
        answer = answer or AnswerSummary()  # a failed call: nothing cited
        return AuditRecord(
            caller=caller,
            kind=kind,
            operation=operation,
            arguments=arguments,
            duration_ms=(time.perf_counter() - started) * 1000,
            citations=answer.citations,
            flagged=answer.flagged,
            result_count=answer.count,
            degraded=answer.degraded,
            error=error,
        )

    async def _write(
        self, context: Context | None, record: AuditRecord, failure: type[ToolError] | type[ResourceError]
    ) -> None:
        try:
            writer = _writer_of(context)
            await writer.write(record)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            # The database went away between the read and its record: an outage, which callers are told
            # about in the same words whichever of the two statements it hit.
            logger.error("audit record not written for %s %r: %r", record.kind, record.operation, exc)
            raise failure(UNAVAILABLE) from exc
        except Exception as exc:
            logger.error("audit record not written for %s %r: %r", record.kind, record.operation, exc)
            raise failure(AUDIT_FAILED) from exc

    async def _write_failed_call(self, context: Context | None, record: AuditRecord) -> None:
        """A call that failed is recorded too, but its own error is what the caller gets: it carries no answer,
        and during a database outage it is the clear "temporarily unavailable", sent without waiting out a
        second connection timeout. A record that cannot be stored then goes to the server's log instead."""
        try:
            await _writer_of(context).write(record, wait_s=FAILED_CALL_WAIT_S)
        except Exception as exc:
            logger.warning("audit record of a failed call not stored (%r); the record: %s", exc, record.row_json())


def _writer_of(context: Context | None) -> AuditWriter:
    lifespan = context.request_context.lifespan_context if context is not None else None
    writer = getattr(lifespan, "audit", None)
    if writer is None:
        raise RuntimeError("no audit writer: the server's lifespan did not provide one")
    return writer
