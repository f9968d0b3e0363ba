"""Run by bench/corpus.py in its own process, so its peak memory is the ingest's alone: ingest a folder
cold (a fresh embedder, no cache), then again unchanged, and time the embedding calls alone; print JSON."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ingest.chunker import chunk_document
from ingest.parsers import parse_document
from ingest.pipeline import Ingestor, document_files, ingest_files
from kb_core.embedders.local import LocalEmbedder


def main(conninfo: str, folder: str, limit: int) -> None:
    files = document_files([Path(folder)])[0][:limit]
    embedder = LocalEmbedder()
    started = time.perf_counter()
    embedder.load()
    load_s = time.perf_counter() - started
    # First the embedding calls alone: the texts the pipeline will embed (each distinct text once, as the
    # pipeline reuses a vector it has), batched as it batches them (one call per document).
    seen: set[str] = set()
    batches = []
    for path in files:
        document = parse_document(path.read_bytes(), path.name, max_bytes=25_000_000)
        batch = [t for c in chunk_document(document) if (t := c.embedding_text(document.header.title)) not in seen]
        seen.update(batch)
        if batch:
            batches.append(batch)
    embedder.embed(["warm-up"])
    started = time.perf_counter()
    for batch in batches:
        embedder.embed(batch)
    embed_alone_s = time.perf_counter() - started
    with Ingestor(conninfo, embedder, max_bytes=25_000_000) as ingestor:
        started = time.perf_counter()
        results = list(ingest_files(ingestor, files))
        cold_s = time.perf_counter() - started
        started = time.perf_counter()
        again = list(ingest_files(ingestor, files))
        unchanged_s = time.perf_counter() - started
    parts = {k: round(sum(r.timings.get(k, 0.0) for r in results), 2) for k in ("parse", "embed", "store")}
    print(
        json.dumps(
            {
                "documents": len(results),
                "failed": sum(r.outcome == "failed" for r in results),
                "chunks": sum(r.chunks for r in results),
                "model_load_s": round(load_s, 2),
                "cold_s": round(cold_s, 2),
                "unchanged_s": round(unchanged_s, 2),
                "unchanged_outcomes": sorted({r.outcome for r in again}),
                "embed_alone_s": round(embed_alone_s, 2),
                "time_by_stage_s": parts,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
