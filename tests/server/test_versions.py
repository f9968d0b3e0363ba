"""Pinned citations and point-in-time reads, through a real in-process MCP session over the ingested corpus.

The version pairs are found in the corpus itself (doc codes with several files in corpus/MANIFEST.csv), with
the effective dates their headers gave the stored versions.
"""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, timedelta
from itertools import pairwise

import psycopg
import pytest
from mcp.shared.exceptions import MCPError
from tests.conftest import REPO
from tests.server.conftest import client_as

from kb_core.roles import Role
from kb_server.citations import parse_citation
from kb_server.models import POINT_IN_TIME_CAVEAT, future_as_of_hint

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class VersionPair:
    doc_code: str
    department: str
    title: str
    earlier: str
    earlier_from: date
    later: str
    later_from: date


def version_pairs(corpus_database) -> list[VersionPair]:  # type: ignore[no-untyped-def]
    files = defaultdict(list)
    for row in csv.DictReader((REPO / "corpus" / "MANIFEST.csv").open()):
        files[row["doc_code"]].append(row)
    codes = sorted(code for code, rows in files.items() if len(rows) > 1)
    with psycopg.connect(corpus_database.targets.owner) as conn:
        rows = conn.execute(
            "SELECT doc_code, department, title, version, effective_date FROM kb.documents "
            "WHERE doc_code = ANY(%s) ORDER BY doc_code, effective_date, version_key",
            (codes,),
        ).fetchall()
    by_code = defaultdict(list)
    for row in rows:
        by_code[row[0]].append(row)
    pairs = []
    for code in codes:
        versions = by_code[code]
        for earlier, later in pairwise(versions):
            pairs.append(VersionPair(code, earlier[1], earlier[2], earlier[3], earlier[4], later[3], later[4]))
    return pairs


async def call(client, tool: str, **arguments):  # type: ignore[no-untyped-def]
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def read(client, uri: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return json.loads((await client.read_resource(uri)).contents[0].text)


async def test_a_pinned_citation_resolves_to_its_version_and_an_unpinned_one_to_the_effective_version(
    corpus_database, local_embedder
):
    async with client_as(corpus_database, Role.ANALYST, local_embedder) as client:
        old = await call(client, "get_document", doc_code="CMP-SOP-004", version="2.0")
        cited = next(s["citation"] for s in old["sections"] if s["citation"].endswith("#4.2"))
        pinned = await read(client, cited)
        unpinned = await read(client, "kb://compliance/CMP-SOP-004#4.2")
        whole_old = await read(client, "kb://compliance/CMP-SOP-004@2.0")
    assert cited == "kb://compliance/CMP-SOP-004@2.0#4.2"
    assert (pinned["version"], pinned["status"], pinned["citation"]) == ("2.0", "superseded", cited)
    assert "$10,000" in pinned["content"] and "$7,500" not in pinned["content"]
    assert unpinned["version"] == "3.1" and "$7,500" in unpinned["content"]
    assert unpinned["citation"] == "kb://compliance/CMP-SOP-004@3.1#4.2"
    assert whole_old["version"] == "2.0" and whole_old["citation"] == "kb://compliance/CMP-SOP-004@2.0"


async def test_every_citation_the_tools_emit_is_pinned_and_reads_back_the_same_text(corpus_database, local_embedder):
    async with client_as(corpus_database, Role.COMPLIANCE_OFFICER, local_embedder) as client:
        hits = (await call(client, "search_knowledge_base", query="enhanced due diligence threshold", top_k=8))[
            "documents"
        ]
        listed = (await call(client, "list_documents", department="compliance"))["documents"]
        for hit in hits:
            citation = parse_citation(hit["citation"])
            assert citation.pinned and citation.version == hit["version"], hit["citation"]
            section = await read(client, hit["citation"])
            assert section["version"] == hit["version"]
            assert hit["content"] in section["content"]  # a chunk is part of its cited section
    assert all(parse_citation(d["citation"]).version == d["version"] for d in listed)


async def test_a_pinned_citation_stays_under_the_callers_ceiling(corpus_database, local_embedder):
    # CMP-SOP-004 is confidential: a support agent gets the same answer as for a version that does not exist.
    async with client_as(corpus_database, Role.SUPPORT_AGENT, local_embedder) as client:
        with pytest.raises(MCPError) as forbidden:
            await client.read_resource("kb://compliance/CMP-SOP-004@2.0#4.2")
        with pytest.raises(MCPError) as missing:
            await client.read_resource("kb://compliance/CMP-SOP-004@9.9#4.2")
    assert str(forbidden.value).replace("2.0", "9.9") == str(missing.value)


async def test_the_corpus_has_version_pairs_to_test(corpus_database):
    assert len(version_pairs(corpus_database)) >= 7


async def test_as_of_before_and_after_each_effective_date_answers_with_the_version_then_in_force(
    corpus_database, local_embedder
):
    pairs = version_pairs(corpus_database)
    async with client_as(corpus_database, Role.COMPLIANCE_OFFICER, local_embedder) as client:
        for pair in pairs:
            for as_of, expected in (
                (pair.later_from - timedelta(days=1), pair.earlier),
                (pair.later_from, pair.later),
                (pair.earlier_from, pair.earlier),
            ):
                when = as_of.isoformat()
                search = await call(
                    client,
                    "search_knowledge_base",
                    query=pair.title,
                    departments=[pair.department],
                    top_k=8,
                    as_of=when,
                )
                versions = {d["version"] for d in search["documents"] if d["doc_code"] == pair.doc_code}
                assert versions == {expected}, (pair, when, versions)
                # Found walking it: a quote taken from an as_of search did not say its version is superseded now.
                statuses = {d["status"] for d in search["documents"] if d["doc_code"] == pair.doc_code}
                assert statuses == {"superseded" if expected == pair.earlier else "effective"}, (pair, when)
                document = await call(client, "get_document", doc_code=pair.doc_code, as_of=when)
                assert document["version"] == expected, (pair, when)
                assert all(f"@{expected}#" in s["citation"] for s in document["sections"])
                listed = await call(client, "list_documents", department=pair.department, as_of=when)
                assert [d["version"] for d in listed["documents"] if d["doc_code"] == pair.doc_code] == [expected]
            before = (pair.earlier_from - timedelta(days=1)).isoformat()
            earlier = await call(
                client, "search_knowledge_base", query=pair.title, departments=[pair.department], as_of=before
            )
            assert not [d for d in earlier["documents"] if d["doc_code"] == pair.doc_code], (pair, before)


async def test_without_as_of_search_serves_the_effective_versions_only(corpus_database, local_embedder):
    pairs = version_pairs(corpus_database)
    async with client_as(corpus_database, Role.COMPLIANCE_OFFICER, local_embedder) as client:
        for pair in pairs:
            search = await call(
                client, "search_knowledge_base", query=pair.title, departments=[pair.department], top_k=8
            )
            versions = {d["version"] for d in search["documents"] if d["doc_code"] == pair.doc_code}
            assert versions == {pair.later}, pair
            assert {d["status"] for d in search["documents"]} == {"effective"}


async def test_as_of_arguments_are_checked(corpus_database, local_embedder):
    async with client_as(corpus_database, Role.ANALYST, local_embedder) as client:
        both = await client.call_tool(
            "get_document", {"doc_code": "CMP-SOP-004", "version": "2.0", "as_of": "2025-01-01"}
        )
        bad = await client.call_tool("search_knowledge_base", {"query": "fees", "as_of": "last spring"})
        too_early = await client.call_tool("get_document", {"doc_code": "CMP-SOP-004", "as_of": "2001-01-01"})
    assert both.is_error and "not both" in both.content[0].text
    assert bad.is_error and "date" in bad.content[0].text
    assert too_early.is_error and "in force on 2001-01-01" in too_early.content[0].text


async def test_a_search_before_anything_was_in_force_says_when_the_earliest_document_took_effect(
    corpus_database, local_embedder
):
    async with client_as(corpus_database, Role.ANALYST, local_embedder) as client:
        before = await call(client, "search_knowledge_base", query="wire transfer cut-off", as_of="1990-01-01")
        found = re.search(r"the earliest took effect on (\d{4}-\d{2}-\d{2})", before["hint"] or "")
        assert before["documents"] == [] and found, before
        assert before["hint"].startswith("nothing you may read was in force on 1990-01-01")
        # That date is exact: on it something answers, the day before nothing does.
        earliest = date.fromisoformat(found.group(1))
        on = await call(client, "search_knowledge_base", query="policy", as_of=earliest.isoformat(), top_k=50)
        day_before = (earliest - timedelta(days=1)).isoformat()
        off = await call(client, "search_knowledge_base", query="policy", as_of=day_before, top_k=50)
        later = await call(client, "search_knowledge_base", query="wire transfer cut-off", as_of="2030-01-01")
        listed_before = await call(client, "list_documents", as_of="1990-01-01")
        listed_on = await call(client, "list_documents", as_of=earliest.isoformat())
    # Not the empty-result hint; the point-in-time caveat when a version replaced since is among the answers.
    replaced = any(d["status"] != "effective" for d in on["documents"])
    assert on["documents"] and on["hint"] == (POINT_IN_TIME_CAVEAT if replaced else None)
    assert off["documents"] == [] and f"in force on {day_before}" in off["hint"]
    # A date after today is answered with today's versions, and says so (found walking it: it said nothing).
    assert later["documents"] and later["hint"] == future_as_of_hint(date(2030, 1, 1))
    assert listed_before["documents"] == [] and listed_before["hint"] == before["hint"]
    assert listed_on["documents"] and listed_on["hint"] is None


async def test_a_version_replaced_by_one_above_the_callers_ceiling_is_not_quoted_as_in_force_unsaid(
    ingestor, database, local_embedder
):
    # Found walking it as a security reviewer: v1.0 (internal) came back to a support agent as the version in
    # force on a date after v2.0 (restricted) had replaced it, with no hint. Its status already says superseded;
    # the hint says what that means for the date, and names nothing above the ceiling.
    from types import SimpleNamespace

    from tests.support.documents import markdown_document

    for version, day, level in (("1.0", "2026-01-01", "internal"), ("2.0", "2026-06-01", "restricted")):
        document = markdown_document(
            "CSP-GDE-907", version=version, effective_date=day, classification=level, title="Goodwill Exceptions"
        )
        assert ingestor.ingest(document.encode(), name=f"g{version}.md", source_uri=f"s3://kb/g{version}.md").outcome
    targets = SimpleNamespace(targets=database)
    async with client_as(targets, Role.SUPPORT_AGENT, local_embedder) as client:
        agent = await client.call_tool("get_document", {"doc_code": "CSP-GDE-907", "as_of": "2026-07-01"})
    async with client_as(targets, Role.COMPLIANCE_OFFICER, local_embedder) as client:
        officer = await client.call_tool("get_document", {"doc_code": "CSP-GDE-907", "as_of": "2026-07-01"})
    assert agent.structured_content["version"] == "1.0" and agent.structured_content["status"] == "superseded"
    hint = agent.structured_content["hint"]
    assert hint.startswith("CSP-GDE-907 v1.0 is superseded, and no later version is among those you may read")
    assert "2.0" not in hint and "2026-06-01" not in hint
    assert officer.structured_content["version"] == "2.0" and officer.structured_content["hint"] is None
