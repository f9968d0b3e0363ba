"""`python -m bench --quick`: every benchmark runs at a tiny scale, so the benchmark code never rots. Its
timings are not asserted (speed is measured by `poe bench`); what it returns must make sense."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO


def run_quietly(module: str, *arguments: str) -> None:
    """`python -m module arguments...` from the repository, which must exit 0."""
    result = subprocess.run(
        [sys.executable, "-m", module, *arguments], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_quick_benchmark_runs_every_part_and_writes_its_results(tmp_path):
    run_quietly("bench", "--quick", "--out", str(tmp_path))
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["quick"] is True and results["machine"]["pgvector"].startswith("0.8")
    ingest = results["ingest"]
    assert ingest["failed"] == 0 and ingest["chunks"] > 0 and ingest["unchanged_outcomes"] == ["unchanged"]
    for key in ("query_embedding_ms", "hybrid_sql_ms", "tool_call_end_to_end_ms"):
        assert results["corpus_queries"][key]["n"] == 10
    assert 0 < results["server_memory"]["idle_mb"] <= results["server_memory"]["peak_under_load_mb"]
    assert [s["dimensions"] for s in results["scale"]] == [384, 1024]  # the default --dims
    for scale in results["scale"]:
        assert scale["build"]["hnsw_build_s"] > 0 and scale["sizes"]["hnsw_mb"] > 0
        assert all(0 <= r["recall_at_10"] <= 1 for r in scale["recall"].values())
        unfiltered = {k: v for k, v in scale["queries"].items() if k.endswith("filter none")}
        assert len(unfiltered) == 3 and all(v["rows_returned_min"] == v["top_k"] for v in unfiltered.values())
        assert all(v["naive_ms"]["n"] > 0 and v["two_queries_ms"]["n"] > 0 for v in scale["queries"].values())
    assert "## 3,000 chunks × 1024 dimensions" in (tmp_path / "results.md").read_text()
    realism = results["realism"]  # measured when the evals' vector cache exists, else says how to make it
    assert "skipped" in realism or [row["dimensions"] for row in realism["rows"]] == [384, 384, 1024]
    assert "## Targets" in (tmp_path / "results.md").read_text()
    point_in_time = results["versions"]
    assert set(point_in_time["corpus"]["modes"]) == {"current", "as_of 2025-07-01", "as_of 2026-11-01"}
    questions = point_in_time["corpus"]["questions"]
    assert all(m["sql_ms"]["n"] == questions for m in point_in_time["corpus"]["modes"].values())
    (history,) = point_in_time["scale"]
    assert history["history"]["documents"] > 0 and history["history"]["chunks"] > 0
    assert all(m["sql_ms"]["n"] > 0 for case in history["cases"].values() for m in case.values())
    assert "## Point in time (as_of)" in (tmp_path / "results.md").read_text()
    text_formats = results["parse_text"]
    assert {c["case"].split(",")[0] for c in text_formats["cases"]} == {"Markdown", "HTML"}
    assert all(c["chunks"] > 0 and c["bytes"] > 0 for c in text_formats["cases"])
    assert all(o["chunks"] == o["operations"] and o["operations_per_s"] > 0 for o in text_formats["openapi"])
    assert "## Parse throughput: Markdown, HTML, OpenAPI" in (tmp_path / "results.md").read_text()
    openai_part = results["openai"]  # through the real openai client, to the local wire-format server
    assert [x["in_flight"] for x in openai_part["ingest"]] == [1, 4, 8]
    assert all(x["failed"] == 0 and x["chunks_embedded"] > 0 for x in openai_part["ingest"])
    assert openai_part["ingest"][0]["peak_in_flight"] == 1  # one at a time means one
    assert openai_part["rate_limit"]["requests"] > 0 and openai_part["rate_limit"]["answered_429"] == 0
    assert "## OpenAI embedder: requests in flight and the rate limit" in (tmp_path / "results.md").read_text()
    # One part alone merges into those results: its sections and the targets table, nothing else.
    before = (tmp_path / "results.md").read_text()
    run_quietly("bench", "--parts", "corpus", "--quick", "--out", str(tmp_path))
    merged = json.loads((tmp_path / "results.json").read_text())
    assert merged["corpus_queries"]["command"] == "python -m bench --parts corpus --quick"
    assert merged["corpus_queries"]["tool_call_end_to_end_ms"]["n"] == 10
    assert merged["scale"] == results["scale"] and merged["ingest"] == results["ingest"]
    after = (tmp_path / "results.md").read_text()
    assert "By `python -m bench --parts corpus --quick`" in after and "--parts corpus" not in before
    section = after.index("## Point in time (as_of)")
    assert (
        after[section:].split("## MCP server memory")[0]
        == before[before.index("## Point in time (as_of)") :].split("## MCP server memory")[0]
    )


def test_the_vector_storage_comparison_runs_and_merges_its_section(tmp_path):
    (tmp_path / "results.json").write_text("{}")
    (tmp_path / "results.md").write_text("# Benchmarks\n\n## What to configure at 100k, 1M and 10M chunks\n\nkept\n")
    run_quietly("bench.vector_storage", "--quick", "--out", str(tmp_path))
    measured = json.loads((tmp_path / "results.json").read_text())["vector_storage"]
    assert set(measured["sizes"]) == {"EXTENDED", "MAIN"} and len(measured["queries"]) == 9
    # The in-row copy keeps its 1,024-d vectors out of TOAST: what the comparison is about.
    assert measured["sizes"]["MAIN"]["toast_mb"] < measured["sizes"]["EXTENDED"]["toast_mb"]
    text = (tmp_path / "results.md").read_text()
    assert text.index("## Vectors in the row or in TOAST") < text.index("## What to configure") and "kept" in text
