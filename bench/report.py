"""bench/results.md from the results dictionary (bench/results.json holds the same numbers)."""

from __future__ import annotations

import re
from typing import Any

from bench import ingest_bench, openai_rate, parse_text, realism, sizing, storage, vector_storage


def _ms(stats: dict[str, float]) -> str:
    if not stats or not stats.get("n"):
        return "–"
    return f"{stats['min']:.1f} / {stats['p50']:.1f} / {stats['p95']:.1f}"


def _ratio(slow: dict[str, float] | None, fast: dict[str, float]) -> str:
    if not slow or not slow.get("n") or not fast.get("p50"):
        return "–"
    return f"{slow['p50'] / fast['p50']:.1f}×"


def _check(value: float | None, limit: float, lower_is_better: bool = True) -> str:
    if value is None:
        return "–"
    met = value <= limit if lower_is_better else value >= limit
    return "met" if met else "**missed**"


def audit_section(a: dict[str, Any] | None) -> list[str]:
    if not a:
        return []
    return [
        "## The audit record's cost",
        "",
        f"`search_knowledge_base` through MCP client sessions, {a['calls_each']} calls each, alternating between a "
        "server that writes each audit record to PostgreSQL before answering and one whose records go to memory.",
        "",
        "| | min / p50 / p95 ms |",
        "|---|---|",
        f"| with the audit record | {_ms(a['tool_call_with_audit_ms'])} |",
        f"| without (records kept in memory) | {_ms(a['tool_call_without_audit_ms'])} |",
        f"| difference of each pair of calls | {_ms(a['paired_difference_ms'])} |",
        f"| the audit write alone (one INSERT on the request's connection) | {_ms(a['audit_write_alone_ms'])} |",
        "| the same with `synchronous_commit = off` (no WAL flush) | "
        f"{_ms(a.get('audit_write_without_wal_flush_ms', {}))} |",
        "",
        f"The record adds {a['p95_added_ms']:.2f} ms to the p95 and {a['p50_added_ms']:.2f} ms to the median"
        + (
            f" (90% bootstrap interval of the p95 difference: {a['p95_added_interval_ms'][0]:.2f} to "
            f"{a['p95_added_interval_ms'][1]:.2f} ms)."
            if a.get("p95_added_interval_ms")
            else "."
        ),
        *(
            [
                "",
                f"Machine load (1-minute average) before and after: {a['load_average_1min'][0]} and "
                f"{a['load_average_1min'][1]} on {a.get('cores', 2)} cores; `{a['command']}` at {a['commit']}.",
            ]
            if a.get("load_average_1min") and a.get("command")
            else []
        ),
        "",
    ]


def audit_target(a: dict[str, Any] | None) -> tuple[str, str, str]:
    """The audit record's row of the targets table (`--parts audit` replaces just this row)."""
    target = "the audit record adds ≤ 2 ms to the tool call p95"
    if not a:
        return target, "–", "–"
    return target, f"{a['p95_added_ms']:.2f} ms", _check(a["p95_added_ms"], 2)


def _versions(r: dict[str, Any]) -> list[str]:
    from bench.versions import render as render_versions

    v = r["versions"]
    note = (
        f"By `{v['command']}` ({v['seconds'] / 60:.0f} min), commit {v['machine']['commit']}." if "command" in v else ""
    )
    return [*render_versions(v)[:2], *([note, ""] if note else []), *render_versions(v)[2:]]


def _parse(r: dict[str, Any]) -> list[str]:
    from bench.parse import render as render_parse

    return render_parse(r.get("parse"))


def corpus_query_section(q: dict[str, Any]) -> list[str]:
    stamp = (
        f" By `{q['command']}`, commit {q['commit']}; load {q['load'][0]} before, {q['load'][1]} after."
        if q.get("command")
        else ""
    )
    return [
        "## Query at corpus size",
        "",
        f"{q['queries']} golden questions, each as its own role.{stamp}",
        "",
        "| | min / p50 / p95 ms |",
        "|---|---|",
        f"| query embedding (local model) | {_ms(q['query_embedding_ms'])} |",
        f"| hybrid SQL (one round trip, under RLS) | {_ms(q['hybrid_sql_ms'])} |",
        f"| `search_knowledge_base` end to end, through an MCP client session | {_ms(q['tool_call_end_to_end_ms'])} |",
        "",
    ]


def server_memory_section(memory: dict[str, Any]) -> list[str]:
    return [
        "## MCP server memory",
        "",
        f"`kb serve --transport http` with the local embedder loaded: {memory['idle_mb']} MB idle, "
        f"{memory['peak_under_load_mb']} MB at the peak of {memory['searches']} searches from {memory['clients']} "
        f"concurrent clients, {memory['after_load_mb']} MB after.",
        "",
    ]


def render(r: dict[str, Any]) -> str:
    m = r["machine"]
    q, ingest, memory = r["corpus_queries"], r["ingest"], r["server_memory"]
    lines = [
        "# Benchmarks",
        "",
        f"Produced by `{r['command']}` ({r['seconds'] / 60:.0f} min); do not edit by hand."
        + (" **Quick mode: tiny scale, the timings mean nothing.**" if r["quick"] else ""),
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB; PostgreSQL {m['postgresql']} (embedded, "
        f"shared_buffers {m['shared_buffers']}), pgvector {m['pgvector']}; Python {m['python']}; commit "
        f"{m['commit']}. Figures are min / median / p95 in milliseconds over repeated runs, measured from the client.",
        "",
        *corpus_query_section(q),
        *audit_section(r.get("audit")),
        *(_versions(r) if r.get("versions") else []),
        *ingest_bench.render(ingest),
        *_parse(r),
        *parse_text.render(r.get("parse_text")),
        *(openai_rate.render(r["openai"]) if r.get("openai") else []),
        *server_memory_section(memory),
    ]
    for s in r["scale"]:
        lines += _scale_section(s)
    lines += realism.render(r.get("realism"))
    lines += storage.render(r.get("storage"))
    lines += vector_storage.render(r["vector_storage"]) if r.get("vector_storage") else []
    lines += sizing.render(r)
    lines += targets_section(r)
    lines += [
        "## How the synthetic chunks are made",
        "",
        "`bench/synthetic.py`: ~120 words per chunk from a 20,000-word pseudo-English vocabulary with Zipf "
        "frequencies, plus three marker words matching 0.01% (rare), 1% (medium) and 25% (common) of rows; "
        "unit vectors (384 or 1024 dimensions) from a Gaussian mixture shaped like real text embeddings: 64 "
        "topics × 16 subtopics with Zipf-like sizes, a power-law (anisotropic) spectrum, subtopics of varying "
        "tightness, a direction all vectors share, and a random rotation (compared with real vectors above); "
        "a quarter of the rows per classification; "
        "`finance` holds 1% of the rows and `legal` 10% (the department filters); one document per 20 chunks. "
        "Loaded with COPY, then the migrations' own HNSW (m 16, ef_construction 64) and GIN indexes are built. "
        "Queries run as `demo_readonly` (a quarter of the rows), with 50 query vectors from the same clusters and "
        "one marker word as the text.",
        "",
        "The naive form is the LLD §2 SQL as written, on a copy of the same rows in one unpartitioned table with a "
        "per-row policy (`classification <= ceiling`), `websearch_to_tsquery` and `ts_rank_cd` over every match, "
        'the legs joined to documents, iterative scan on. "Two queries" runs the vector leg and the text leg as '
        "two statements (two round trips) and fuses them in Python, as several frameworks do.",
        "",
    ]
    return "\n".join(lines)


def _scale_section(s: dict[str, Any]) -> list[str]:
    build, sizes = s["build"], s["sizes"]
    by = f"By `{s['command']}`, commit {s['commit']}. " if "command" in s else ""
    lines = [
        f"## {s['chunks']:,} chunks × {s.get('dimensions', 384)} dimensions",
        "",
        by + f"Per million chunks: HNSW {sizes['hnsw_mb'] * 1e6 / s['chunks'] / 1024:.2f} GB, chunk tables with "
        f"their indexes {sizes['chunks_with_indexes_mb'] * 1e6 / s['chunks'] / 1024:.2f} GB (measured here, "
        "scaled linearly: both grow in proportion to the rows).",
        "",
        f"Load (COPY) {build['load_s']} s; HNSW build {build['hnsw_build_s']} s ({sizes['hnsw_mb']} MB over the four "
        f"partitions); GIN build {build['gin_build_s']} s ({sizes['gin_mb']} MB); chunk tables with their indexes "
        f"{sizes['chunks_with_indexes_mb']} MB."
        + (
            f" The naive table's copy took {s['naive_build']['copy_s']} s and its HNSW build "
            f"{s['naive_build']['hnsw_build_s']} s."
            if "naive_build" in s
            else ""
        )
        + (
            f" The naive form's figures are from {s['naive_from']}: this run skipped it (`--no-naive`)."
            if "naive_from" in s
            else ""
        ),
        "",
        "Vector leg as served (HNSW, ef_search 80, iterative scan) against an exact scan, and rows returned for "
        "LIMIT 50; then the recall the same query would have with a larger ef_search:",
        "",
        "| department filter | recall@10 | rows for LIMIT 50 | recall@10 by ef_search |",
        "|---|---|---|---|",
        *(
            f"| {name} | {v['recall_at_10']:.3f} | {v['mean_rows_for_limit_50']} | "
            + ", ".join(f"{ef}: {r:.3f}" for ef, r in v.get("recall_at_10_by_ef_search", {}).items())
            + " |"
            for name, v in s["recall"].items()
        ),
        "",
        f"Exact (sequential) vector search, no filter: {_ms(s['exact_vector_ms'])} ms.",
        "",
        "Hybrid query min / p50 / p95 ms (ours: ef_search 80, as served; the same query at larger ef_search in "
        "the last column, p95 only):",
        "",
        "| text term, department filter | ours | two queries + fusion | naive LLD form | naive ÷ ours | "
        "two ÷ ours | rows / top_k | ours p95 by ef_search |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, v in s["queries"].items():
        by_ef = ", ".join(f"{ef}: {t['p95']:.1f}" for ef, t in v.get("ours_ms_by_ef_search", {}).items())
        lines.append(
            f"| {name} | {_ms(v['ours_ms'])} | {_ms(v['two_queries_ms'])} | {_ms(v.get('naive_ms', {}))} | "
            f"{_ratio(v.get('naive_ms'), v['ours_ms'])} | {_ratio(v['two_queries_ms'], v['ours_ms'])} | "
            f"{v['rows_returned_min']} / {v['top_k']} | {by_ef or '–'} |"
        )
    if s.get("load_average_during_queries"):
        lines += ["", f"Machine load (1, 5, 15-minute averages) while timed: {s['load_average_during_queries']}."]
    no_filter = next(iter(s["queries"].values()))["ours_ms"]
    lines += [
        "",
        f"Exact vector search ÷ our whole hybrid query (no filter, rare term): "
        f"{_ratio(s['exact_vector_ms'], no_filter)}.",
        "",
    ]
    return lines


def targets_section(r: dict[str, Any]) -> list[str]:
    q, ingest, memory = r["corpus_queries"], r["ingest"], r["server_memory"]
    size = max((s["chunks"] for s in r["scale"]), default=None)
    at_size = [s for s in r["scale"] if s["chunks"] == size]
    largest = at_size[0] if at_size else None
    dims = "/".join(str(s.get("dimensions", 384)) for s in at_size)
    worst = max((v["ours_ms"]["p95"] for s in at_size for v in s["queries"].values()), default=None)
    recall = min((v["recall_at_10"] for s in at_size for v in s["recall"].values()), default=None)
    full = all(v["rows_returned_min"] >= v["top_k"] for s in at_size for v in s["queries"].values())
    naive_ratios = [
        v["naive_ms"]["p50"] / v["ours_ms"]["p50"]
        for s in at_size
        for v in s["queries"].values()
        if v.get("naive_ms", {}).get("n")
    ]
    two_ratios = [v["two_queries_ms"]["p50"] / v["ours_ms"]["p50"] for s in r["scale"] for v in s["queries"].values()]
    rows = [
        (
            "hybrid SQL p95 at corpus size ≤ 20 ms",
            f"{q['hybrid_sql_ms']['p95']:.1f} ms",
            _check(q["hybrid_sql_ms"]["p95"], 20),
        ),
        (
            "tool call p95 at corpus size ≤ 50 ms",
            f"{q['tool_call_end_to_end_ms']['p95']:.1f} ms",
            _check(q["tool_call_end_to_end_ms"]["p95"], 50),
        ),
        audit_target(r.get("audit")),
        (
            f"hybrid SQL p95 at {largest['chunks']:,} × {dims} ≤ 80 ms, every term, filter" if largest else "at scale",
            f"{worst:.1f} ms (worst case)" if worst is not None else "–",
            _check(worst, 80),
        ),
        (
            f"vector-leg recall@10 ≥ 0.95 at {largest['chunks']:,} × {dims}" if largest else "recall",
            f"{recall:.3f} (lowest filter case)" if recall is not None else "–",
            _check(recall, 0.95, lower_is_better=False),
        ),
        ("full top_k rows under the 1% filter", "yes" if full else "no", "met" if full else "**missed**"),
        (
            "no slower than two queries + fusion",
            f"two ÷ ours ≥ {min(two_ratios):.2f}×" if two_ratios else "–",
            _check(min(two_ratios) if two_ratios else None, 1.0, lower_is_better=False),
        ),
        (
            "≥ 30× faster than the naive form at the largest scale",
            f"{min(naive_ratios):.1f}× (worst case)" if naive_ratios else "–",
            _check(min(naive_ratios) if naive_ratios else None, 30, lower_is_better=False),
        ),
        *((target, got, _check(value, limit)) for target, got, value, limit in ingest_bench.target_rows(ingest)),
        ("unchanged corpus re-ingests in ≤ 3 s", f"{ingest['unchanged_s']} s", _check(ingest["unchanged_s"], 3)),
        (
            "MCP server RSS ≤ 400 MB with the local embedder",
            f"{memory['peak_under_load_mb']} MB peak",
            _check(memory["peak_under_load_mb"], 400),
        ),
    ]
    rows += [row for s in sorted(at_size, key=lambda s: s.get("dimensions", 384)) for row in _recall_targets(s)]
    return [
        "## Targets",
        "",
        "| target | measured | |",
        "|---|---|---|",
        *(f"| {a} | {b} | {c} |" for a, b, c in rows),
        "",
    ]


HYBRID_P95_TARGET = 50.0


def _recall_targets(s: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The scale issue's pair at each dimension: recall@10 ≥ 0.97 under every filter and hybrid p95 ≤ 50 ms,
    at the smallest ef_search that reaches the recall (the served one if it does)."""
    if not s.get("recall") or "recall_at_10_by_ef_search" not in next(iter(s["recall"].values())):
        return []
    measured = sizing.recall_and_p95_by_ef_search(s)
    reaching = [ef for ef, (recall, _) in sorted(measured.items()) if recall >= sizing.RECALL_TARGET]
    ef = reaching[0] if reaching else max(measured, key=lambda e: measured[e][0])
    recall, p95 = measured[ef]
    where = f"{s['chunks']:,} × {s.get('dimensions', 384)}"
    return [
        (
            f"vector recall@10 ≥ {sizing.RECALL_TARGET} at {where} (no filter, 10%, 1%)",
            f"{recall:.3f} (lowest filter case) at ef_search {ef}" + ("" if reaching else ", the best measured"),
            _check(recall, sizing.RECALL_TARGET, lower_is_better=False),
        ),
        (
            f"hybrid p95 ≤ {HYBRID_P95_TARGET:.0f} ms at {where}, every term × filter, at that ef_search",
            f"{p95:.1f} ms (worst case)",
            _check(p95, HYBRID_P95_TARGET),
        ),
    ]


SCALE_SECTION = re.compile(r"## [\d,]+ chunks × \d+ dimensions$")
SCALE_OWNED = (
    "## Are the synthetic vectors like real ones?",
    "## What to configure at 100k, 1M and 10M chunks",
    "## Targets",
)


def _sections(lines: list[str]) -> dict[str, tuple[int, int]]:
    starts = [i for i, line in enumerate(lines) if line.startswith("## ")]
    return {lines[s]: (s, e) for s, e in zip(starts, [*starts[1:], len(lines)], strict=True)}


def splice_scale(markdown: str, r: dict[str, Any]) -> str:
    """results.md with only the sections the scale runs own replaced (each size × dimension, the real-vector
    comparison, what to configure, the targets): notes added to the other sections stay as they are. A new
    size × dimension goes where the full report would put it."""
    rendered = render(r).split("\n")
    new = _sections(rendered)
    owned = [h for h in new if SCALE_SECTION.match(h) or h in SCALE_OWNED]
    lines = markdown.split("\n")
    for heading in owned:
        start, end = new[heading]
        section = rendered[start:end]
        old = _sections(lines)
        if heading in old:
            at, until = old[heading]
        else:  # before the first section the full report puts after this one that the file already has
            later = [h for h in owned[owned.index(heading) + 1 :] if h in old]
            at = until = old[later[0]][0] if later else len(lines)
        lines = [*lines[:at], *section, *lines[until:]]
    return "\n".join(lines)
