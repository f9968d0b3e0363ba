"""How the two legs become one ranking (kb_server.search.Fusion): the LLD's Reciprocal Rank Fusion over each
leg's ranks, or a convex combination of each leg's own scores (cosine similarity, BM25) min-max normalised over
its candidates or counted in standard deviations above the lowest of them. Either way a chunk holding an
identifier the question names comes first."""

from __future__ import annotations

import statistics

import psycopg
import pytest
from pgvector.psycopg import register_vector_async
from tests.support.documents import markdown_document

from kb_core.db.targets import DatabaseTargets
from kb_core.roles import Role
from kb_server.search import DEFAULT_FUSION, Fusion, Hit, hybrid_search

pytestmark = pytest.mark.anyio

SECTIONS = {
    "1. Purpose": "This procedure explains how reconciliation breaks in the treasury ledger are handled.",
    "2. Detection": "The nightly job compares the ledger with the bank statement and opens a break per difference.",
    "3. Escalation": "Breaks above $5,000 go to the Treasury Operations Lead within 2 business hours.",
    "4. Error Codes": "RCN-E404 means the bank statement for the day has not arrived; rerun the job after 09:00.",
    "5. Records": "Closed breaks are kept for seven years with the evidence that resolved them.",
    "6. Training": "New analysts shadow a senior analyst for their first month of break handling.",
}
CONVEX = Fusion(vector_weight=0.6, text_weight=0.4, identifier_bonus=2.0, method="convex")
ZSCORE = Fusion(vector_weight=0.6, text_weight=0.4, identifier_bonus=10.0, method="zscore")
SERVED = DEFAULT_FUSION


@pytest.fixture
def procedure(ingestor, database: DatabaseTargets) -> DatabaseTargets:
    text = markdown_document("FIN-SOP-904", classification="public", title="Reconciliation Breaks", sections=SECTIONS)
    result = ingestor.ingest(text.encode(), name="breaks.md", source_uri="file:///c/breaks.md")
    assert result.outcome == "ingested", result.reason
    return database


async def search(database: DatabaseTargets, embedder, text: str, fusion: Fusion = SERVED) -> list[Hit]:
    async with await psycopg.AsyncConnection.connect(database.reader(Role.DEMO_READONLY), autocommit=True) as conn:
        await register_vector_async(conn)
        return await hybrid_search(
            conn,
            Role.DEMO_READONLY,
            text=text,
            vector=embedder.embed_query(text),
            departments=None,
            limit=50,
            fusion=fusion,
        )


def normalised(hits: list[Hit], leg: str, method: str = "convex") -> dict[str, float]:
    """Each chunk's normalised score in `leg`, over the leg's candidates (here: every hit it ranked): min-max, or
    ("zscore") in population standard deviations above the lowest."""
    raw = {h.section_path: getattr(h, f"{leg}_score") for h in hits if getattr(h, f"{leg}_rank") is not None}
    low, high = min(raw.values()), max(raw.values())
    spread = statistics.pstdev(raw.values()) if method == "zscore" else high - low
    return {path: (score - low) / spread for path, score in raw.items()}


async def test_the_convex_fusion_scores_a_chunk_by_its_legs_normalised_scores_times_their_weights(
    procedure, local_embedder
):
    hits = await search(procedure, local_embedder, "who takes a large treasury difference", CONVEX)
    assert len(hits) == len(SECTIONS)  # every chunk is a vector candidate; the text leg matched only some
    vector_only = [h for h in hits if h.text_rank is None]
    assert vector_only and len(vector_only) < len(hits)
    by_vector = sorted((h for h in hits if h.vector_rank is not None), key=lambda h: h.vector_rank or 0)
    assert [h.vector_score for h in by_vector] == sorted((h.vector_score or 0.0 for h in by_vector), reverse=True)
    vector, text = normalised(hits, "vector"), normalised(hits, "text")
    expected = [0.6 * vector.get(h.section_path, 0.0) + 0.4 * text.get(h.section_path, 0.0) for h in hits]
    assert [h.score for h in hits] == pytest.approx(expected, abs=1e-6)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_the_zscore_fusion_counts_each_legs_score_in_standard_deviations_above_its_lowest(
    procedure, local_embedder
):
    hits = await search(procedure, local_embedder, "who takes a large treasury difference", ZSCORE)
    vector, text = normalised(hits, "vector", "zscore"), normalised(hits, "text", "zscore")
    assert max(vector.values()) > 1.0  # not min-max: the best is more than the whole range's one unit
    expected = [0.6 * vector.get(h.section_path, 0.0) + 0.4 * text.get(h.section_path, 0.0) for h in hits]
    assert [h.score for h in hits] == pytest.approx(expected, abs=1e-6)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_the_served_fusion_is_the_zscore_one_with_a_bonus_for_each_legs_first(procedure, local_embedder):
    assert SERVED.method == "zscore"  # chosen in evals/report.md; this test checks what the server then computes
    hits = await search(procedure, local_embedder, "who takes a large treasury difference")
    vector, text = normalised(hits, "vector", "zscore"), normalised(hits, "text", "zscore")
    expected = [
        SERVED.vector_weight * vector.get(h.section_path, 0.0)
        + SERVED.text_weight * text.get(h.section_path, 0.0)
        + SERVED.first_bonus * ((h.vector_rank == 1) + (h.text_rank == 1))
        for h in hits
    ]
    assert SERVED.first_bonus > 0 and [h.score for h in hits] == pytest.approx(expected, abs=1e-6)


async def test_the_rrf_fusion_scores_a_chunk_by_its_ranks_alone(procedure, local_embedder):
    hits = await search(procedure, local_embedder, "who takes a large treasury difference", Fusion())
    expected = [sum(1 / (60 + rank) for rank in (h.vector_rank, h.text_rank) if rank is not None) for h in hits]
    assert [h.score for h in hits] == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("fusion", [Fusion(), CONVEX, ZSCORE, SERVED], ids=["rrf", "convex", "zscore", "served"])
async def test_a_chunk_holding_a_named_error_code_comes_first_under_either_fusion(procedure, local_embedder, fusion):
    hits = await search(procedure, local_embedder, "the overnight ledger job failed with RCN-E404, what now", fusion)
    assert hits[0].section_path.endswith("4. Error Codes")
