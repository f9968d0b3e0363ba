"""Shared pieces of the hostile-input tests: the manifest's classifications (the source of truth for what a
role may see), a snapshot of every table's row count, a blocking MCP client for hypothesis, the checks
every tool answer must pass, and an HTTP server with limits high enough not to get in the way."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client
from mcp.types import CallToolResult

from kb_core.roles import Classification, Role
from tests.conftest import REPO
from tests.server.conftest import HttpServer, client_as, serve_http

_MANIFEST = list(csv.DictReader((REPO / "corpus" / "MANIFEST.csv").open()))
CLASSIFICATION: dict[str, Classification] = {r["doc_code"]: Classification(r["classification"]) for r in _MANIFEST}
MANIFEST_ROWS: list[Classification] = [Classification(row["classification"]) for row in _MANIFEST]  # one per file
TITLES: dict[str, str] = {row["doc_code"]: row["title"] for row in _MANIFEST}
TOOLS = ("search_knowledge_base", "get_document", "list_documents")

# SQL-shaped strings, and the characters that matter to SQL, tsquery, LIKE and regular expressions.
SQL_SHAPED = [
    "'; DROP TABLE kb.chunks; --",
    "1 OR 1=1",
    "' OR '1'='1",
    '" OR ""="',
    "1; DELETE FROM kb.documents WHERE true; --",
    "$$; TRUNCATE kb.chunks CASCADE; $$",
    "$$",
    "$tag$ SELECT pg_sleep(10) $tag$",
    "\\",
    "\\'; SELECT 1; --",
    "E'\\x27' || chr(39)",
    "’ OR ‘1’=‘1",  # typographic quotes
    "ʼ; DROP TABLE kb.documents; --",  # modifier letter apostrophe
    "＇ OR １=１ --",  # fullwidth
    "/* */ UNION SELECT content FROM kb.chunks --",
    "%' AND classification = 'restricted' AND '%'='",
    "_%_%",
    "fraud & (sanctions | !kyc) <-> wire:*",
    "'a':* & !'b' | 'c' <2> 'd'",
    "RESET ROLE; SET ROLE compliance_officer;",
    "compliance_officer",
    "\x00'; DROP TABLE kb.chunks; --",
    "CMP-SOP-006' --",
    "${jndi:ldap://x}{{7*7}}%s%n",
]


def table_counts(owner_conninfo: str) -> dict[str, int]:
    """Rows in every table of the kb schema but the audit log, read as the owner (a superuser in the tests: no
    RLS). Every call appends to kb.audit_log by design (audit_records; tests/server/test_audit_log.py)."""
    with psycopg.connect(owner_conninfo, autocommit=True) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'kb' AND tablename <> 'audit_log' ORDER BY 1"
            )
        ]
        return {t: conn.execute(f"SELECT count(*) FROM kb.{t}").fetchone()[0] for t in tables}  # type: ignore[index]


def audit_records(owner_conninfo: str) -> int:
    with psycopg.connect(owner_conninfo, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM kb.audit_log").fetchone()[0]  # type: ignore[index]


def error_text(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


def assert_readable_error(tool: str, result: CallToolResult) -> None:
    """An is_error answer says what went wrong in the tool's own sentence: never the SDK's 'Error executing tool
    <name>', which is all a model sees when the tool crashed (and which no deliberate error carries)."""
    text = error_text(result).strip()
    assert text, "an error with no message"
    assert not text.startswith(f"Error executing tool {tool}"), f"the tool crashed: {text!r}"
    assert len(text) >= 10, f"an error that says nothing: {text!r}"


def doc_codes_in(tool: str, content: dict[str, Any]) -> list[str]:
    if tool in ("get_document", "compare_versions", "verify_quote"):
        return [content["doc_code"]]
    return [d["doc_code"] for d in content["documents"]]


def assert_within_ceiling(tool: str, result: CallToolResult, role: Role) -> None:
    assert result.structured_content is not None, f"{tool} answered without structured content"
    for code in doc_codes_in(tool, result.structured_content):
        level = CLASSIFICATION[code]
        assert role.may_read(level), f"{tool} gave {role.value} {code} ({level.value})"


def check_answer(tool: str, result: CallToolResult, role: Role) -> None:
    """Either a readable error or a normal answer with nothing above the role's ceiling."""
    if result.is_error:
        assert_readable_error(tool, result)
    else:
        assert_within_ceiling(tool, result, role)


class BlockingClient:
    """An in-process MCP client session driven from synchronous code (hypothesis tests are synchronous)."""

    def __init__(self, portal: BlockingPortal, client: Client) -> None:
        self.portal, self.client = portal, client

    def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        return self.portal.call(self.client.call_tool, name, arguments)


@contextmanager
def blocking_client(corpus_database, role: Role, embedder) -> Iterator[BlockingClient]:  # type: ignore[no-untyped-def]
    with (
        start_blocking_portal(backend="asyncio") as portal,
        portal.wrap_async_context_manager(client_as(corpus_database, role, embedder)) as client,
    ):
        yield BlockingClient(portal, client)


@pytest.fixture(scope="module")
def http_server(corpus_database, tmp_path_factory) -> Iterator[HttpServer]:
    """`kb serve --transport http` with the default body limit (64 KiB) and a rate limit that hostile tests
    do not run into."""
    with serve_http(
        corpus_database,
        tmp_path_factory.mktemp("security-http"),
        KB_RATE_LIMIT_PER_MINUTE="100000",
        KB_RATE_LIMIT_BURST="10000",
    ) as server:
        yield server
