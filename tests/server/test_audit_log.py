"""The audit log, through real MCP client sessions (in-process, stdio and HTTP) and a real PostgreSQL: one
record per tool call and resource read, written before the answer leaves, append-only in the database."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import psycopg
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR
from psycopg import sql
from psycopg.rows import dict_row
from tests.server.conftest import VENV_BIN, client_as, client_called, client_with, database_url, records, unique_caller
from tests.support.documents import markdown_document

from kb_core.db.targets import INGEST_LOGIN, SERVER_LOGIN, reader_login
from kb_core.embedders.base import EmbeddingError
from kb_core.roles import Role
from kb_core.settings import load_settings
from kb_server.audit import AUDIT_FAILED, UNAVAILABLE
from kb_server.server import build_server

pytestmark = pytest.mark.anyio


async def test_every_tool_call_and_resource_read_writes_exactly_one_record_with_the_citations_returned(
    corpus_database, local_embedder
):
    caller = unique_caller("claude-desktop")
    async with client_called(corpus_database.targets.server, Role.ANALYST, local_embedder, caller) as client:
        search = await client.call_tool("search_knowledge_base", {"query": "enhanced due diligence threshold"})
        document = await client.call_tool("get_document", {"doc_code": "CMP-SOP-004", "version": "2.0"})
        listed = await client.call_tool("list_documents", {"department": "compliance"})
        section_uri = document.structured_content["sections"][3]["citation"]
        section = await client.read_resource(section_uri)
        whole = await client.read_resource("kb://compliance/CMP-SOP-004")
        missing = await client.call_tool("get_document", {"doc_code": "CMP-SOP-999"})
    rows = records(corpus_database.targets.owner, caller)

    assert [(r["kind"], r["operation"], r["outcome"]) for r in rows] == [
        ("tool", "search_knowledge_base", "ok"),
        ("tool", "get_document", "ok"),
        ("tool", "list_documents", "ok"),
        ("resource", section_uri, "ok"),
        ("resource", "kb://compliance/CMP-SOP-004", "ok"),
        ("tool", "get_document", "error"),
    ]
    assert all(r["role"] == "analyst" and r["transport"] == "stdio" for r in rows)
    found, got, in_list, read, read_whole, error = rows

    chunks = search.structured_content["documents"]
    assert found["arguments"] == {"query": "enhanced due diligence threshold"}
    assert found["citations"] == list(dict.fromkeys(c["citation"] for c in chunks))
    assert found["result_count"] == len(chunks) > 0 and found["degraded"] is False
    assert "CMP-SOP-004" in found["doc_codes"]

    sections = document.structured_content["sections"]
    assert got["arguments"] == {"doc_code": "CMP-SOP-004", "version": "2.0"}
    assert got["citations"] == [document.structured_content["citation"], *(s["citation"] for s in sections)]
    assert got["result_count"] == len(sections) and got["doc_codes"] == ["CMP-SOP-004"]

    assert in_list["result_count"] == len(listed.structured_content["documents"])
    assert in_list["citations"] == list(dict.fromkeys(d["citation"] for d in listed.structured_content["documents"]))

    assert read["citations"] == [section_uri] and read["result_count"] == 1 and section.contents
    assert read_whole["result_count"] == len(sections) >= 1 and whole.contents

    assert missing.is_error and error["citations"] == [] and error["result_count"] == 0
    assert "no document CMP-SOP-999" in error["error"]
    assert all(r["duration_ms"] > 0 for r in rows)


async def test_a_quote_found_elsewhere_is_recorded_with_the_citation_the_answer_pointed_to(
    corpus_database, local_embedder
):
    # Found walking it: verify_quote's answer sent the caller to v2.0's text (found_in_version), and the record
    # listed only the v3.1 citation that was checked.
    caller = unique_caller("auditor")
    async with client_called(corpus_database.targets.server, Role.ANALYST, local_embedder, caller) as client:
        result = await client.call_tool(
            "verify_quote",
            {"citation": "kb://compliance/CMP-SOP-004@3.1#4.2", "quote": "$10,000 or more in cash-equivalent activity"},
        )
    (row,) = records(corpus_database.targets.owner, caller)
    pointed = result.structured_content["found_in_version"]
    assert pointed and pointed.startswith("kb://compliance/CMP-SOP-004@2.0")
    assert pointed in row["citations"] and "kb://compliance/CMP-SOP-004@3.1#4.2" in row["citations"]


class BrokenEmbedder:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def space(self):  # type: ignore[no-untyped-def]
        return self.inner.space

    def embed_query(self, text: str) -> np.ndarray:
        raise EmbeddingError("the embeddings API answered HTTP 503")


async def test_a_degraded_answer_is_recorded_as_degraded(corpus_database, local_embedder):
    caller = unique_caller("degraded")
    broken = BrokenEmbedder(local_embedder)
    async with client_called(corpus_database.targets.server, Role.SUPPORT_AGENT, broken, caller) as client:
        result = await client.call_tool("search_knowledge_base", {"query": "chargeback response deadline"})
    (row,) = records(corpus_database.targets.owner, caller)
    assert result.structured_content["degraded"] is True
    assert row["degraded"] is True and row["role"] == "support_agent"
    assert row["result_count"] == len(result.structured_content["documents"])


async def test_a_hostile_argument_is_recorded_without_failing_the_call(corpus_database, local_embedder):
    caller = unique_caller("hostile")
    query = "wire\x00 transfer \ud800 cut-off " + "x" * 5000
    async with client_called(corpus_database.targets.server, Role.ANALYST, local_embedder, caller) as client:
        result = await client.call_tool("search_knowledge_base", {"query": query})
    (row,) = records(corpus_database.targets.owner, caller)
    assert result.is_error and result.content[0].text != AUDIT_FAILED  # the tool's own refusal, recorded
    assert row["arguments"]["query"].startswith("wire\ufffd transfer ? cut-off")
    assert row["arguments"]["query"].endswith(f"[{len(query)} characters]")


async def test_a_deeply_nested_argument_is_recorded_cut_short_and_the_call_gets_its_own_error(
    corpus_database, local_embedder
):
    caller = unique_caller("nested")
    nested: list = []
    for _ in range(60):  # the client's own serializer refuses much deeper; the HTTP hostile suite sends 2,000
        nested = [nested]
    async with client_called(corpus_database.targets.server, Role.ANALYST, local_embedder, caller) as client:
        result = await client.call_tool("search_knowledge_base", {"query": nested})
    (row,) = records(corpus_database.targets.owner, caller)
    assert result.is_error and "query must be text" in result.content[0].text
    assert "nested deeper than" in str(row["arguments"]["query"])


async def test_a_refused_argument_is_recorded_with_the_sentence_the_caller_got(corpus_database, local_embedder):
    caller = unique_caller("refused")
    async with client_called(corpus_database.targets.server, Role.ANALYST, local_embedder, caller) as client:
        misnamed = await client.call_tool("search_knowledge_base", {"query": "EDD", "department": "compliance"})
        too_many = await client.call_tool("search_knowledge_base", {"query": "EDD", "top_k": 99})
    rows = records(corpus_database.targets.owner, caller)
    assert [row["outcome"] for row in rows] == ["error", "error"]
    for result, row in zip((misnamed, too_many), rows, strict=True):
        assert result.is_error and row["error"].endswith(result.content[0].text), (row["error"], result.content)
        assert "\n" not in row["error"] and "pydantic" not in row["error"]


async def test_over_stdio_the_record_names_the_configured_caller(corpus_database):
    caller = unique_caller("ide")
    env = {
        **os.environ,
        "DATABASE_URL": database_url(corpus_database.targets),
        "KB_ROLE": "compliance_officer",
        "KB_STDIO_CALLER": caller,
    }
    parameters = StdioServerParameters(command=str(VENV_BIN / "kb"), args=["serve", "--transport", "stdio"], env=env)
    async with Client(parameters) as client:
        result = await client.call_tool("search_knowledge_base", {"query": "sanctions screening escalation"})
    (row,) = records(corpus_database.targets.owner, caller)
    assert (row["transport"], row["role"], row["operation"]) == ("stdio", "compliance_officer", "search_knowledge_base")
    assert row["citations"] == list(dict.fromkeys(c["citation"] for c in result.structured_content["documents"]))


async def test_over_http_the_record_names_the_token(http_server, corpus_database):
    url, tokens, _ = http_server
    query = f"password length requirements {unique_caller('q')}"
    async with client_with(url, tokens["support_agent"]) as client:
        result = await client.call_tool("search_knowledge_base", {"query": query})
        await client.read_resource(result.structured_content["documents"][0]["citation"])
    with psycopg.connect(corpus_database.targets.owner, row_factory=dict_row) as conn:
        (row,) = conn.execute("SELECT * FROM kb.audit_log WHERE arguments->>'query' = %s", (query,)).fetchall()
        (read,) = conn.execute(
            "SELECT * FROM kb.audit_log WHERE kind = 'resource' AND audit_id > %s AND caller = %s",
            (row["audit_id"], "support_agent-client"),
        ).fetchall()
    assert (row["caller"], row["role"], row["transport"]) == ("support_agent-client", "support_agent", "http")
    assert row["result_count"] == len(result.structured_content["documents"])
    assert read["operation"] == result.structured_content["documents"][0]["citation"]


# -- the database side: a small database of its own, so its grants can be changed --------------------------


@pytest.fixture
def small_kb(ingestor, database):
    for version, status, threshold in (("2.0", "superseded", "$10,000"), ("3.1", "effective", "$7,500")):
        text = markdown_document(
            "CMP-SOP-904",
            version=version,
            status=status,
            sections={"1. Purpose": "Who gets EDD.", "2. Trigger": f"EDD applies at {threshold} a month."},
        )
        ingestor.ingest(text.encode(), name=f"CMP-SOP-904_{version}.md", source_uri=f"file:///c/{version}.md")
    return database


async def test_when_the_record_cannot_be_written_the_caller_gets_an_error_not_the_answer(small_kb, local_embedder):
    caller = unique_caller("unaudited")
    with psycopg.connect(small_kb.owner, autocommit=True) as conn:
        conn.execute(f"REVOKE INSERT ON kb.audit_log FROM kb_server, {reader_login(Role.ANALYST)}")
    async with client_called(small_kb.server, Role.ANALYST, local_embedder, caller) as client:
        search = await client.call_tool("search_knowledge_base", {"query": "EDD trigger"})
        document = await client.call_tool("get_document", {"doc_code": "CMP-SOP-904"})
        with pytest.raises(MCPError) as read:
            await client.read_resource("kb://compliance/CMP-SOP-904#2")
        missing = await client.call_tool("get_document", {"doc_code": "CMP-SOP-999"})
    # A call that failed anyway keeps its own error (it carries no answer); the record goes to the server's log.
    assert missing.is_error and "no document CMP-SOP-999" in missing.content[0].text
    for result in (search, document):
        assert result.is_error and result.structured_content is None
        assert result.content[0].text == AUDIT_FAILED and "$7,500" not in str(result)
    assert AUDIT_FAILED in str(read.value) and "$7,500" not in str(read.value)
    assert records(small_kb.owner, caller) == []

    with psycopg.connect(small_kb.owner, autocommit=True) as conn:  # the same calls, audited, are answered
        conn.execute(
            "GRANT INSERT (caller, role, transport, kind, operation, duration_ms, outcome) ON kb.audit_log "
            f"TO {reader_login(Role.ANALYST)}"
        )
        conn.execute(
            "GRANT INSERT (arguments, citations, doc_codes, result_count, degraded, error, flagged) ON kb.audit_log "
            f"TO {reader_login(Role.ANALYST)}"
        )
    async with client_called(small_kb.server, Role.ANALYST, local_embedder, caller) as client:
        search = await client.call_tool("search_knowledge_base", {"query": "EDD trigger"})
    assert not search.is_error and "$7,500" in str(search.structured_content)
    assert len(records(small_kb.owner, caller)) == 1


SERVER_ROLES = [SERVER_LOGIN, INGEST_LOGIN, *(r.value for r in Role), *(reader_login(r) for r in Role)]


def _as(conn: psycopg.Connection, role: str) -> None:
    conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))


@pytest.mark.parametrize("role", SERVER_ROLES)
@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE kb.audit_log SET caller = 'someone else'",
        "DELETE FROM kb.audit_log",
        "TRUNCATE kb.audit_log",
        "SELECT kb.prune_audit_log(interval '1 day')",
    ],
)
def test_no_role_the_server_or_the_writer_uses_can_change_or_remove_a_record(small_kb, role, statement):
    with psycopg.connect(small_kb.owner, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO kb.audit_log (caller, role, transport, kind, operation, outcome, duration_ms) "
            "VALUES ('x', 'analyst', 'stdio', 'tool', 'search_knowledge_base', 'ok', 1)"
        )
        _as(conn, role)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(statement)
        conn.execute("RESET ROLE")
        assert conn.execute("SELECT count(*), min(caller) FROM kb.audit_log").fetchone() == (1, "x")


@pytest.mark.parametrize(
    "statement",
    ["UPDATE kb.audit_log SET caller = 'someone else'", "DELETE FROM kb.audit_log", "TRUNCATE kb.audit_log"],
)
def test_even_the_owner_cannot_change_or_remove_a_record_except_through_the_prune(small_kb, statement):
    with psycopg.connect(small_kb.owner, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO kb.audit_log (at, caller, role, transport, kind, operation, outcome, duration_ms) "
            "VALUES (now() - interval '3 years', 'x', 'analyst', 'stdio', 'tool', 'get_document', 'ok', 1)"
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            conn.execute(statement)
        # Announcing a prune by hand does not open the door to an UPDATE or a TRUNCATE either.
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"), conn.transaction():
            conn.execute("SELECT set_config('kb.audit_prune_before', now()::text, true)")
            conn.execute("UPDATE kb.audit_log SET caller = 'y'")
        assert conn.execute("SELECT count(*), min(caller) FROM kb.audit_log").fetchone() == (1, "x")
        assert conn.execute("SELECT kb.prune_audit_log(interval '2 years')").fetchone() == (1,)


def test_the_server_cannot_back_date_a_record(small_kb):
    with psycopg.connect(small_kb.server, autocommit=True) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(
            "INSERT INTO kb.audit_log (at, caller, role, transport, kind, operation, outcome, duration_ms) "
            "VALUES (now() - interval '3 years', 'x', 'analyst', 'stdio', 'tool', 'get_document', 'ok', 1)"
        )


@pytest.mark.parametrize("role", SERVER_ROLES)
def test_only_the_compliance_role_and_the_owner_can_read_the_log(small_kb, role):
    with psycopg.connect(small_kb.owner, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO kb.audit_log (caller, role, transport, kind, operation, outcome, duration_ms) "
            "VALUES ('x', 'analyst', 'stdio', 'tool', 'search_knowledge_base', 'ok', 1)"
        )
        assert conn.execute("SELECT count(*) FROM kb.audit_log").fetchone() == (1,)
        _as(conn, role)
        if role == Role.COMPLIANCE_OFFICER:
            assert conn.execute("SELECT count(*) FROM kb.audit_log").fetchone() == (1,)
        else:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT count(*) FROM kb.audit_log")


class _DatabaseGoneWriter:
    """The database going away between a call's read and its record is a race the real outage test
    (tests/reliability/test_database_restart.py) hits only now and then; this writer makes it certain."""

    async def write(self, record: Any, *, wait_s: float | None = None) -> None:
        raise psycopg.OperationalError("connection is lost")


async def test_a_record_lost_to_a_database_outage_tells_the_caller_the_knowledge_base_is_unavailable(
    corpus_database, local_embedder
):
    settings = load_settings()
    server = build_server(
        settings,
        corpus_database.targets.server,
        role=Role.ANALYST,
        embedder=local_embedder,
        audit=_DatabaseGoneWriter(),
    )
    async with Client(server) as client:
        result = await client.call_tool("search_knowledge_base", {"query": "EDD trigger"})
    assert result.is_error and result.structured_content is None
    assert result.content[0].text == UNAVAILABLE  # the words of any other outage, and still no answer


def test_a_malformed_citation_still_files_its_audit_record_under_the_document_it_names():
    # Found walking it: kb://compliance/CMP-SOP-004@3.1# (no section) was audited with no doc code, so
    # `kb audit --doc CMP-SOP-004` left that request out.
    from kb_server.audit import doc_codes_of

    assert doc_codes_of({"uri": "kb://compliance/CMP-SOP-004@3.1#"}, []) == ["CMP-SOP-004"]
    assert doc_codes_of({"citation": "kb://compliance/cmp-sop-004@v3#4.2"}, []) == ["CMP-SOP-004"]
    assert doc_codes_of({"citation": "https://example.com/CMP-SOP-004"}, []) == []


async def test_a_resource_read_during_a_database_outage_is_an_internal_error_not_invalid_params(
    corpus_database, local_embedder, monkeypatch
):
    # Found walking it: "temporarily unavailable" came back as -32602 (invalid params), which tells a client its
    # own URI is wrong and not to retry. The outage is a stand-in here (the pool's connection fails as it does
    # with the database down); tests/reliability/test_database_restart.py stops a real one.
    from kb_server import server as server_module

    @asynccontextmanager
    async def gone(pool: Any) -> AsyncIterator[Any]:
        raise psycopg.OperationalError("connection refused")
        yield  # pragma: no cover

    monkeypatch.setattr(server_module, "request_connection", gone)
    async with client_as(corpus_database, Role.ANALYST, local_embedder) as client:
        with pytest.raises(MCPError) as raised:
            await client.read_resource("kb://compliance/CMP-SOP-004@3.1#4.2")
    assert raised.value.error.code == INTERNAL_ERROR and raised.value.error.message == UNAVAILABLE
