"""The OpenAI embedder's throughput by requests in flight, and its rate limit holding: `python -m bench --parts
openai`. The OpenAI API cannot be reached from here, so the requests go through the real `openai` client to
tests/support/openai_wire.py's server, which answers each after `latency_s` (300 ms: a 64-input batch of
text-embedding-3-large) with vectors made from the text.

- Ingest: corpus/ cold-ingested by `ingest_files` (the product's path: several files embed at once, each
  file's batches too) into a fresh database, at 1, 4 and 8 requests in flight; chunks embedded per second.
- The limit: the corpus's chunk texts embedded in batches of 16 at 8 in flight, the server refusing (429) more
  than `limited_rpm` requests in any 60 seconds and the embedder's KB_EMBED_RPM set to the same: the requests
  per minute achieved and the 429s answered (none is the point).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import openai
import psycopg
from evals.run import fresh_database

from bench.ingest_probe import embedding_batches
from ingest.pipeline import Ingestor, document_files, ingest_files
from kb_core.embedders.openai_embedder import OpenAIEmbedder
from kb_core.embedders.rate_limit import ProviderRateLimit
from kb_core.settings import EmbeddingSettings

REPO = Path(__file__).resolve().parents[1]
DIMENSIONS = 1024


def _embedder(url: str, in_flight: int, *, batch_size: int = 64, rpm: int | None = None) -> OpenAIEmbedder:
    defaults = EmbeddingSettings.model_fields
    client = openai.OpenAI(api_key="sk-bench", base_url=url, max_retries=0, timeout=30)
    limit = ProviderRateLimit(rpm or defaults["requests_per_minute"].default, defaults["tokens_per_minute"].default)
    return OpenAIEmbedder(
        client, dimensions=DIMENSIONS, batch_size=batch_size, requests_in_flight=in_flight, rate_limit=limit
    )


def ingest_by_in_flight(
    superuser: str, files: list[Path], latency_s: float, levels: tuple[int, ...]
) -> list[dict[str, Any]]:
    from tests.support.openai_wire import embeddings_server  # the wire server is test support, not product

    rows = []
    for in_flight in levels:
        with embeddings_server(latency_s=latency_s) as server:
            embedder = _embedder(server.url, in_flight)
            targets = fresh_database(superuser, "bench_openai", embedder.space)
            with Ingestor(targets.ingest, embedder, max_bytes=25_000_000) as ingestor:
                started = time.perf_counter()
                results = list(ingest_files(ingestor, files))
                seconds = time.perf_counter() - started
            chunks = sum(r.embedded for r in results)
            rows.append(
                {
                    "in_flight": in_flight,
                    "seconds": round(seconds, 2),
                    "chunks_embedded": chunks,
                    "chunks_per_s": round(chunks / seconds, 1),
                    "requests": len(server.requests),
                    "peak_in_flight": server.peak_in_flight,
                    "failed": sum(r.outcome == "failed" for r in results),
                    "answered_429": server.rate_limited,
                    # The one thread that parses, chunks and scans each file, in turn: the bound once requests
                    # overlap.
                    "parse_stage_s": round(sum(r.timings.get("parse", 0.0) for r in results), 2),
                }
            )
            print(f"  {in_flight} in flight: {rows[-1]['chunks_per_s']} chunks/s", flush=True)
        with psycopg.connect(superuser, autocommit=True) as conn:
            conn.execute("DROP DATABASE bench_openai WITH (FORCE)")
    return rows


def rate_limit_holds(texts: list[str], latency_s: float, rpm: int) -> dict[str, Any]:
    from tests.support.openai_wire import embeddings_server

    batch_size = 16
    with embeddings_server(latency_s=latency_s, requests_per_window=rpm, window_s=60.0) as server:
        embedder = _embedder(server.url, 8, batch_size=batch_size, rpm=rpm)
        started = time.perf_counter()
        embedder.embed(texts)
        seconds = time.perf_counter() - started
        arrivals = sorted(server.arrival_times)
    busiest = max(sum(1 for t in arrivals if a <= t < a + 60) for a in arrivals) if arrivals else 0
    return {
        "rpm_limit": rpm,
        "in_flight": 8,
        "batch_size": batch_size,
        "requests": len(server.requests),
        "seconds": round(seconds, 1),
        "busiest_60_s": busiest,
        "answered_429": server.rate_limited,
        "chunks_per_s": round(len(texts) / seconds, 1),
    }


def run(superuser: str, *, quick: bool) -> dict[str, Any]:
    files = document_files([REPO / "corpus"])[0][: 6 if quick else 10_000]
    latency_s = 0.3
    levels = (1, 4, 8)
    print("OpenAI embedder: corpus ingest by requests in flight ...", flush=True)
    ingest = ingest_by_in_flight(superuser, files, latency_s, levels)
    texts = [t for batch in embedding_batches(files) for t in batch]
    rpm = 600 if quick else 60  # quick: the code runs, nothing waits
    texts = texts[: 16 * (rpm + 14)]  # enough requests to go past a minute's budget
    print(f"OpenAI embedder: {len(texts)} chunks under a {rpm}-requests-a-minute limit ...", flush=True)
    return {
        "latency_s": latency_s,
        "documents": len(files),
        "ingest": ingest,
        "rate_limit": rate_limit_holds(texts, 0.05 if quick else latency_s, rpm),
    }


def render(r: dict[str, Any]) -> list[str]:
    limited = r["rate_limit"]
    return [
        "## OpenAI embedder: requests in flight and the rate limit",
        "",
        f"The real `openai` client against a local server speaking its wire format that answers each request after "
        f"{r['latency_s'] * 1000:.0f} ms (the OpenAI API cannot be reached from here). `kb ingest`'s path "
        f"(`ingest_files`) cold-ingests corpus/ ({r['documents']} documents) into a fresh database at "
        "`KB_EMBED_CONCURRENCY` 1, 4 and 8, batches of 64 and the default limits (3,000 requests, 1,000,000 "
        "tokens a minute):",
        "",
        "| requests in flight | seconds | chunks embedded | chunks/s | requests | most in flight seen | 429s "
        "| parse, chunk and scan s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {x['in_flight']} | {x['seconds']} | {x['chunks_embedded']:,} | {x['chunks_per_s']} | {x['requests']} "
            f"| {x['peak_in_flight']} | {x['answered_429']} | {x.get('parse_stage_s', '–')} |"
            for x in r["ingest"]
        ),
        "",
        "The last column is the time of the one thread that parses, chunks and scans each file in turn: once "
        "requests overlap, it is what sets the pace, not the requests.",
        "",
        f"Under a binding limit: {limited['requests']} requests (batches of {limited['batch_size']}, "
        f"{limited['in_flight']} in flight) to a server that answers 429 past {limited['rpm_limit']} requests in any "
        f"60 seconds, with `KB_EMBED_RPM={limited['rpm_limit']}`: {limited['seconds']} s, at most "
        f"{limited['busiest_60_s']} requests in any 60 seconds, **{limited['answered_429']} answered 429** "
        f"({limited['chunks_per_s']} chunks/s: the limit, not the latency, sets the pace).",
        "",
        f"Machine load (1-minute average) before and after: {r['load'][0]:.2f} and {r['load'][1]:.2f}; "
        f"`{r['command']}` at {r['commit']}.",
        "",
    ]
