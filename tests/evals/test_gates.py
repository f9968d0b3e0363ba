"""The CI gates (LLD §5): the golden set through the query the MCP tool runs. `make test` fails when
hybrid recall@5 or MRR on the held-out golden questions (evals/split.py) falls below evals/gates.py's
thresholds, or when any role sees any chunk above its ceiling; and the gates really do fail when retrieval
is broken on purpose."""

from __future__ import annotations

import psycopg
import pytest
from evals.gates import leak_gate, quality_gate
from evals.golden import ANSWERABLE, CATEGORIES, load_golden
from evals.retrieval import classifications, leaks, run_questions
from tests.support.documents import markdown_document, write

from ingest.pipeline import ingest_files
from kb_core.roles import Role

pytestmark = pytest.mark.anyio
GOLDEN = load_golden()


def test_the_golden_set_covers_every_category_and_department():
    for category in CATEGORIES:
        assert sum(q.category == category for q in GOLDEN) >= 10, category
    assert len({q.department for q in GOLDEN}) == 9 and len(GOLDEN) >= 120
    assert all(q.expected for q in GOLDEN if q.category in ANSWERABLE)


async def test_hybrid_retrieval_passes_the_quality_gate(corpus_database, local_embedder):
    run = await run_questions(corpus_database.targets.server, local_embedder, GOLDEN)
    gate = quality_gate(run)
    print(
        f"hybrid recall@5={run.overall.recall_at_5:.3f} recall@10={run.overall.recall_at_10:.3f} "
        f"MRR={run.overall.mrr:.3f} nDCG@10={run.overall.ndcg_at_10:.3f} on {run.overall.questions} questions"
    )
    assert gate.passed, gate.failures


@pytest.mark.parametrize("role", list(Role))
async def test_no_golden_question_returns_a_chunk_above_the_asking_roles_ceiling(corpus_database, local_embedder, role):
    levels = classifications(corpus_database.targets.ingest)
    run = await run_questions(corpus_database.targets.server, local_embedder, GOLDEN, role=role)
    found = leaks(run, role, levels)
    assert leak_gate({role.value: found}).passed, found
    assert sum(len(o.hits) for o in run.outcomes) > 0


async def test_without_the_vector_leg_the_quality_gate_fails(corpus_database, local_embedder):
    run = await run_questions(
        corpus_database.targets.server,
        local_embedder,
        GOLDEN,
        mode="text",
        text_query="websearch",
        text_rank="ts_rank_cd",
    )
    gate = quality_gate(run)
    assert not gate.passed and any("recall@5" in f for f in gate.failures)


async def test_a_wrong_role_ceiling_trips_the_leak_gate(database, ingestor, local_embedder, tmp_path):
    confidential = markdown_document("FIN-SOP-901", classification="confidential", title="Treasury Break Procedure")
    internal = markdown_document("FIN-SOP-902", classification="internal", title="Expense Procedure")
    files = [write(tmp_path / "a.md", confidential), write(tmp_path / "b.md", internal)]
    assert all(r.outcome == "ingested" for r in ingest_files(ingestor, files))
    questions = [q for q in GOLDEN if q.department == "finance"][:5]
    levels = classifications(database.ingest)
    honest = await run_questions(database.server, local_embedder, questions, role=Role.SUPPORT_AGENT)
    assert leak_gate({"support_agent": leaks(honest, Role.SUPPORT_AGENT, levels)}).passed
    with psycopg.connect(database.owner, autocommit=True) as conn:
        # A migration that gave support_agent the confidential ceiling. Both places must be wrong for a leak:
        # the documents' per-row policy alone still hides the rows a wrong partition policy would let through.
        conn.execute("UPDATE kb.role_ceilings SET ceiling = 'confidential' WHERE role_name = 'support_agent'")
        conn.execute("ALTER POLICY readers ON kb.chunks_confidential TO support_agent, analyst, compliance_officer")
    broken = await run_questions(database.server, local_embedder, questions, role=Role.SUPPORT_AGENT)
    gate = leak_gate({"support_agent": leaks(broken, Role.SUPPORT_AGENT, levels)})
    assert not gate.passed and "FIN-SOP-901" in gate.failures[0]
