"""SQL-shaped strings in every argument of every tool, through a real in-process MCP session: each is data,
never SQL. Each call gets a normal answer or an error that says what to change, no chunk above the
caller's ceiling, and the database keeps every row."""

from __future__ import annotations

import pytest

from kb_core.roles import Role
from tests.security.conftest import SQL_SHAPED, assert_readable_error, check_answer, error_text, table_counts
from tests.server.conftest import client_as

pytestmark = pytest.mark.anyio
ROLE = Role.SUPPORT_AGENT  # internal: restricted and confidential documents must stay out of reach


TOO_LONG = "must be text of at most"  # the input schema's max_length, checked before the tool runs


def calls_for(argument: str, value: str) -> tuple[str, dict[str, object], str | None]:
    """(tool, arguments, the words its error must contain, besides TOO_LONG; None: it answers normally)."""
    return {
        # A query with no letter or digit ('$$', '_%_%') is refused for that, as data; any other is searched.
        "query": (
            "search_knowledge_base",
            {"query": value},
            None if any(c.isalnum() for c in value) else "has no words",
        ),
        "departments": ("search_knowledge_base", {"query": "fees", "departments": [value]}, "unknown department"),
        "top_k": ("search_knowledge_base", {"query": "fees", "top_k": value}, "top_k must be a whole number"),
        "doc_code": ("get_document", {"doc_code": value}, "malformed doc code"),
        "version": ("get_document", {"doc_code": "CMP-SOP-004", "version": value}, "malformed version"),
        "department": ("list_documents", {"department": value}, "unknown department"),
        "status": ("list_documents", {"status": value}, "unknown status"),
    }[argument]


@pytest.mark.parametrize("argument", ["query", "departments", "top_k", "doc_code", "version", "department", "status"])
async def test_sql_shaped_strings_in_each_argument_are_answered_as_data_and_no_row_is_lost(
    corpus_database, local_embedder, argument
):
    before = table_counts(corpus_database.targets.owner)
    failures = []
    async with client_as(corpus_database, ROLE, local_embedder) as client:
        for value in SQL_SHAPED:
            tool, arguments, expected_error = calls_for(argument, value)
            result = await client.call_tool(tool, arguments)
            check_answer(tool, result, ROLE)
            if expected_error is None and result.is_error:
                failures.append((value, error_text(result)))
            elif expected_error is not None and not (
                result.is_error and (expected_error in error_text(result) or TOO_LONG in error_text(result))
            ):
                failures.append((value, error_text(result) if result.is_error else "answered normally"))
        healthy = await client.call_tool("search_knowledge_base", {"query": "wire transfer cut-off time"})
    assert not failures, failures
    assert not healthy.is_error and healthy.structured_content["documents"]
    assert table_counts(corpus_database.targets.owner) == before


async def test_a_sql_shaped_query_finds_the_words_it_contains_like_any_other_query(corpus_database, local_embedder):
    async with client_as(corpus_database, ROLE, local_embedder) as client:
        plain = await client.call_tool("search_knowledge_base", {"query": "chargeback dispute deadline"})
        shaped = await client.call_tool(
            "search_knowledge_base", {"query": "chargeback' OR 1=1; -- dispute $$ deadline \\"}
        )
    assert not shaped.is_error, error_text(shaped)
    plain_codes = {d["doc_code"] for d in plain.structured_content["documents"]}
    shaped_codes = {d["doc_code"] for d in shaped.structured_content["documents"]}
    assert plain_codes & shaped_codes  # the same words find the same documents: the quotes did nothing


async def test_a_doc_code_that_only_looks_like_sql_around_a_restricted_code_reveals_nothing(
    corpus_database, local_embedder
):
    async with client_as(corpus_database, ROLE, local_embedder) as client:
        for value in ("CMP-SOP-006' OR '1'='1", "CMP-SOP-006'--", "cmp-sop-006 ", " CMP-SOP-006\t"):
            result = await client.call_tool("get_document", {"doc_code": value})
            assert result.is_error, value
            assert_readable_error("get_document", result)
            assert "Suspicious Activity" not in error_text(result)
