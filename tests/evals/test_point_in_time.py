"""The golden set's point-in-time questions (LLD §5 with issue 17): asked as of their date through the query the
MCP tool runs, each answers from the version in force then and never from the other version of its pair."""

from __future__ import annotations

import pytest
from evals.golden import load_golden
from evals.metrics import first_match
from evals.retrieval import run_questions
from tests.server.test_versions import version_pairs

pytestmark = pytest.mark.anyio
POINT_IN_TIME = [q for q in load_golden() if q.category == "point_in_time"]


def test_every_version_pair_in_the_corpus_has_point_in_time_questions_on_both_sides(corpus_database):
    for pair in version_pairs(corpus_database):
        asked = {
            (q.expected_version, q.as_of) for q in POINT_IN_TIME if any(e.doc_code == pair.doc_code for e in q.expected)
        }
        assert any(v == pair.earlier and d is not None and d < pair.later_from for v, d in asked), pair
        assert any(v == pair.later and d is not None and d >= pair.later_from for v, d in asked), pair


async def test_point_in_time_questions_answer_from_the_version_in_force_on_their_date(corpus_database, local_embedder):
    run = await run_questions(corpus_database.targets.server, local_embedder, POINT_IN_TIME)
    for outcome in run.outcomes:
        assert outcome.wrong_version_chunks == 0, outcome.question.id
        assert first_match(outcome.ranked_in_version, outcome.question.expected[0]) is not None, outcome.question.id
