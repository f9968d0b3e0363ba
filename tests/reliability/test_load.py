"""A small load over HTTP from the four roles: no error but designed 429s, no chunk above any ceiling."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from reliability.harness import database_url, manifest_levels
from reliability.load import LoadResult, check_answer, fit, memory_grows, run_load

from kb_core.roles import Classification, Role

pytestmark = pytest.mark.slow


def test_eight_clients_200_searches_across_the_four_roles(corpus_database, tmp_path):
    outcome = run_load(database_url(corpus_database.targets.owner), tmp_path, clients=8, searches=200, deadline_s=120)
    assert not outcome.errors, outcome.errors  # a designed 429 is counted apart, in rate_limited
    assert outcome.leaks == []
    assert outcome.completed == outcome.ok == 200 and not outcome.deadline_hit
    assert set(outcome.per_role) == {r.value for r in Role} and min(outcome.per_role.values()) >= 40
    assert outcome.chunks_checked >= 200  # the leak check looked at real chunks
    assert outcome.before and outcome.after and outcome.samples  # the server's RSS was sampled


def test_the_leak_check_catches_a_chunk_above_the_callers_ceiling():
    levels = manifest_levels()
    restricted = next(code for code, level in levels.items() if level is Classification.RESTRICTED)
    public = next(code for code, level in levels.items() if level is Classification.PUBLIC)
    answer = SimpleNamespace(
        is_error=False, content=[], structured_content={"documents": [{"doc_code": public}, {"doc_code": restricted}]}
    )
    outcome = LoadResult(clients=1, planned=1)
    check_answer(answer, Role.DEMO_READONLY, "q", levels, outcome)
    check_answer(answer, Role.COMPLIANCE_OFFICER, "q", levels, outcome)
    assert [(leak.role, leak.doc_code) for leak in outcome.leaks] == [("demo_readonly", restricted)]
    assert outcome.chunks_checked == 4


def test_the_soak_fit_tells_growth_from_noise():
    minutes = [m / 12 for m in range(24, 120)]  # a sample every 5 s after a 2-minute warm-up
    noise = [3.0 if i % 2 else -3.0 for i in range(len(minutes))]
    leaking = fit([(m, 300 + 1.0 * m + e) for m, e in zip(minutes, noise, strict=True)])
    steady = fit([(m, 300 + e) for m, e in zip(minutes, noise, strict=True)])
    assert abs(leaking[0] - 1.0) < 0.1 and memory_grows(leaking[0], leaking[1])
    assert abs(steady[0]) < 0.1 and not memory_grows(steady[0], steady[1])
