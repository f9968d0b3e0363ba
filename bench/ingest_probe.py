"""Run by bench/ingest.py in its own process, so its peak memory is the ingest's alone: in each round, the
embedding calls alone and a cold ingest of the folder into a fresh database (alternating which goes first,
so that a change in the machine's load hits both alike), then once an unchanged re-ingest; print JSON."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import psutil

from ingest.chunker import chunk_document
from ingest.parsers import parse_document
from ingest.pipeline import Ingestor, document_files, ingest_files
from kb_core.embedders.local import LocalEmbedder
from kb_core.process_memory import limit_malloc_arenas
from kb_core.settings import AwsSettings

T = TypeVar("T")


def embedding_batches(files: list[Path]) -> list[list[str]]:
    """The texts the pipeline will embed (each distinct text once, as the pipeline reuses a vector it has),
    batched as it batches them (one call per document)."""
    seen: set[str] = set()
    batches = []
    for path in files:
        document = parse_document(path.read_bytes(), path.name, max_bytes=25_000_000)
        batch = [t for c in chunk_document(document) if (t := c.embedding_text(document.header.title)) not in seen]
        seen.update(batch)
        if batch:
            batches.append(batch)
    return batches


def machine_cpu() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine so far, over every core: between two readings, wall time
    × cores = busy + idle. Idle counts a core waiting on I/O too; guest time is inside user time already."""
    t = psutil.cpu_times()
    idle = t.idle + getattr(t, "iowait", 0.0)
    busy = sum(t) - idle - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    return busy, idle


GROUPS = ("this process", "parse server", "postgres", "other")


def cpu_by_process() -> dict[str, float]:
    """CPU seconds so far, own and reaped children's, of this process (the embedding calls and the pipeline's
    threads), the parse server (and the children it forks per file), PostgreSQL's processes, and every other
    process: whose work a measurement's busy core-seconds were."""
    me = os.getpid()
    groups = dict.fromkeys(GROUPS, 0.0)
    for process in psutil.process_iter(["cmdline"]):
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        group = "this process" if process.pid == me else _group(" ".join(process.info["cmdline"] or []))
        groups[group] += times.user + times.system + times.children_user + times.children_system
    return groups


def _group(command: str) -> str:
    if "ingest.parsers.parse_server" in command:
        return "parse server"
    return "postgres" if "postgres" in command else "other"


def main(conninfos: list[str], folder: str, limit: int) -> None:
    limit_malloc_arenas()  # as `kb ingest` and the worker do
    files = document_files([Path(folder)])[0][:limit]
    limits = AwsSettings()  # the defaults `kb ingest` runs with: each file parsed in a child under its budgets
    embedder = LocalEmbedder(bulk=True)  # as `kb ingest` and the worker make it
    # Parsed in a child, as the pipeline parses: this process then holds what `kb ingest` holds.
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as child:
        batches = child.submit(embedding_batches, files).result()
    started = time.perf_counter()
    embedder.load()
    load_s = time.perf_counter() - started
    embedder.embed(["warm-up"])

    def timed(work: Callable[[], T]) -> tuple[T, dict[str, Any]]:
        """`work`'s result, and its wall seconds with the machine's busy and idle core-seconds meanwhile, and
        the busy ones by process."""
        busy, idle = machine_cpu()
        processes = cpu_by_process()
        started = time.perf_counter()
        result = work()
        wall = time.perf_counter() - started
        busy_after, idle_after = machine_cpu()
        by_process = {k: round(v - processes[k], 2) for k, v in cpu_by_process().items()}
        return result, {"wall": wall, "busy": busy_after - busy, "idle": idle_after - idle, "by_process": by_process}

    def embed_alone() -> None:
        for batch in batches:
            embedder.embed(batch)

    rounds = []
    for number, conninfo in enumerate(conninfos):
        with Ingestor.from_settings(conninfo, embedder, limits) as ingestor:
            alone = timed(embed_alone)[1] if number % 2 == 0 else None
            results, cold = timed(lambda: list(ingest_files(ingestor, files)))
            alone = timed(embed_alone)[1] if alone is None else alone
            if number == 0:
                first = results
                started = time.perf_counter()
                again = list(ingest_files(ingestor, files))
                unchanged_s = time.perf_counter() - started
        rounds.append(
            {
                "embed_alone_s": round(alone["wall"], 2),
                "cold_s": round(cold["wall"], 2),
                "ratio": round(cold["wall"] / alone["wall"], 3),
                # Where the extra wall time goes: wall × cores = busy + idle, so the difference between the two
                # runs is the pipeline's work besides embedding (busy) plus the cores it leaves waiting (idle).
                "cores": psutil.cpu_count(),
                "alone_busy_s": round(alone["busy"], 2),
                "alone_idle_s": round(alone["idle"], 2),
                "cold_busy_s": round(cold["busy"], 2),
                "cold_idle_s": round(cold["idle"], 2),
                "alone_cpu_by_process_s": alone["by_process"],
                "cold_cpu_by_process_s": cold["by_process"],
            }
        )
    parts = {k: round(sum(r.timings.get(k, 0.0) for r in first), 2) for k in ("parse", "embed", "store")}
    print(
        json.dumps(
            {
                "documents": len(first),
                "failed": sum(r.outcome == "failed" for r in first),
                "chunks": sum(r.chunks for r in first),
                "embedded": sum(r.embedded for r in first),
                "model_load_s": round(load_s, 2),
                "rounds": rounds,
                "unchanged_s": round(unchanged_s, 2),
                "unchanged_outcomes": sorted({r.outcome for r in again}),
                "time_by_stage_s": parts,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[3:], sys.argv[1], int(sys.argv[2]))
