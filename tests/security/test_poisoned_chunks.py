"""Injection: the poisoned chunk texts of data/poisoned_chunks.json (written for this test in many styles:
markdown, tables, HTML, polite requests, role-play, seven languages, base64, URL secrets, tool-call JSON
and markup, fake system turns, instructions buried in long paragraphs, homoglyphs) ingested as sections of
real documents. The test reports how many the scanner flags and which it misses, holds the rate to the
floor measured when it was written, and checks that no answer of search_knowledge_base, get_document or a
resource read carries any of them outside a `content` field."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest

from ingest.hidden import reveal_invisible_characters
from kb_core.roles import Role
from tests.security.ingest_checks import ingest_and_check
from tests.server.conftest import client_as
from tests.server.test_injection_contract import strings_outside_content
from tests.support.documents import markdown_document

pytestmark = pytest.mark.anyio
POISONED = json.loads((Path(__file__).parent / "data" / "poisoned_chunks.json").read_text())
for _item in POISONED:  # zero-width characters are dropped at parse time: look for the text as stored
    _item["marker"] = reveal_invisible_characters(_item["marker"])
DOCUMENTS = [
    ("CMP-SOP-961", "internal"),
    ("PAY-SOP-962", "public"),
    ("FIN-SOP-963", "confidential"),
    ("SEC-GDE-964", "internal"),
]
# Measured when this set was written: 17 of the 40 flagged; 25 once the scanner read look-alike letters,
# leetspeak and five more languages; 35 with the clause classifier of scanner version 6. Raise it as the
# scanner learns; a drop means the scanner lost something it caught.
FLAGGED_FLOOR = 35


def documents() -> dict[str, str]:
    """Each poisoned text as the body of its own numbered section, spread over four documents."""
    texts: dict[str, str] = {}
    per_document = -(-len(POISONED) // len(DOCUMENTS))
    for d, (code, classification) in enumerate(DOCUMENTS):
        items = POISONED[d * per_document : (d + 1) * per_document]
        sections = {f"{n}. Operating note {item['id']}": item["text"] for n, item in enumerate(items, start=1)}
        texts[code] = markdown_document(
            code, title=f"Operating Notes {code}", classification=classification, sections=sections
        )
    return texts


@pytest.fixture
def poisoned_database(ingestor, database):
    for code, text in documents().items():
        result = ingest_and_check(ingestor, database, f"{code}.md", text.encode(), f"s3://poisoned/{code}.md")
        assert result.outcome == "ingested", result.reason
    return database


def flagged_items(database) -> dict[str, bool]:  # type: ignore[no-untyped-def]
    """For each poisoned text: whether the chunk(s) holding its marker were marked injection_suspect."""
    with psycopg.connect(database.owner) as conn:
        rows = conn.execute("SELECT content, injection_suspect FROM kb.chunks").fetchall()
    flagged = {}
    for item in POISONED:
        holding = [suspect for content, suspect in rows if item["marker"] in content]
        assert holding, f"{item['id']}: its text was not stored"
        flagged[item["id"]] = any(holding)
    return flagged


async def test_the_scanner_flags_at_least_the_measured_share_of_the_poisoned_chunks(poisoned_database, capsys):
    flagged = flagged_items(poisoned_database)
    caught = sum(flagged.values())
    missed = [item for item in POISONED if not flagged[item["id"]]]
    with capsys.disabled():
        print(f"\nscanner: {caught} of {len(POISONED)} poisoned chunks flagged ({caught / len(POISONED):.0%}); missed:")
        for item in missed:
            print(f"  {item['id']} {item['style']}: {' '.join(item['text'].split())[:110]}")
    assert len(POISONED) >= 30
    assert caught >= FLAGGED_FLOOR, [item["id"] for item in missed]


def assert_markers_only_in_content(label: str, payload) -> None:  # type: ignore[no-untyped-def]
    for text in strings_outside_content(payload):
        for item in POISONED:
            assert item["marker"].lower() not in text.lower(), f"{label}: {item['id']} outside content: {text[:200]}"


async def test_no_answer_carries_a_poisoned_text_outside_a_content_field(poisoned_database, local_embedder):
    holder = SimpleNamespace(targets=poisoned_database)
    seen_in_content: set[str] = set()

    def note_content(payload) -> None:  # type: ignore[no-untyped-def]
        blob = json.dumps(payload, ensure_ascii=False)
        seen_in_content.update(
            item["id"] for item in POISONED if json.dumps(item["marker"], ensure_ascii=False)[1:-1] in blob
        )

    async with client_as(holder, Role.ANALYST, local_embedder) as client:
        for item in POISONED:
            for query in (item["marker"], " ".join(item["text"].split()[:12])):
                result = await client.call_tool("search_knowledge_base", {"query": query[:900]})
                assert not result.is_error, result.content
                for payload in (result.structured_content, json.loads(result.content[0].text)):
                    payload.pop("query")  # the caller's own words echoed back (cleaned), not retrieved text
                    assert_markers_only_in_content(f"search {item['id']}", payload)
                    note_content(payload)
                for chunk in result.structured_content["documents"]:
                    if chunk["injection_suspect"]:
                        assert result.structured_content["warning"]
        for code, _ in DOCUMENTS:
            document = await client.call_tool("get_document", {"doc_code": code})
            assert not document.is_error, document.content
            for payload in (document.structured_content, json.loads(document.content[0].text)):
                assert_markers_only_in_content(f"get_document {code}", payload)
                note_content(payload)
            department = document.structured_content["department"]
            whole = await client.read_resource(f"kb://{department}/{code}")
            assert_markers_only_in_content(f"kb://{department}/{code}", json.loads(whole.contents[0].text))
            for section in document.structured_content["sections"]:
                read = await client.read_resource(section["citation"])
                payload = json.loads(read.contents[0].text)
                assert_markers_only_in_content(section["citation"], payload)
                note_content(payload)
    assert seen_in_content == {item["id"] for item in POISONED}  # every text was served, inside content
