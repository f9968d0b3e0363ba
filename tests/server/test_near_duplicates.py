"""A document of near-identical chunks does not hide other documents from the vector leg.

Found walking it as an operator: after two machine-made documents of ~1,100 near-identical chunks each were
ingested, a question quoting another internal document almost word for word no longer found it, at any
ef_search: HNSW links near-duplicates mostly to each other, and the graph's walk stayed among them. A role that
reads fewer than EXACT_ROWS chunks now gets the exact nearest ones (kb_server.search)."""

from __future__ import annotations

import random
from datetime import date

import pytest
from tests.support.documents import markdown_document

from kb_core.roles import Role
from kb_server.db.pools import RoleConnections
from kb_server.search import hybrid_search

pytestmark = pytest.mark.anyio

LEGAL_WORDS = [
    *("party", "agreement", "shall", "hereby", "notwithstanding", "clause", "provision", "obligation", "term"),
    *("liability", "indemnify", "warrant", "covenant", "breach", "remedy", "notice", "consent", "assign"),
    *("waiver", "governing"),
]
QUESTION = "human passwords must be at least 14 characters"


def boilerplate(doc_code: str, rng: random.Random, articles: int = 500) -> str:
    """Articles of random sentences over a 20-word legal vocabulary: every chunk near every other."""
    sentence = lambda: " ".join(rng.choice(LEGAL_WORDS) for _ in range(12)).capitalize() + "."  # noqa: E731
    sections = {f"Article {n}": " ".join(sentence() for _ in range(6)) for n in range(articles)}
    return markdown_document(doc_code, title="Master Terms", sections=sections)


async def test_a_flood_of_near_identical_chunks_does_not_hide_another_documents_nearest_chunk(
    ingestor, database, local_embedder
):
    standard = markdown_document(
        "SEC-STD-982",
        title="Password Standard",
        sections={
            "1. Length": "Human passwords must be at least 14 characters long.",
            "2. Rotation": "Service credentials rotate every 90 days.",
        },
    )
    assert ingestor.ingest(standard.encode(), name="s.md", source_uri="s3://kb/s.md").outcome == "ingested"
    rng = random.Random(7)
    for code in ("LEG-REF-981", "LEG-REF-983"):
        result = ingestor.ingest(boilerplate(code, rng).encode(), name=f"{code}.md", source_uri=f"s3://kb/{code}.md")
        assert result.outcome == "ingested" and result.chunks == 500, result

    # The analyst reads ~1,000 chunks here, fewer than EXACT_ROWS: the exact search's case. So does a search of
    # the versions in force on a date (as_of), whose current versions were read through the graph too.
    async with RoleConnections(database.server) as connections:
        for as_of in (None, date.today()):
            hits = await hybrid_search(
                await connections.get(Role.ANALYST),
                Role.ANALYST,
                text=QUESTION,
                vector=local_embedder.embed_query(QUESTION),
                departments=None,
                limit=5,
                as_of=as_of,
            )
            first = hits[0]
            assert (first.doc_code, first.section_path, first.vector_rank) == ("SEC-STD-982", "1. Length", 1), (
                as_of,
                hits,
            )
