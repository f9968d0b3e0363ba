"""The MCP server: read-only tools and kb:// resources over the knowledge base, under the caller's role.

The lifespan owns the connection pools (one per reader role, each on that role's own login), the query
embedder and the settings. Every request runs as one reader role: over stdio (and in-process) the
configured role, over HTTP the role of the caller's bearer token (kb_server.http). Failures the calling
model can fix raise ToolError with a message saying what to change; nothing is ever returned as an error
string.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from datetime import date
from typing import Annotated, Any

import anyio
import numpy as np
import psycopg
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.types import ToolAnnotations
from psycopg import AsyncConnection
from psycopg_pool import PoolTimeout
from pydantic import BeforeValidator, Field

from kb_core.db.embedding_space import check_embedding_space
from kb_core.departments import DEPARTMENTS, DOC_CODE, DOC_STATUSES, DOC_VERSION
from kb_core.embedders import Embedder, embedding_space_for, make_embedder
from kb_core.roles import Role
from kb_core.settings import Settings
from kb_core.version import package_version
from kb_server.argument_errors import PlainArgumentErrors, not_a_boolean
from kb_server.audit import (
    UNAVAILABLE,
    AuditedMCPServer,
    AuditWriter,
    Caller,
    DatabaseAuditWriter,
    request_connection,
)
from kb_server.citations import CitationError, parse_citation
from kb_server.db.pools import ReaderPools
from kb_server.documents import (
    ListedDocument,
    StoredDocument,
    VersionStatus,
    empty_knowledge_base_hint,
    fetch_document,
    list_documents,
    readable_versions,
)
from kb_server.identifiers import document_codes_in
from kb_server.injection_warnings import (
    DOCUMENT_WARNING,
    HEADER_RULE,
    HEADER_WARNING,
    SECTION_WARNING,
    list_warning,
    search_warning,
)
from kb_server.models import (
    NEAREST_IN_MEANING_ONLY,
    NOTICE,
    NOTICE_SENTENCE,
    POINT_IN_TIME_CAVEAT,
    DocumentDetail,
    DocumentList,
    DocumentSummary,
    QuoteVerification,
    RetrievedChunk,
    SearchResult,
    Section,
    VersionComparison,
    future_as_of_hint,
    no_such_document,
    only_mentioned,
    point_in_time_hint,
    replaced_unseen_hint,
    unstored_between_hint,
    unstored_version_hint,
)
from kb_server.quotes import normalized_quote
from kb_server.readiness import ReadinessProbe, attach_probe
from kb_server.revision_history import listed_versions, unstored_between, unstored_in_force
from kb_server.search import DEFAULT_FUSION, Hit, hybrid_search
from kb_server.version_tools import comparison_of, verification_of

MAX_CHUNKS = 8
DEFAULT_TOP_K = 5
MAX_RESULT_BYTES = 12 * 1024
MAX_QUERY_CHARS = 1000
MAX_LISTED = 200
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)


class KnowledgeBaseServer(AuditedMCPServer, PlainArgumentErrors):
    """Every call audited; argument errors as one sentence. The audit wraps the rewording, so the record keeps the
    sentence the caller got, not pydantic's several lines."""


@dataclass
class KnowledgeBase:
    """What every request needs, created once by the server's lifespan."""

    settings: Settings
    pools: ReaderPools
    embedder: Embedder
    default_role: Role
    audit: AuditWriter


def build_server(
    settings: Settings,
    server_conninfo: str,
    *,
    role: Role | None = None,
    embedder: Embedder | None = None,
    audit: AuditWriter | None = None,
) -> MCPServer:
    """The MCP server. `role` is the role of stdio and in-process callers (default: KB_ROLE); `audit`
    replaces the audit log's database writer (the bench measures the call without it)."""

    probe = ReadinessProbe(server_conninfo, embedder.space if embedder else embedding_space_for(settings.embedding))

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[KnowledgeBase]:
        query_embedder = embedder or make_embedder(settings.embedding)
        load = getattr(query_embedder, "load", None)
        if load is not None:
            await anyio.to_thread.run_sync(load)  # at start-up, not on the first query
        probe.embedder_loaded = True
        pools = ReaderPools(server_conninfo, settings.database)
        primary: ReaderPools | None = None
        first = await pools.get(role or settings.server.role)
        try:
            async with first.connection() as conn:
                replica = (await (await conn.execute("SELECT pg_is_in_recovery()")).fetchone() or (False,))[0]
            await anyio.to_thread.run_sync(_check_space, server_conninfo, query_embedder)
            writer: AuditWriter
            if audit is not None:
                writer = audit
            elif replica:  # a replica takes no writes: the records go to the primary
                primary = ReaderPools(audit_target(settings), settings.database)
                writer = DatabaseAuditWriter(primary, on_request_connection=False)
            else:
                writer = DatabaseAuditWriter(pools)
            yield KnowledgeBase(settings, pools, query_embedder, role or settings.server.role, writer)
        finally:
            await pools.close()
            if primary is not None:
                await primary.close()

    server = KnowledgeBaseServer(
        identify=lambda ctx: caller_of(ctx, settings.audit.stdio_caller),
        name="kosha-kb",
        version=package_version(),
        title="Kosha knowledge base",
        instructions=(
            "Search Kosha Financial's internal documents (policies, SOPs, runbooks, API references) and cite "
            "them. Results are ranked chunks with version-pinned citations (kb://department/DOC-CODE@version#section: "
            "reading one returns exactly that version's text); you write the answer. Pass as_of (a date) to ask "
            "what the documents said on that date. " + NOTICE_SENTENCE + "."
        ),
        lifespan=lifespan,
    )
    _register_tools(server)
    server.refuse_unknown_arguments()
    _register_resources(server)
    attach_probe(server, probe)
    return server


class ReplicaWithoutPrimary(RuntimeError):
    pass


REPLICA_WITHOUT_PRIMARY = (
    "KB_SERVER_DATABASE_URL is a read replica, which cannot store the audit record every call writes: set "
    "KB_AUDIT_WRITE_DATABASE_URL to the primary (postgresql://kb_server:...@primary/kosha_kb)"
)


def audit_target(settings: Settings) -> str:
    """Where the audit records go when the server reads from a replica: the primary, as kb_server."""
    if settings.database.audit_write_url is None:
        raise ReplicaWithoutPrimary(REPLICA_WITHOUT_PRIMARY)
    return psycopg.conninfo.make_conninfo(settings.database.audit_write_url.get_secret_value())


def _check_space(conninfo: str, embedder: Embedder) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        check_embedding_space(conn, embedder.space)


def knowledge_base(ctx: Context) -> KnowledgeBase:
    kb = ctx.request_context.lifespan_context
    assert isinstance(kb, KnowledgeBase)
    return kb


def caller_role(ctx: Context) -> Role:
    """The HTTP caller's role comes only from its bearer token (set by kb_server.http); never a header."""
    request = ctx.request_context.request
    if request is None:
        return knowledge_base(ctx).default_role
    role = getattr(getattr(request, "state", None), "kb_role", None)
    if not isinstance(role, Role):
        raise ToolError("unauthenticated: present a bearer token")  # unreachable behind the middleware
    return role


def caller_of(ctx: Context, stdio_caller: str) -> Caller:
    """Who the audit log records: the token's name over HTTP, KB_STDIO_CALLER over stdio."""
    role = caller_role(ctx)
    request = ctx.request_context.request
    if request is None:
        return Caller(stdio_caller, role.value, "stdio")
    return Caller(str(getattr(request.state, "kb_caller", "unknown")), role.value, "http")


@asynccontextmanager
async def connection(ctx: Context) -> AsyncIterator[AsyncConnection]:
    """A pooled connection; a database outage becomes a clear, fast error instead of a hang."""
    try:
        pool = await knowledge_base(ctx).pools.get(caller_role(ctx))
        async with request_connection(pool) as conn:
            yield conn
    except (PoolTimeout, psycopg.OperationalError) as exc:
        raise ToolError(UNAVAILABLE) from exc


def _as_searched(ch: str) -> str:
    category = unicodedata.category(ch)
    return " " if category == "Cc" else "" if category[0] == "C" else ch


def clean_query(query: str) -> str:
    """The query as searched (control characters read as spaces, invisible format characters dropped,
    whitespace collapsed), or a ToolError saying what to change: the MCP tool and `kb search` refuse the same
    queries."""
    # A control character separates ("wire\x00transfer" is two words, not "wiretransfer"); a zero-width or
    # soft-hyphen character inside a word is not there for a reader, so the word stays whole.
    text = "".join(map(_as_searched, query))
    text = " ".join(text.split())
    if not text:
        raise ToolError("query is empty: ask in words, for example 'wire transfer cut-off time'")
    if len(text) > MAX_QUERY_CHARS:
        raise ToolError(f"query is {len(text)} characters long; keep it under {MAX_QUERY_CHARS}")
    # Punctuation or symbols alone match no word, so the answer would be the chunks nearest a meaningless vector.
    if not any(unicodedata.category(ch)[0] in "LN" for ch in text):
        raise ToolError(f"query {text!r} has no words: ask in words, for example 'wire transfer cut-off time'")
    return text


def check_departments(departments: list[str] | None) -> list[str] | None:
    """The departments named, as stored (case and surrounding spaces do not matter, as for doc codes)."""
    if not departments:
        return None
    named = [d.strip().lower() for d in departments]
    unknown = [given for given, d in zip(departments, named, strict=True) if d not in DEPARTMENTS]
    if unknown:
        raise ToolError(f"unknown department {unknown[0]!r}; the departments are: {', '.join(DEPARTMENTS)}")
    return sorted(set(named))


def _check_doc_code(doc_code: str) -> str:
    code = doc_code.strip().upper()
    if not DOC_CODE.match(code):
        raise ToolError(_malformed_code(doc_code))
    return code


def _check_version(version: str) -> str:
    if not DOC_VERSION.match(version.strip()):
        raise ToolError(_malformed_version(version))
    return version.strip()


def _malformed_code(doc_code: str) -> str:
    return f"malformed doc code {doc_code[:40]!r}: the form is DEP-TYP-NNN, for example CMP-SOP-004"


def _malformed_version(version: str) -> str:
    return f"malformed version {version[:20]!r}: use dotted numbers such as 3.1"


def _not_found(
    doc_code: str, version: str | None = None, as_of: date | None = None, readable: Sequence[VersionStatus] = ()
) -> str:
    # The same words for a document that does not exist and one above the caller's ceiling; when other
    # versions of it are readable (the one asked for was withdrawn, or not yet in force), they are named,
    # so the caller can ask for one by version instead of concluding the document is gone.
    which = f"{doc_code} version {version}" if version else doc_code
    when = f" in force on {as_of.isoformat()}" if as_of else ""
    if not readable:
        return f"no document {which}{when} is available to you; list_documents shows what you can read"
    what = "no effective version" if version is None and as_of is None else f"no version {version}" if version else ""
    what = what or f"no version in force on {as_of.isoformat() if as_of else ''}"
    listed = ", ".join(v.describe() for v in readable[:6]) + (", …" if len(readable) > 6 else "")
    return f"{doc_code} has {what}; its versions you may read: {listed}; ask for one by version"


async def _not_found_in(
    conn: AsyncConnection, ctx: Context, code: str, version: str | None = None, as_of: date | None = None
) -> str:
    readable = await readable_versions(conn, caller_role(ctx), code)
    said = _not_found(code, version, as_of, readable)
    if as_of is None or not readable:
        return said
    # Nothing stored was in force then; the earliest later version's revision history may list what was (found
    # walking it: "CMP-POL-001 has no version in force on 2025-12-01" read as "no AML policy was in force", where
    # v4.0's history lists v3.1, effective 2025-01-20, never stored).
    later = min(
        (v for v in readable if v.effective_date > as_of and v.status != "draft"),
        key=lambda v: v.effective_date,
        default=None,
    )
    document = await fetch_document(conn, caller_role(ctx), code, later.version) if later else None
    if later is None or document is None:
        return said
    history = listed_versions((s.section_path, s.content) for s in document.sections)
    unstored = unstored_in_force(history, {v.version for v in readable}, after=date.min, on=as_of)
    if unstored is None:
        return said
    missing, since = unstored
    return (
        f"{said}. v{later.version}'s revision history lists v{missing} as effective {since.isoformat()}, which is "
        f"not among the versions you may read here: by the document's own record it was in force on "
        f"{as_of.isoformat()}"
    )


def stripped(value: Any) -> Any:
    """Spaces around a text argument are not part of it (" 2025-01-01 " was refused as no date, where a doc code
    with spaces around it was read)."""
    return value.strip() if isinstance(value, str) else value


AS_OF = Field(
    description="A date (YYYY-MM-DD): answer with each document's version in force on that date (superseded and "
    "withdrawn versions included when they were in force). Default: the current versions."
)


async def _embed_query(kb: KnowledgeBase, text: str) -> tuple[np.ndarray | None, str | None]:
    timeout = kb.settings.embedding.query_timeout_s
    try:
        with anyio.fail_after(timeout):
            vector = await anyio.to_thread.run_sync(kb.embedder.embed_query, text, abandon_on_cancel=True)
        return vector, None
    except TimeoutError:
        return None, f"the query embedding timed out after {timeout:g} s; results come from full-text search only"
    except Exception as exc:  # any embedder failure: answer from full text rather than fail
        return None, f"the query embedding failed ({exc.__class__.__name__}); results come from full-text search only"


def _size(model: Any) -> int:
    return len(model.model_dump_json().encode())


def capped_result(
    query: str, hits: list[Hit], *, degraded_reason: str | None, current_everywhere: bool = True
) -> SearchResult:
    """At most MAX_CHUNKS chunks and MAX_RESULT_BYTES of JSON, whatever top_k asked. `current_everywhere`: the
    search read today's versions of every department (no as_of, no department filter)."""
    result = SearchResult(
        query=query,
        documents=[],
        degraded=degraded_reason is not None,
        degraded_reason=degraded_reason,
        truncated=len(hits) > MAX_CHUNKS,
    )
    if hits and degraded_reason is None and all(hit.text_rank is None for hit in hits[:MAX_CHUNKS]):
        result.hint = NEAREST_IN_MEANING_ONLY
    # A code the caller may read puts its document's chunk first, with the identifier bonus; so when none has it,
    # the code names nothing readable (the same words whether it exists above the ceiling or not at all).
    codes = document_codes_in(query)
    if hits and codes and all(hit.score < DEFAULT_FUSION.identifier_bonus for hit in hits[:MAX_CHUNKS]):
        result.hint = no_such_document(codes)
    elif hits and codes and current_everywhere and not any(hit.doc_code in codes for hit in hits[:MAX_CHUNKS]):
        # Chunks of other documents that cite the code: found walking it, a withdrawn document's code brought
        # back the documents quoting it, with nothing to say that the document itself is not there to read.
        result.hint = only_mentioned(codes)
    for hit in hits[:MAX_CHUNKS]:
        chunk = RetrievedChunk(
            doc_code=hit.doc_code,
            title=hit.title,
            version=hit.version,
            effective_date=hit.effective_date,
            department=hit.department,
            section_path=hit.section_path,
            content=hit.content,
            score=round(hit.score, 6),
            citation=hit.citation,
            injection_suspect=hit.injection_suspect,
            injection_rule=hit.injection_rule if hit.injection_suspect else None,
            status=hit.status,
            withdrawn_at=hit.withdrawn_at,
        )
        result.documents.append(chunk)
        if _size(result) > MAX_RESULT_BYTES:
            result.documents.pop()
            result.truncated = True
            if not result.documents:  # one chunk alone over the cap: keep its start, point to the rest
                room = MAX_RESULT_BYTES - _size(result) - 1024
                chunk.content = chunk.content.encode()[: max(room, 0)].decode(errors="ignore")
                chunk.content += " … [truncated: read the citation for the whole section]"
                result.documents.append(chunk)
            break
    suspects = sum(1 for c in result.documents if c.injection_suspect)
    if suspects:
        result.warning = search_warning(suspects)
    return result


def _register_tools(server: MCPServer) -> None:
    @server.tool(
        title="Search the knowledge base",
        description=(
            "Hybrid (semantic + keyword) search over Kosha Financial's effective internal documents (or, with as_of, "
            "the versions in force on that date). Returns up to 8 ranked chunks, each with doc_code, version, "
            "section_path, content and a citation pinned to its version (kb://department/DOC-CODE@version#section); "
            "cite it as given. " + NOTICE_SENTENCE + "."
        ),
        annotations=READ_ONLY,
    )
    async def search_knowledge_base(
        query: Annotated[str, Field(description="What to look for, in words.", max_length=4 * MAX_QUERY_CHARS)],
        ctx: Context,
        departments: Annotated[
            list[str] | None,
            Field(description=f"Only these departments: {', '.join(DEPARTMENTS)}.", max_length=len(DEPARTMENTS)),
        ] = None,
        top_k: Annotated[
            int | None,
            # After Field: before it, pydantic writes the bounds into the schema as ge/le, not minimum/maximum.
            Field(ge=1, le=50, description="How many chunks to return (at most 8 are); null: 5."),
            BeforeValidator(not_a_boolean),
        ] = DEFAULT_TOP_K,
        as_of: Annotated[date | None, AS_OF, BeforeValidator(stripped)] = None,
    ) -> SearchResult:
        # null as for every other optional argument: clients in strict function-calling mode send null for an
        # argument they leave out (found walking it: "top_k must be a whole number ... (got null)").
        top_k = DEFAULT_TOP_K if top_k is None else top_k
        kb = knowledge_base(ctx)
        text = clean_query(query)
        wanted = check_departments(departments)
        role = caller_role(ctx)
        vector, degraded = await _embed_query(kb, text)
        async with connection(ctx) as conn:
            hits = await hybrid_search(
                conn,
                role,
                text=text,
                vector=vector,
                departments=wanted,
                limit=min(top_k, MAX_CHUNKS) + 1,
                ef_search=kb.settings.server.ef_search,
                as_of=as_of,
            )
        capped = capped_result(
            text,
            hits[: min(top_k, MAX_CHUNKS)],
            degraded_reason=degraded,
            current_everywhere=as_of is None and wanted is None,
        )
        capped.truncated = capped.truncated or (top_k > MAX_CHUNKS and len(hits) > MAX_CHUNKS)
        if not hits:
            async with connection(ctx) as conn:
                capped.hint = await empty_knowledge_base_hint(conn, role, as_of=as_of, departments=wanted)
        elif as_of is not None and capped.hint is None and any(d.status != "effective" for d in capped.documents):
            capped.hint = POINT_IN_TIME_CAVEAT
        elif as_of is not None and capped.hint is None and as_of > date.today():
            capped.hint = future_as_of_hint(as_of)
        return capped

    @server.tool(
        title="Get a document",
        description=(
            "A document's metadata and its sections, by doc code (for example CMP-SOP-004). Any version, "
            "superseded and withdrawn ones included; with as_of, the version in force on that date; without "
            "either, the effective one. Each section has a citation pinned to the version "
            "(kb://department/DOC-CODE@version#section). " + NOTICE_SENTENCE + "."
        ),
        annotations=READ_ONLY,
    )
    async def get_document(
        doc_code: Annotated[str, Field(description="For example CMP-SOP-004.", max_length=40)],
        ctx: Context,
        version: Annotated[
            str | None, Field(description="For example 2.0; default: the effective version.", max_length=20)
        ] = None,
        as_of: Annotated[date | None, AS_OF, BeforeValidator(stripped)] = None,
    ) -> DocumentDetail:
        code = _check_doc_code(doc_code)
        pinned = _check_version(version) if version is not None else None
        if pinned is not None and as_of is not None:
            raise ToolError("give a version or an as_of date, not both: a version names one text, as_of finds it")
        async with connection(ctx) as conn:
            document = await fetch_document(conn, caller_role(ctx), code, pinned, as_of=as_of)
            if document is None:
                raise ToolError(await _not_found_in(conn, ctx, code, pinned, as_of))
            detail = document_detail(document)
            if as_of is not None and as_of > date.today():
                detail.hint = future_as_of_hint(as_of)
            elif as_of is not None and document.status == "superseded" and document.next_stored() is None:
                # Found walking it: a version replaced by one above the caller's ceiling came back as in force
                # for a date after the replacement, without a word.
                detail.hint = replaced_unseen_hint(document.doc_code, document.version, as_of)
            elif as_of is not None and (following := document.next_stored()) is not None:
                detail.hint = point_in_time_hint(document.doc_code, document.version, as_of, following)
                # The history of the version that replaced it may name one in between that was never stored.
                later = await fetch_document(conn, caller_role(ctx), code, following[0])
                history = listed_versions((s.section_path, s.content) for s in later.sections) if later else []
                stored = {v for v, _, _ in document.stored_versions}
                unstored = unstored_in_force(history, stored, after=document.effective_date, on=as_of)
                if unstored is not None:
                    detail.hint = unstored_version_hint(document.doc_code, document.version, as_of, following, unstored)
        return detail

    @server.tool(
        name="list_documents",
        title="List documents",
        description=(
            "The document versions your role may read, optionally of one department and one status; with as_of, "
            "each document's version in force on that date. Withdrawn versions are listed only with "
            "status=withdrawn (or as_of a date when they were in force)."
        ),
        annotations=READ_ONLY,
    )
    async def list_documents_tool(
        ctx: Context,
        department: Annotated[
            str | None, Field(description=f"One of: {', '.join(DEPARTMENTS)}.", max_length=40)
        ] = None,
        status: Annotated[
            str | None, Field(description="effective, superseded, draft or withdrawn.", max_length=20)
        ] = None,
        as_of: Annotated[date | None, AS_OF, BeforeValidator(stripped)] = None,
    ) -> DocumentList:
        if department is not None:
            (department,) = check_departments([department]) or [department]
        status = status.strip().lower() if status is not None else None
        if status is not None and status not in DOC_STATUSES:
            raise ToolError(f"unknown status {status[:20]!r}; use {', '.join(DOC_STATUSES[:-1])} or {DOC_STATUSES[-1]}")
        async with connection(ctx) as conn:
            rows, total = await list_documents(
                conn, caller_role(ctx), department=department, status=status, limit=MAX_LISTED, as_of=as_of
            )
            hint = None
            if not rows and status in (None, "effective"):
                # a status filter empties a list for its own reason; without one, say why nothing is there
                hint = await empty_knowledge_base_hint(
                    conn, caller_role(ctx), as_of=as_of, departments=[department] if department else None
                )
        summaries = [summary_of(row) for row in rows]
        flagged = sum(summary.injection_suspect for summary in summaries)
        return DocumentList(
            documents=summaries,
            total=total,
            truncated=total > len(summaries),
            hint=hint,
            warning=list_warning(flagged) if flagged else None,
        )

    @server.tool(
        title="Compare two versions of a document",
        description=(
            "What changed between two versions of a document (for example CMP-SOP-004 2.0 and 3.1): sections "
            "added, removed and changed, each changed sentence beside its counterpart, with citations pinned to "
            "both versions. " + NOTICE_SENTENCE + "."
        ),
        annotations=READ_ONLY,
    )
    async def compare_versions(
        doc_code: Annotated[str, Field(description="For example CMP-SOP-004.", max_length=40)],
        from_version: Annotated[str, Field(description="The older version, for example 2.0.", max_length=20)],
        to_version: Annotated[str, Field(description="The newer version, for example 3.1.", max_length=20)],
        ctx: Context,
    ) -> VersionComparison:
        code = _check_doc_code(doc_code)
        versions = [_check_version(v) for v in (from_version, to_version)]
        read: list[StoredDocument] = []
        async with connection(ctx) as conn:
            for version in versions:
                document = await fetch_document(conn, caller_role(ctx), code, version)
                if document is None:
                    raise ToolError(await _not_found_in(conn, ctx, code, version))
                read.append(document)
        comparison = comparison_of(*read)
        # Found walking it as a compliance officer: CMP-SOP-004 2.0 -> 3.1 showed the $10,000 -> $7,500 change
        # against 3.1's 2026-03-01, though 3.1's own history lists 3.0 (2025-10-01), never stored, in between.
        older, newer = sorted(read, key=lambda d: d.effective_date)
        history = listed_versions((s.section_path, s.content) for s in newer.sections)
        stored = {v for v, _, _ in newer.stored_versions}
        between = unstored_between(history, stored, after=older.effective_date, before=newer.effective_date)
        if between:
            comparison.hint = unstored_between_hint(older.version, newer.version, newer.effective_date, between)
        return comparison

    @server.tool(
        title="Verify a quote against its citation",
        description=(
            "Check that a quote appears in the cited text before you rely on it: found is true when it does "
            "(case, whitespace, typographic quotes and dashes aside); otherwise the closest passage in the cited "
            "version's section, its similarity score (0-1) and the words where the two differ (differences). "
            + NOTICE_SENTENCE
            + "."
        ),
        annotations=READ_ONLY,
    )
    async def verify_quote(
        citation: Annotated[
            str, Field(description="A kb:// citation as the tools give it: kb://department/DOC@version#section.")
        ],
        quote: Annotated[str, Field(description="The text you quote from it.", max_length=4 * MAX_QUERY_CHARS)],
        ctx: Context,
    ) -> QuoteVerification:
        try:
            cited = parse_citation(citation[:300])
        except CitationError as exc:
            raise ToolError(str(exc)) from None
        if not normalized_quote(quote):
            raise ToolError("quote is empty: pass the words you quote from the cited section")
        if cited.department not in DEPARTMENTS:
            raise ToolError(_unknown_department(cited.department))
        version = _check_version(cited.version) if cited.version is not None else None
        code = _check_doc_code(cited.doc_code)
        async with connection(ctx) as conn:
            document = await fetch_document(conn, caller_role(ctx), code, version)
            if document is None:
                raise ToolError(await _not_found_in(conn, ctx, code, version))
        if document.department != cited.department:
            raise ToolError(_wrong_department(document, cited.department, version))
        result = verification_of(document, cited.section, quote)
        if result is None:
            raise ToolError(_no_section(document, cited.section or ""))
        if not result.found and result.found_in is None:
            async with connection(ctx) as conn:
                await _find_in_other_versions(conn, caller_role(ctx), document, quote, result)
        return result


async def _find_in_other_versions(
    conn: AsyncConnection, role: Role, document: StoredDocument, quote: str, result: QuoteVerification
) -> None:
    """Point to the version that says it, when another readable version holds the quote word for word: a sentence
    of a superseded version checked against the current one came back 'not found' with nothing to say it had been
    the document's text (found walking it)."""
    for other in await readable_versions(conn, role, document.doc_code):
        if other.version == document.version:
            continue
        stored = await fetch_document(conn, role, document.doc_code, other.version)
        found = verification_of(stored, None, quote) if stored is not None else None
        if found is not None and found.found and found.passage_citation:
            result.found_in_version, result.found_in_version_status = found.passage_citation, other.status
            return


def _unknown_department(department: str) -> str:
    # Departments are lowercase in a citation (its resource URI is case-sensitive): name the one meant.
    meant = f" (did you mean {department.lower()!r}?)" if department.lower() in DEPARTMENTS else ""
    return (
        f"unknown department {department[:40]!r} in the citation{meant}; the departments are: {', '.join(DEPARTMENTS)}"
    )


def _wrong_department(document: StoredDocument, department: str, version: str | None) -> str:
    # The caller may read it (fetch_document is under its ceiling): pointing to the right citation tells it
    # nothing it could not list, where "not available" would send it looking elsewhere.
    pinned = f"@{version}" if version else ""
    return (
        f"{document.doc_code} is a {document.department} document, not {department[:40]}: read "
        f"kb://{document.department}/{document.doc_code}{pinned}"
    )


def _no_section(document: StoredDocument, section: str) -> str:
    anchors = [stored.anchor for stored in document.sections]
    listed = ", ".join(f"#{a}" for a in anchors[:12]) + (", …" if len(anchors) > 12 else "")
    return f"{document.doc_code} version {document.version} has no section #{section[:40]}; its sections: {listed}"


def summary_of(document: ListedDocument) -> DocumentSummary:
    metadata = {f.name: getattr(document, f.name) for f in fields(ListedDocument)}
    suspect = document.injection_rule is not None
    return DocumentSummary(**metadata, citation=document.citation, injection_suspect=suspect)


def document_detail(document: StoredDocument) -> DocumentDetail:
    detail = DocumentDetail(
        **summary_of(document).model_dump(),
        regulatory_refs=document.regulatory_refs,
        other_versions=[v for v in document.versions if v != document.version],
        sections=[],
    )
    rules = [set((s.injection_rule or "").split(",")) - {""} for s in document.sections]
    if any(HEADER_RULE in r for r in rules):
        detail.injection_suspect, detail.injection_rule = True, HEADER_RULE  # its title, owner or refs
    for section in document.sections:
        entry = Section(
            section_path=section.section_path or document.title,
            citation=document.section_citation(section.anchor),
            content=section.content,
            injection_suspect=section.injection_suspect,
            injection_rule=section.injection_rule if section.injection_suspect else None,
        )
        detail.sections.append(entry)
        if not detail.truncated and _size(detail) > MAX_RESULT_BYTES:
            entry.content = None
            detail.truncated = True
        elif detail.truncated:
            entry.content = None
    if detail.injection_suspect:
        # Found walking it: "some sections contain text ..." for a document whose sections were clean and whose
        # title was the cause.
        others = any(r - {HEADER_RULE} for r in rules)
        detail.warning = HEADER_WARNING + ("; so does the text of some sections" if others else "")
    elif any(s.injection_suspect for s in detail.sections):
        detail.warning = DOCUMENT_WARNING
    return detail


def _register_resources(server: MCPServer) -> None:
    async def read(ctx: Context, department: str, doc_code: str, version: str | None = None) -> StoredDocument:
        code = doc_code.upper()
        if department not in DEPARTMENTS:
            raise ResourceNotFoundError(_unknown_department(department))
        # Malformed (`CMP-SOP-004@`, `@v3.1`) says what to fix, as the tools do: a form tells nothing of what
        # exists. "Not available to you" is for well-formed codes and versions alone.
        if not DOC_CODE.match(code):
            raise ResourceNotFoundError(_malformed_code(doc_code))
        if version is not None and not DOC_VERSION.match(version):
            raise ResourceNotFoundError(_malformed_version(version))
        try:
            async with connection(ctx) as conn:
                document = await fetch_document(conn, caller_role(ctx), code, version)
                missing = await _not_found_in(conn, ctx, code, version) if document is None else None
        except ToolError as exc:
            # The database is down: an internal error (-32603), not "invalid params" (-32602), which told a
            # client its own URI was wrong and not to retry (found walking it).
            raise ResourceError(str(exc)) from exc
        if document is None:
            raise ResourceNotFoundError(missing or _not_found(code, version))
        if document.department != department:
            raise ResourceNotFoundError(_wrong_department(document, department, version))
        return document

    def section_of(document: StoredDocument, section: str) -> str:
        for stored in document.sections:
            if stored.anchor == section:
                return json.dumps(
                    {
                        "notice": NOTICE,
                        "doc_code": document.doc_code,
                        "title": document.title,
                        "version": document.version,
                        "status": document.status,
                        "effective_date": document.effective_date.isoformat(),
                        "withdrawn_at": document.withdrawn_at.isoformat() if document.withdrawn_at else None,
                        "department": document.department,
                        "section_path": stored.section_path,
                        "citation": document.section_citation(section),
                        "content": stored.content,
                        "injection_suspect": stored.injection_suspect,
                        "injection_rule": stored.injection_rule if stored.injection_suspect else None,
                        "warning": SECTION_WARNING if stored.injection_suspect else None,
                    }
                )
        raise ResourceNotFoundError(_no_section(document, section))

    # Pinned templates first: the resource manager tries templates in order, and the unpinned ones would
    # otherwise match "CMP-SOP-004@2.0" as a doc code.
    @server.resource(
        "kb://{department}/{doc_code}@{version}",
        name="document_version",
        mime_type="application/json",
        description="One version of a document with its sections, e.g. kb://compliance/CMP-SOP-004@2.0 "
        "(superseded and withdrawn versions too). " + NOTICE_SENTENCE + ".",
    )
    async def document_version_resource(department: str, doc_code: str, version: str, ctx: Context) -> str:
        return document_detail(await read(ctx, department, doc_code, version)).model_dump_json()

    @server.resource(
        "kb://{department}/{doc_code}@{version}{#section}",
        name="section_version",
        mime_type="application/json",
        description="One cited section of one version, e.g. kb://compliance/CMP-SOP-004@2.0#4.2: exactly the text "
        "that version says, whatever has superseded it since. " + NOTICE_SENTENCE + ".",
    )
    async def section_version_resource(department: str, doc_code: str, version: str, section: str, ctx: Context) -> str:
        return section_of(await read(ctx, department, doc_code, version), section)

    @server.resource(
        "kb://{department}/{doc_code}",
        name="document",
        mime_type="application/json",
        description="A document (its effective version) with its sections; each section's citation is pinned "
        "to that version. " + NOTICE_SENTENCE + ".",
    )
    async def document_resource(department: str, doc_code: str, ctx: Context) -> str:
        return document_detail(await read(ctx, department, doc_code)).model_dump_json()

    @server.resource(
        "kb://{department}/{doc_code}{#section}",
        name="section",
        mime_type="application/json",
        description="One section of a document's effective version, e.g. kb://compliance/CMP-SOP-004#4.2 (its "
        "citation field names the version). " + NOTICE_SENTENCE + ".",
    )
    async def section_resource(department: str, doc_code: str, section: str, ctx: Context) -> str:
        return section_of(await read(ctx, department, doc_code), section)
