"""Run by bench/ingest.py in its own process, so its peak memory is the ingest's alone: in each round, the
embedding calls alone and a cold ingest of the folder into a fresh database (alternating which goes first,
so that a change in the machine's load hits both alike), then once an unchanged re-ingest; print JSON."""

from __future__ import annotations

import json
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ingest.chunker import chunk_document
from ingest.parsers import parse_document
from ingest.pipeline import Ingestor, document_files, ingest_files
from kb_core.embedders.local import LocalEmbedder
from kb_core.process_memory import limit_malloc_arenas
from kb_core.settings import AwsSettings


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

    def embed_alone() -> float:
        started = time.perf_counter()
        for batch in batches:
            embedder.embed(batch)
        return time.perf_counter() - started

    rounds = []
    for number, conninfo in enumerate(conninfos):
        with Ingestor.from_settings(conninfo, embedder, limits) as ingestor:
            alone = embed_alone() if number % 2 == 0 else None
            started = time.perf_counter()
            results = list(ingest_files(ingestor, files))
            cold_s = time.perf_counter() - started
            alone = embed_alone() if alone is None else alone
            if number == 0:
                first = results
                started = time.perf_counter()
                again = list(ingest_files(ingestor, files))
                unchanged_s = time.perf_counter() - started
        rounds.append({"embed_alone_s": round(alone, 2), "cold_s": round(cold_s, 2), "ratio": round(cold_s / alone, 3)})
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
