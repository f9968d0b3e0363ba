"""The measures the gates and the report rest on, checked on hand-made rankings."""

from __future__ import annotations

import math

import pytest
from evals.golden import Expected
from evals.metrics import Ranked, first_match, ndcg_at, recall_at, reciprocal_rank

from evals import answers, vaswani

EDD = Expected("CMP-SOP-004", "4.2 Enhanced Due Diligence")
OFAC = Expected("CMP-SOP-003", "6.3 Reports to OFAC")
RANKED = [
    Ranked("CMP-SOP-004", "1. Purpose"),
    Ranked("CMP-SOP-003", "6. Holds, Blocking, Rejection and Reporting › 6.3 Reports to OFAC"),
    Ranked("CMP-SOP-004", "4. Customer Risk Rating › 4.2 Enhanced Due Diligence"),
]


def test_a_chunk_matches_its_section_or_a_subsection_of_it_in_the_same_document():
    assert first_match(RANKED, EDD) == 3
    assert first_match(RANKED, Expected("CMP-SOP-004", "4. Customer Risk Rating")) == 3
    assert first_match(RANKED, Expected("CMP-SOP-006", "4.2 Enhanced Due Diligence")) is None
    assert first_match(RANKED, Expected("CMP-SOP-004", "4.2 Enhanced")) is None  # whole headings only


def test_recall_counts_each_expected_section_and_mrr_takes_the_first_hit():
    assert recall_at(RANKED, [EDD, OFAC], 2) == 0.5
    assert recall_at(RANKED, [EDD, OFAC], 3) == 1.0
    assert reciprocal_rank(RANKED, [EDD, OFAC]) == 0.5
    assert reciprocal_rank(RANKED, [Expected("X-Y-1", "none")]) == 0.0


def test_ndcg_is_one_for_a_perfect_ranking_and_discounts_lower_ranks():
    assert ndcg_at(RANKED[1:], [EDD, OFAC], 10) == pytest.approx(1.0)
    assert ndcg_at(RANKED, [EDD], 10) == pytest.approx(1 / math.log2(4))


def test_the_public_collection_measures_follow_trec_eval():
    rankings = {"1": ["a", "x", "b", "y"], "2": ["z"]}
    qrels = {"1": {"a", "b", "c"}, "2": {"q"}}
    measured = vaswani.measures(rankings, qrels)
    assert measured["MAP"] == pytest.approx(((1 / 1 + 2 / 3) / 3 + 0) / 2)
    assert measured["P@10"] == pytest.approx((2 / 10 + 0) / 2)
    assert measured["R@100"] == pytest.approx((2 / 3 + 0) / 2)


def test_the_public_collection_loads_with_its_published_counts():
    if not vaswani.DATASET.exists():
        pytest.skip(f"the NPL collection is not at {vaswani.DATASET} (set KB_VASWANI_DIR)")
    collection = vaswani.load()
    assert (len(collection.documents), len(collection.queries)) == (11_429, 93)
    assert sum(len(r) for r in collection.qrels.values()) == 2_083


def test_without_an_llm_endpoint_the_answer_metrics_say_plainly_they_did_not_run(monkeypatch):
    monkeypatch.delenv("KB_EVAL_LLM_API_KEY", raising=False)
    ran, reason = answers.configured()
    assert ran is False and "KB_EVAL_LLM_API_KEY" in reason
