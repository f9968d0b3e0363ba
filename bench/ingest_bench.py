"""The ingest benchmark: `corpus/` cold in its own process (peak RSS sampled) against the embedding calls
alone, interleaved in the same run; the unchanged re-ingest; the OpenAI embedder's throughput at 1, 4 and 8
requests in flight against a local server with a realistic latency, within its rate limits."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

import psutil
import psycopg
from evals.run import fresh_database

from kb_core.db.embedding_space import EmbeddingSpace
from kb_core.db.targets import DatabaseTargets

REPO = Path(__file__).resolve().parents[1]
TARGET_RATIO = 1.15
TARGET_RSS_MB = 400


def run(superuser: str, targets: DatabaseTargets, space: EmbeddingSpace, *, limit: int, rounds: int) -> dict[str, Any]:
    """`rounds` cold ingests, the first into `targets` (which the query benchmarks then read), the others into
    databases made for them and dropped after."""
    extra = [f"bench_ingest_round_{n}" for n in range(1, rounds)]
    conninfos = [targets.ingest, *(fresh_database(superuser, name, space).ingest for name in extra)]
    try:
        out, peak = _probe(conninfos, limit)
    finally:
        with psycopg.connect(superuser, autocommit=True) as conn:
            for name in extra:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    ratios = [r["ratio"] for r in out["rounds"]]
    middle = sorted(out["rounds"], key=lambda r: r["ratio"])[len(ratios) // 2]
    out.update(
        {
            "peak_rss_mb": round(peak / 2**20, 1),
            "cold_s": middle["cold_s"],
            "embed_alone_s": middle["embed_alone_s"],
            "documents_per_s": round(out["documents"] / middle["cold_s"], 2),
            "chunks_per_s": round(out["chunks"] / middle["cold_s"], 2),
            "overhead_vs_embedding_alone": round(median(ratios) - 1, 3),
        }
    )
    return out


def _children_own_memory(process: psutil.Process) -> int:
    """What the parse server and its children hold of their own (USS): not the pages a child shares with
    the server it was forked from, nor the library files the server shares with the ingesting process."""
    own = 0
    for child in process.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):  # it ended after the listing
            own += child.memory_full_info().uss
    return own


def _probe(conninfos: list[str], limit: int) -> tuple[dict[str, Any], int]:
    process = psutil.Popen(
        [sys.executable, "-m", "bench.ingest_probe", str(REPO / "corpus"), str(limit), *conninfos],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    peak = 0
    while process.poll() is None:
        try:
            peak = max(peak, process.memory_info().rss + _children_own_memory(process))
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    assert process.stdout is not None
    return json.loads(process.stdout.read()), peak


def render(ingest: dict[str, Any] | None) -> list[str]:
    if not ingest:
        return []
    lines = [
        "## Ingest",
        "",
        f"`corpus/` cold ({ingest['documents']} documents, {ingest['chunks']} chunks of which "
        f"{ingest.get('embedded', '–')} embedded, {ingest['failed']} failed), in its own process: "
        f"{ingest['cold_s']} s, {ingest['documents_per_s']} documents/s, {ingest['chunks_per_s']} chunks/s (median "
        f"round); the model loads in {ingest['model_load_s']} s "
        "before that. Parsing, chunking and scanning run on a thread of their own one file ahead; the model runs "
        "one call per core at once (a file's windows, and as many files as cores), each call on one core; storing "
        "runs on the main thread. Time by stage (summed over files, so overlapping): "
        + ", ".join(f"{k} {v} s" for k, v in ingest["time_by_stage_s"].items())
        + ". Unchanged re-ingest: "
        f"{ingest['unchanged_s']} s (outcomes: {', '.join(ingest['unchanged_outcomes'])}). Peak memory of the "
        f"ingesting process: {ingest['peak_rss_mb']} MB (target ≤ {TARGET_RSS_MB} MB), its resident set plus what "
        "the parse server and the child parsing a file hold of their own (each file is parsed in a child of the "
        "parse server under KB_MAX_PARSE_MEMORY_BYTES, as `kb ingest` and the worker parse it).",
        "",
    ]
    if ingest.get("rounds"):
        lines += [
            "The embedding calls alone (the texts the pipeline embeds, batched as it batches them) and the cold "
            "ingest, measured in turn in the same process, the order alternating by round (the machine's 2 cores "
            "are shared, so only figures taken side by side compare):",
            "",
            "| round | embedding alone s | cold ingest s | ingest ÷ embedding |",
            "|---|---|---|---|",
            *(
                f"| {n} | {r['embed_alone_s']} | {r['cold_s']} | {r['ratio']:.3f} |"
                for n, r in enumerate(ingest["rounds"], start=1)
            ),
            "",
            f"Median: the pipeline adds {ingest['overhead_vs_embedding_alone'] * 100:.1f}% to its embedding calls "
            f"(target ≤ {(TARGET_RATIO - 1) * 100:.0f}%).",
            "",
            *_where_the_time_goes(ingest["rounds"]),
            *_across_runs(ingest),
        ]
    else:
        lines += [
            f"The embedding calls alone (same batching) take {ingest['embed_alone_s']} s, so the pipeline adds "
            f"{ingest['overhead_vs_embedding_alone'] * 100:.1f}% to them.",
            "",
        ]
    return lines


def _where_the_time_goes(rounds: list[dict[str, Any]]) -> list[str]:
    """The extra wall time split into the machine's extra busy and idle core-seconds (wall × cores = busy +
    idle): work the pipeline does besides embedding, and cores left waiting on a stage."""
    measured = [r for r in rounds if "cold_busy_s" in r]
    if not measured:
        return []
    extra = [(r["cold_busy_s"] - r["alone_busy_s"], r["cold_idle_s"] - r["alone_idle_s"]) for r in measured]
    shares = [(_share(r, busy), _share(r, idle)) for r, (busy, idle) in zip(measured, extra, strict=True)]
    rows = [
        f"| {n} | {r['alone_busy_s']:.1f} / {r['alone_idle_s']:.1f} | {r['cold_busy_s']:.1f} / "
        f"{r['cold_idle_s']:.1f} | {busy:+.1f} | {idle:+.1f} | {work * 100:+.1f}% | {waiting * 100:+.1f}% |"
        for n, (r, (busy, idle), (work, waiting)) in enumerate(zip(measured, extra, shares, strict=True), start=1)
    ]
    cores = measured[0]["cores"]
    work = median(w for w, _ in shares)
    waiting = median(i for _, i in shares)
    processes = _by_process(measured)
    return [
        f"Where the added time goes: the machine's busy and idle core-seconds (all {cores} cores, every process: "
        "this one, the parse server's children, PostgreSQL, and whatever else ran) over each measurement. Wall time "
        f"× {cores} = busy + idle, so the ingest's added wall time is its extra busy core-seconds (work besides "
        f"the embedding calls) plus its extra idle ones (cores waiting on a stage), each over {cores} cores:",
        "",
        "| round | embedding alone: busy / idle core-s | cold ingest: busy / idle core-s | extra busy | extra idle "
        "| busy ÷ cores, % of embedding | idle ÷ cores, % of embedding |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Median: the extra work adds {work * 100:.1f}% and the idle cores {waiting * 100:.1f}%.",
        "",
        *processes,
    ]


def _share(measured: dict[str, Any], core_seconds: float) -> float:
    """Core-seconds as the wall time they add over the round's cores, a share of its embedding calls' time."""
    return core_seconds / measured["cores"] / measured["embed_alone_s"]


def _by_process(measured: list[dict[str, Any]]) -> list[str]:
    """Whose the extra busy core-seconds were: the pipeline's (this process, the parse server, PostgreSQL) or
    other processes' (load that is not the pipeline's, landing on one measurement and not the other)."""
    measured = [r for r in measured if "cold_cpu_by_process_s" in r]
    if not measured:
        return []
    groups = list(measured[0]["cold_cpu_by_process_s"])
    extra = [{g: r["cold_cpu_by_process_s"][g] - r["alone_cpu_by_process_s"][g] for g in groups} for r in measured]
    net = [r["ratio"] - 1 - _share(r, e["other"]) for r, e in zip(measured, extra, strict=True)]
    return [
        "The extra busy core-seconds by process (cold ingest less embedding alone; a process's own CPU and its "
        "reaped children's): this one (the embedding calls and the pipeline's threads: parsing's chunking and "
        "injection scan, storing), the parse server with the child it forks per file, PostgreSQL, and every "
        "other process on the machine:",
        "",
        "| round | " + " | ".join(groups) + " | pipeline's added time net of the other processes' |",
        "|---|" + "---|" * len(groups) + "---|",
        *(
            f"| {n} | " + " | ".join(f"{e[g]:+.1f}" for g in groups) + f" | {x * 100:.1f}% |"
            for n, (e, x) in enumerate(zip(extra, net, strict=True), start=1)
        ),
        "",
        f"Median net of the other processes' extra load: the pipeline adds {median(net) * 100:.1f}% to its "
        "embedding calls (their CPU over the cores taken off the measured ratio; what they cost the pipeline's "
        "threads in cache and memory bandwidth is not).",
        "",
    ]


EARLIER_RUNS_KEPT = 6


def carry_history(previous: dict[str, Any] | None, measured: dict[str, Any]) -> None:
    """Keep the last runs' rounds beside this one's: one run's median moves by several points with the load of
    the shared cores, so the report shows it among the runs before it."""
    earlier = list((previous or {}).get("earlier_runs", []))
    if previous and previous.get("rounds"):
        earlier.append({"commit": previous.get("commit"), "ratios": [r["ratio"] for r in previous["rounds"]]})
    measured["earlier_runs"] = earlier[-EARLIER_RUNS_KEPT:]


def _across_runs(ingest: dict[str, Any]) -> list[str]:
    earlier = ingest.get("earlier_runs") or []
    if not earlier:
        return []
    runs = ", ".join(
        f"{(median(r['ratios']) - 1) * 100:.1f}% ({len(r['ratios'])} rounds, {r['commit']})" for r in earlier
    )
    pooled = [x for r in earlier for x in r["ratios"]] + [r["ratio"] for r in ingest["rounds"]]
    return [
        f"Earlier runs: {runs}. Over all {len(pooled)} rounds of those runs and this one, the median is "
        f"{(median(pooled) - 1) * 100:.1f}%. Why a run's median moves and where the floor is: the embedding calls "
        "alone keep the 2 cores busy, so whatever else runs lengthens the run by its CPU time over the cores (no "
        "core stands idle longer in the ingest than in the embedding alone: the tables above). The pipeline's own "
        "work is the floor: in this process chunking, storing and the injection scan (about 5.6 s of CPU over the "
        "corpus, the most of it), in the parse server the parse and the child it forks per file (the fork about "
        "1.3 s of it, the price of each file's memory budget), and PostgreSQL's inserts and index updates; other "
        "processes' load on the same cores moves a round's ratio by several points.",
        "",
    ]


def target_rows(ingest: dict[str, Any]) -> list[tuple[str, str, float | None, float]]:
    """(target, measured, value, limit) for the Targets table; lower is better for each."""
    return [
        (
            f"ingest overhead ≤ {(TARGET_RATIO - 1) * 100:.0f}% above the embedding calls",
            f"{ingest['overhead_vs_embedding_alone'] * 100:.1f}%",
            ingest["overhead_vs_embedding_alone"],
            TARGET_RATIO - 1,
        ),
        (
            f"ingesting process peak RSS ≤ {TARGET_RSS_MB} MB",
            f"{ingest['peak_rss_mb']} MB",
            ingest["peak_rss_mb"],
            TARGET_RSS_MB,
        ),
    ]


def splice_targets(markdown: str, rows: list[str]) -> str:
    """results.md with the ingest rows of its Targets table replaced (the rest of the file as it is)."""
    lines = markdown.split("\n")
    kept = [line for line in lines if not line.startswith(("| ingest overhead", "| ingesting process peak RSS"))]
    at = next((i for i, line in enumerate(kept) if line.startswith("| unchanged corpus re-ingests")), None)
    if at is None:
        return "\n".join(kept)
    return "\n".join([*kept[:at], *rows, *kept[at:]])
