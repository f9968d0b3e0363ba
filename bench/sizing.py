"""What to configure at 100k, 1M and 10M chunks, worked out from the sizes and build times measured in the
synthetic runs (the largest measured run at each dimension), scaled to the other sizes.

Scaling: table, GIN and HNSW sizes grow in proportion to the rows (each row has one vector, one tsvector,
one graph node with at most 2m neighbours). HNSW build time grows as n·log n (each insert searches a graph
that deepens with log n), which is optimistic once the graph no longer fits in maintenance_work_mem (pgvector
then inserts into the on-disk graph, several times slower): the memory column is what keeps it valid.
"""

from __future__ import annotations

import math
from typing import Any

SIZES = (100_000, 1_000_000, 10_000_000)
GB = 2**30


def _gb(value: float) -> str:
    return f"{value:.1f} GB" if value >= 1 else f"{value * 1024:.0f} MB"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _round_up(value_gb: float, step: float = 0.25) -> float:
    return max(step, math.ceil(value_gb / step) * step)


def plan(entry: dict[str, Any], chunks: int) -> dict[str, Any]:
    """Sizes and settings at `chunks`, from one measured scale entry."""
    n = entry["chunks"]
    sizes, build = entry["sizes"], entry["build"]
    hnsw = sizes["hnsw_mb"] * 2**20 / n * chunks / GB
    gin = sizes["gin_mb"] * 2**20 / n * chunks / GB
    total = sizes["chunks_with_indexes_mb"] * 2**20 / n * chunks / GB
    build_s = build["hnsw_build_s"] * (chunks / n) * (math.log(chunks) / math.log(n))
    # The indexes searched on every query should stay in shared_buffers; the rows read per query are few
    # (top_k and the legs' candidates), so the heap and TOAST need the OS cache, not the buffer pool.
    shared_buffers = _round_up(hnsw + gin)
    # The index is built partition by partition (one per classification): the largest partition's graph must
    # fit; with a quarter of the chunks in each that is a quarter of the index, plus a margin.
    maintenance = _round_up(hnsw / 4 * 1.25)
    return {
        "chunks": chunks,
        "hnsw_gb": hnsw,
        "total_gb": total,
        "build_s": build_s,
        "shared_buffers_gb": shared_buffers,
        "maintenance_work_mem_gb": maintenance,
        "ram_gb": _round_up(shared_buffers + maintenance + 2 + 0.25 * total, 1),
    }


RECALL_TARGET = 0.97


def _by_ef(values: dict[Any, Any]) -> dict[int, Any]:
    """ef_search keys as numbers: they are strings once results.json has been read back."""
    return {int(ef): v for ef, v in values.items()}


def recall_and_p95_by_ef_search(s: dict[str, Any]) -> dict[int, tuple[float, float]]:
    """Per ef_search both were measured at: the lowest vector recall@10 over the filters and the worst hybrid
    p95 over the nine cases. The served ef_search is the first recall column, its timings are `ours_ms`."""
    recalls = [_by_ef(v["recall_at_10_by_ef_search"]) for v in s["recall"].values()]
    served = next(iter(recalls[0]))
    timings = [{served: v["ours_ms"], **_by_ef(v.get("ours_ms_by_ef_search", {}))} for v in s["queries"].values()]
    return {
        ef: (min(r[ef] for r in recalls), max(t[ef]["p95"] for t in timings))
        for ef in timings[0]
        if all(ef in r for r in recalls)
    }


def ef_search_for(entry: dict[str, Any]) -> tuple[int, float] | None:
    """The smallest ef_search the run timed at whose vector recall@10 reaches the target under every filter
    case, with the hybrid query's worst p95 there."""
    measured = recall_and_p95_by_ef_search(entry)
    reaching = [ef for ef, (recall, _) in sorted(measured.items()) if recall >= RECALL_TARGET]
    return (reaching[0], measured[reaching[0]][1]) if reaching else None


def _ef_search_cell(runs: dict[int, dict[str, Any]], chunks: int) -> str:
    """KB_HNSW_EF_SEARCH at `chunks`: measured where a run was, else the largest run's value as a floor
    (recall falls as the graph grows, so a larger collection needs at least as much)."""
    if chunks in runs and (found := ef_search_for(runs[chunks])) is not None:
        return f"{found[0]} (measured: p95 {found[1]:.0f} ms)"
    below = [n for n in runs if n < chunks and ef_search_for(runs[n]) is not None]
    if not below:
        return "–"
    found = ef_search_for(runs[max(below)])
    assert found is not None
    return f"≥ {found[0]}: measure recall first"


def render(r: dict[str, Any]) -> list[str]:
    measured: dict[int, dict[str, Any]] = {}
    runs: dict[int, dict[int, dict[str, Any]]] = {}
    for entry in r.get("scale", []):
        dims = entry.get("dimensions", 384)
        runs.setdefault(dims, {})[entry["chunks"]] = entry
        if dims not in measured or entry["chunks"] > measured[dims]["chunks"]:
            measured[dims] = entry
    if not measured or r.get("quick"):
        return []
    lines = [
        "## What to configure at 100k, 1M and 10M chunks",
        "",
        "Worked out by `bench/sizing.py` from the largest synthetic run at each dimension above (sizes scaled "
        "linearly with the rows, HNSW build time as n·log n, on these 2 shared cores with "
        "`max_parallel_maintenance_workers = 2`). shared_buffers holds the HNSW and GIN indexes, which every "
        "query walks; maintenance_work_mem holds the largest partition's graph while it is built (a quarter of "
        "the index when the classifications are even: give it the whole index's size if one classification "
        "holds most chunks), or the build falls back to inserting into the on-disk graph, several times slower; "
        "RAM adds the OS cache for a quarter of the table (the rows answers are read from) and 2 GB for "
        "connections and the OS. KB_HNSW_EF_SEARCH (the server's, default 80) is the smallest the runs above "
        f"timed at which the vector leg's recall@10 reaches {RECALL_TARGET} under every filter case.",
        "",
        "| dimensions (measured at) | chunks | HNSW index | on disk (tables and indexes) | HNSW build | "
        "shared_buffers | maintenance_work_mem | RAM | KB_HNSW_EF_SEARCH |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for dims, entry in sorted(measured.items()):
        index = entry.get("index", "vector")
        for chunks in SIZES:
            p = plan(entry, chunks)
            lines.append(
                f"| {dims} ({entry['chunks']:,}, {index} index) | {chunks:,} | {_gb(p['hnsw_gb'])} | "
                f"{_gb(p['total_gb'])} | {_duration(p['build_s'])} | {_gb(p['shared_buffers_gb'])} | "
                f"{_gb(p['maintenance_work_mem_gb'])} | {_gb(p['ram_gb'])} | {_ef_search_cell(runs[dims], chunks)} |"
            )
    lines += ["", *_when_to_scale_out(measured), ""]
    return lines


def _when_to_scale_out(measured: dict[int, dict[str, Any]]) -> list[str]:
    largest = max(measured.values(), key=lambda e: (e["chunks"], e.get("dimensions", 384)))
    p50s = [v["ours_ms"]["p50"] for v in largest["queries"].values() if v["ours_ms"].get("n")]
    worst_p95 = max(v["ours_ms"]["p95"] for v in largest["queries"].values())
    per_core = 1000 / (sum(p50s) / len(p50s)) if p50s else 0
    return [
        f"**A read replica** takes over when search load is more than the primary's cores can serve: at "
        f"{largest['chunks']:,} × {largest.get('dimensions', 384)} the hybrid query's median over the nine "
        f"cases is {1000 / per_core:.1f} ms of one core, about {per_core:.0f} searches/s per core, so these 2 "
        "cores serve ~"
        f"{2 * per_core:.0f}/s at best and less while ingest embeds, writes and maintains the same indexes "
        "(an HNSW insert costs a search). `kb serve` reads from a replica (README, read replica) and the "
        "replica needs the same shared_buffers as the primary, since it walks the same indexes.",
        "",
        "**Partitioning by department** (sub-partitions of each classification) takes over when a department "
        "filter keeps too many chunks to read them all (the search reads a filter's chunks itself below 5,000 "
        "a role may read, kb_server/search.py) yet too few for the graph: HNSW with iterative scan discards the "
        "other departments' nodes, so the fewer rows a filter keeps, the more nodes it visits per row returned "
        f"(the worst hybrid p95 at {largest['chunks']:,} is {worst_p95:.0f} ms, a 10% filter). A department's "
        "own graph answers its filter at the cost of an unfiltered search visiting one graph per department. "
        "It also takes over when one server cannot hold the HNSW indexes in memory (the RAM column at 10M): "
        "then the partitions can live on separate servers, or replicas with more memory serve the search.",
    ]
