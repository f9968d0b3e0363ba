"""The ingest benchmark keeps the runs before it: one run's median moves with the machine's load."""

from __future__ import annotations

from bench.ingest_bench import EARLIER_RUNS_KEPT, _across_runs, _where_the_time_goes, carry_history


def _run(commit: str, *ratios: float) -> dict:
    return {"commit": commit, "rounds": [{"ratio": r} for r in ratios]}


def test_each_run_keeps_the_rounds_of_the_runs_before_it_newest_last():
    first, second, third = _run("a", 1.10), _run("b", 1.20, 1.12), _run("c", 1.30)
    carry_history(None, first)
    carry_history(first, second)
    carry_history(second, third)
    assert first["earlier_runs"] == []
    assert third["earlier_runs"] == [{"commit": "a", "ratios": [1.10]}, {"commit": "b", "ratios": [1.20, 1.12]}]


def test_only_the_last_runs_are_kept():
    run = _run("0", 1.1)
    carry_history(None, run)
    for n in range(1, EARLIER_RUNS_KEPT + 3):
        later = _run(str(n), 1.1)
        carry_history(run, later)
        run = later
    assert [r["commit"] for r in run["earlier_runs"]] == [str(n) for n in range(2, EARLIER_RUNS_KEPT + 2)]


def test_the_report_gives_each_earlier_runs_median_and_the_median_over_every_round():
    earlier = _run("b", 1.20, 1.12)
    earlier["earlier_runs"] = [{"commit": "a", "ratios": [1.10]}]
    this = _run("c", 1.30, 1.14)
    carry_history(earlier, this)
    text = "\n".join(_across_runs(this))
    assert "10.0% (1 rounds, a), 16.0% (2 rounds, b)" in text
    assert "Over all 5 rounds of those runs and this one, the median is 14.0%" in text  # 1.10 1.12 1.14 1.20 1.30
    assert _across_runs(_run("d", 1.1)) == []  # no earlier run: nothing to add


def test_the_added_time_is_split_into_extra_work_and_idle_cores_over_the_cores():
    measured = {"embed_alone_s": 30.0, "cold_s": 35.0, "ratio": 1.167, "cores": 2}
    measured |= {"alone_busy_s": 59.0, "alone_idle_s": 1.0, "cold_busy_s": 65.0, "cold_idle_s": 5.0}
    text = "\n".join(_where_the_time_goes([measured]))
    assert "| 1 | 59.0 / 1.0 | 65.0 / 5.0 | +6.0 | +4.0 | +10.0% | +6.7% |" in text  # 6 / 2 / 30, 4 / 2 / 30
    assert "the extra work adds 10.0% and the idle cores 6.7%" in text
    assert _where_the_time_goes([{"ratio": 1.1, "embed_alone_s": 30.0, "cold_s": 33.0}]) == []  # older runs


def test_the_extra_core_seconds_are_given_by_process_and_the_others_load_is_taken_off_the_ratio():
    alone = {"this process": 56.0, "parse server": 0.0, "postgres": 0.2, "other": 0.5}
    cold = {"this process": 62.0, "parse server": 3.0, "postgres": 1.7, "other": 6.5}
    measured = {"embed_alone_s": 30.0, "cold_s": 36.0, "ratio": 1.2, "cores": 2}
    measured |= {"alone_busy_s": 56.7, "alone_idle_s": 3.0, "cold_busy_s": 73.2, "cold_idle_s": 2.0}
    measured |= {"alone_cpu_by_process_s": alone, "cold_cpu_by_process_s": cold}
    text = "\n".join(_where_the_time_goes([measured]))
    assert "| 1 | +6.0 | +3.0 | +1.5 | +6.0 | 10.0% |" in text  # 0.2 - 6 / 2 / 30
    assert "the pipeline adds 10.0% to its embedding calls" in text
