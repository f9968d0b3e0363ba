"""A withdrawn document through a real in-process MCP session: never served by default, readable by its pinned
citation, and found by as_of dates when it was in force (under the caller's ceiling)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import psycopg
import pytest
from mcp.shared.exceptions import MCPError
from tests.server.conftest import client_as
from tests.support.documents import markdown_document

from kb_core.roles import Role

pytestmark = pytest.mark.anyio
URI = "file:///corpus/compliance/CMP-SOP-950.md"
RULE = "Breaks above $25,000 are escalated to the Head of Treasury within one business hour."


@pytest.fixture
def withdrawn_corpus(database, ingestor):  # type: ignore[no-untyped-def]
    """CMP-SOP-950 (effective 2025-01-01, withdrawn 2026-06-15 UTC) beside CMP-SOP-951, still effective."""
    sections = {"1. Purpose": "Treasury reconciliation escalation.", "2. Escalation": RULE}
    text = markdown_document("CMP-SOP-950", effective_date="2025-01-01", title="Treasury Escalation", sections=sections)
    assert ingestor.ingest(text.encode(), name="CMP-SOP-950.md", source_uri=URI).outcome == "ingested"
    other = markdown_document("CMP-SOP-951", effective_date="2025-01-01", title="Card Dispute Escalation")
    ingestor.ingest(other.encode(), name="CMP-SOP-951.md", source_uri="file:///corpus/compliance/CMP-SOP-951.md")
    assert ingestor.withdraw(URI).outcome == "withdrawn"
    with psycopg.connect(database.owner, autocommit=True) as conn:
        conn.execute("UPDATE kb.documents SET withdrawn_at = '2026-06-15 09:00+00' WHERE doc_code = 'CMP-SOP-950'")
        conn.execute("VACUUM ANALYZE")
    return SimpleNamespace(targets=database)


async def call(client, tool: str, **arguments):  # type: ignore[no-untyped-def]
    return await client.call_tool(tool, arguments)


async def test_a_withdrawn_document_is_not_served_by_default(withdrawn_corpus, local_embedder):
    async with client_as(withdrawn_corpus, Role.ANALYST, local_embedder) as client:
        search = await call(client, "search_knowledge_base", query="treasury breaks escalated head of treasury")
        document = await call(client, "get_document", doc_code="CMP-SOP-950")
        listed = await call(client, "list_documents")
        with pytest.raises(MCPError):
            await client.read_resource("kb://compliance/CMP-SOP-950#2")
    assert "CMP-SOP-950" not in {d["doc_code"] for d in search.structured_content["documents"]}
    assert "CMP-SOP-951" in {d["doc_code"] for d in search.structured_content["documents"]}
    # Not served, but not hidden either: the error names the withdrawn version to ask for by pinning it.
    assert document.is_error and document.content[0].text == (
        "CMP-SOP-950 has no effective version; its versions you may read: 1.0 (withdrawn 2026-06-15); "
        "ask for one by version"
    )
    assert [d["doc_code"] for d in listed.structured_content["documents"]] == ["CMP-SOP-951"]


async def test_a_withdrawn_document_is_readable_by_its_pinned_citation(withdrawn_corpus, local_embedder):
    async with client_as(withdrawn_corpus, Role.ANALYST, local_embedder) as client:
        section = json.loads((await client.read_resource("kb://compliance/CMP-SOP-950@1.0#2")).contents[0].text)
        document = await call(client, "get_document", doc_code="CMP-SOP-950", version="1.0")
        listed = await call(client, "list_documents", status="withdrawn")
        quoted = await call(client, "verify_quote", citation="kb://compliance/CMP-SOP-950@1.0#2", quote=RULE)
    assert (section["version"], section["status"], section["content"]) == ("1.0", "withdrawn", RULE)
    # When, on every surface that says withdrawn (found walking it: the section and verify_quote did not say).
    assert section["withdrawn_at"].startswith("2026-06-15T09:00:00")
    assert quoted.structured_content["found"] is True and quoted.structured_content["status"] == "withdrawn"
    assert quoted.structured_content["withdrawn_at"].startswith("2026-06-15T09:00:00")
    assert document.structured_content["status"] == "withdrawn"
    assert document.structured_content["withdrawn_at"].startswith("2026-06-15T09:00:00")
    (entry,) = listed.structured_content["documents"]
    assert (entry["doc_code"], entry["status"], entry["citation"]) == (
        "CMP-SOP-950",
        "withdrawn",
        "kb://compliance/CMP-SOP-950@1.0",
    )


async def test_a_withdrawn_document_appears_as_of_a_date_when_it_was_in_force(withdrawn_corpus, local_embedder):
    query = "treasury breaks escalated head of treasury"
    async with client_as(withdrawn_corpus, Role.ANALYST, local_embedder) as client:
        in_force = {}
        for day in ("2024-12-31", "2025-01-01", "2026-06-14", "2026-06-15"):
            search = (await call(client, "search_knowledge_base", query=query, as_of=day)).structured_content
            document = await call(client, "get_document", doc_code="CMP-SOP-950", as_of=day)
            listed = (await call(client, "list_documents", as_of=day)).structured_content["documents"]
            in_force[day] = (
                any(d["doc_code"] == "CMP-SOP-950" for d in search["documents"]),
                not document.is_error,
                any(d["doc_code"] == "CMP-SOP-950" for d in listed),
            )
            if not document.is_error:
                assert document.structured_content["version"] == "1.0"
                assert RULE in [s["content"] for s in document.structured_content["sections"]]
                # Found walking it: the chunks said withdrawn, the hint "a superseded version", and no chunk when.
                chunk = next(d for d in search["documents"] if d["doc_code"] == "CMP-SOP-950")
                assert chunk["status"] == "withdrawn" and chunk["withdrawn_at"].startswith("2026-06-15")
                assert search["hint"].startswith("a version superseded or withdrawn since is returned for as_of")
    # Not yet effective; in force from its effective date; still in force the day before it was withdrawn.
    assert in_force == {
        "2024-12-31": (False, False, False),
        "2025-01-01": (True, True, True),
        "2026-06-14": (True, True, True),
        "2026-06-15": (False, False, False),
    }


async def test_a_withdrawn_document_stays_under_the_ceiling(withdrawn_corpus, local_embedder):
    # CMP-SOP-950 is internal: the public demo role sees neither it nor its withdrawal.
    async with client_as(withdrawn_corpus, Role.DEMO_READONLY, local_embedder) as client:
        listed = await call(client, "list_documents", status="withdrawn")
        with pytest.raises(MCPError):
            await client.read_resource("kb://compliance/CMP-SOP-950@1.0#2")
        document = await call(client, "get_document", doc_code="CMP-SOP-950")
        nothing = await call(client, "get_document", doc_code="CMP-SOP-959")
    assert listed.structured_content["documents"] == []
    # Above the ceiling, the not-found answer names no versions: the same words as for no document at all.
    assert document.content[0].text == nothing.content[0].text.replace("959", "950")
    assert "versions" not in document.content[0].text
