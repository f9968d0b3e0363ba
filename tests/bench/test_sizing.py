"""The sizing table's KB_HNSW_EF_SEARCH: the smallest timed ef_search that reaches the recall target."""

from __future__ import annotations

from bench.sizing import _ef_search_cell, ef_search_for


def _case(p95_at_80: float, **p95_by_ef: float) -> dict:
    return {
        "ours_ms": {"n": 10, "p50": 1.0, "p95": p95_at_80},
        "ours_ms_by_ef_search": {
            ef.removeprefix("ef"): {"n": 10, "p50": 1.0, "p95": ms} for ef, ms in p95_by_ef.items()
        },
    }


def _entry(recall: dict[str, dict[str, float]], queries: dict[str, dict]) -> dict:
    return {
        "recall": {f: {"recall_at_10_by_ef_search": by_ef} for f, by_ef in recall.items()},
        "queries": queries,
    }


def test_the_smallest_timed_ef_search_reaching_the_target_under_every_filter_is_chosen_with_its_worst_p95():
    entry = _entry(
        {
            "none": {"80": 0.99, "120": 0.99, "200": 1.0},
            "1%": {"80": 0.96, "120": 0.98, "200": 0.99},  # 120 would do, but no query was timed there
        },
        {"rare": _case(9.0, ef200=12.0), "common": _case(30.0, ef200=41.0)},
    )
    assert ef_search_for(entry) == (200, 41.0)


def test_the_served_ef_search_is_kept_when_it_already_reaches_the_target():
    entry = _entry({"none": {"80": 0.97, "200": 1.0}}, {"rare": _case(9.0, ef200=12.0)})
    assert ef_search_for(entry) == (80, 9.0)


def test_no_ef_search_is_recommended_when_none_timed_reaches_the_target():
    entry = _entry({"none": {"80": 0.90, "200": 0.95}}, {"rare": _case(9.0, ef200=12.0)})
    assert ef_search_for(entry) is None
    assert _ef_search_cell({1_000_000: entry}, 1_000_000) == "–"


def test_a_size_larger_than_any_run_gets_the_largest_runs_value_as_a_floor():
    small = _entry({"none": {"80": 0.99}}, {"rare": _case(5.0)})
    large = _entry({"none": {"80": 0.95, "200": 0.99}}, {"rare": _case(9.0, ef200=12.0)})
    runs = {100_000: small, 1_000_000: large}
    assert _ef_search_cell(runs, 100_000) == "80 (measured: p95 5 ms)"
    assert _ef_search_cell(runs, 10_000_000) == "≥ 200: measure recall first"
