"""Do the synthetic vectors behave like real embeddings? The corpus's real 384-d vectors (MiniLM, from the
evals' vector cache: the corpus chunks and the NPL abstracts) beside as many synthetic ones at 384 and 1024
dimensions: the shape of their neighbourhoods, and the recall HNSW reaches on each at the same ef_search.

The figures are the ones approximate search is sensitive to: nearest-neighbour cosine distances (how close
the answers are), relative contrast (mean distance ÷ 10th-neighbour distance: the lower, the harder),
local intrinsic dimensionality (the maximum-likelihood estimate over 20 neighbours: the higher, the harder),
and how concentrated the variance is (top principal components' share; participation ratio).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from bench.synthetic import SyntheticCorpus, mixture

REAL_VECTORS = Path.home() / ".cache" / "kosha-kb" / "eval-vectors.npz"
EF_SEARCHES = (10, 20, 40, 80)


def real_vectors(limit: int | None = None) -> np.ndarray | None:
    if not REAL_VECTORS.exists():
        return None
    with np.load(REAL_VECTORS) as stored:
        keys = sorted(stored.files)[:limit]
        vectors = np.vstack([stored[k] for k in keys]).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def neighbourhoods(vectors: np.ndarray, sample: int = 1000, seed: int = 0) -> dict[str, float]:
    picks = np.random.default_rng(seed).choice(len(vectors), min(sample, len(vectors)), replace=False)
    distances = 1.0 - vectors[picks] @ vectors.T
    distances[np.arange(len(picks)), picks] = np.inf  # a vector is not its own neighbour
    nearest = np.sort(distances, axis=1)[:, :20]
    mean = float(distances[np.isfinite(distances)].mean())
    lid = -1.0 / np.mean(np.log(nearest[:, :19] / nearest[:, 19:20]), axis=1)
    centred = vectors[: min(5000, len(vectors))] - vectors.mean(axis=0)
    variance = np.linalg.svd(centred, compute_uv=False) ** 2
    variance /= variance.sum()
    return {
        "vectors": len(vectors),
        "dimensions": vectors.shape[1],
        "mean_vector_norm": round(float(np.linalg.norm(vectors.mean(axis=0))), 3),
        "mean_distance": round(mean, 3),
        "nn1_p10": round(float(np.quantile(nearest[:, 0], 0.1)), 3),
        "nn1_p50": round(float(np.median(nearest[:, 0])), 3),
        "nn1_p90": round(float(np.quantile(nearest[:, 0], 0.9)), 3),
        "nn10_p50": round(float(np.median(nearest[:, 9])), 3),
        "relative_contrast": round(float(np.median(mean / nearest[:, 9])), 2),
        "lid": round(float(np.median(lid)), 1),
        "top10_variance": round(float(variance[:10].sum()), 3),
        "top50_variance": round(float(variance[:50].sum()), 3),
        "participation_ratio": round(float(1.0 / np.sum(variance**2)), 1),
    }


def hnsw_recall(superuser: str, vectors: np.ndarray, queries: np.ndarray) -> dict[str, Any]:
    """recall@10 of a fresh HNSW index (the migrations' m 16, ef_construction 64) against exact search."""
    dimensions = vectors.shape[1]
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    with psycopg.connect(superuser, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("DROP TABLE IF EXISTS bench_realism")
        conn.execute(f"CREATE UNLOGGED TABLE bench_realism (id integer, embedding vector({dimensions}))")
        with conn.cursor().copy("COPY bench_realism (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "vector"])
            for i, v in enumerate(vectors):
                copy.write_row((i, v))
        started = time.perf_counter()
        conn.execute(
            "CREATE INDEX ON bench_realism USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
        build_s = time.perf_counter() - started
        recall: dict[int, float] = {}
        for ef in EF_SEARCHES:
            found = []
            for q, truth in zip(queries, exact, strict=True):
                with conn.transaction():
                    conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                    ids = [
                        r[0]
                        for r in conn.execute("SELECT id FROM bench_realism ORDER BY embedding <=> %s LIMIT 10", (q,))
                    ]
                found.append(len(set(ids) & set(truth.tolist())) / 10)
            recall[ef] = round(float(np.mean(found)), 4)
        conn.execute("DROP TABLE bench_realism")
    return {"recall_at_10_by_ef_search": recall, "build_s": round(build_s, 2)}


def compare(superuser: str, *, quick: bool) -> dict[str, Any]:
    """Real vectors (all but 200 kept as queries) beside as many synthetic ones at 384 and 1024 dimensions."""
    real = real_vectors(limit=1200 if quick else None)
    if real is None:
        return {"skipped": f"no cached real vectors at {REAL_VECTORS}: run `poe eval` once to embed the corpus"}
    queries_n = 50 if quick else 200
    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS bench_realism WITH (FORCE)")
        conn.execute("CREATE DATABASE bench_realism")
    database = psycopg.conninfo.make_conninfo(superuser, dbname="bench_realism")
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
    try:
        rows = _compare(database, real, queries_n)
    finally:
        with psycopg.connect(superuser, autocommit=True) as conn:
            conn.execute("DROP DATABASE bench_realism WITH (FORCE)")
    return {"rows": rows, "queries": queries_n}


def _compare(superuser: str, real: np.ndarray, queries_n: int) -> list[dict[str, Any]]:
    order = np.random.default_rng(3).permutation(len(real))
    stored, asked = real[order[queries_n:]], real[order[:queries_n]]
    rows = [{"name": "real (MiniLM, 384-d)", **neighbourhoods(stored), **hnsw_recall(superuser, stored, asked)}]
    for dimensions in (384, 1024):
        spec = SyntheticCorpus(chunks=len(stored), dimensions=dimensions)
        source = mixture(dimensions, spec.seed)
        synthetic = source.sample(len(stored), np.random.default_rng(spec.seed))
        questions = source.sample(queries_n, np.random.default_rng(99))
        rows.append(
            {
                "name": f"synthetic, {dimensions}-d",
                **neighbourhoods(synthetic),
                **hnsw_recall(superuser, synthetic, questions),
            }
        )
    return rows


def render(r: dict[str, Any] | None) -> list[str]:
    if not r:
        return []
    lines = ["## Are the synthetic vectors like real ones?", ""]
    if "skipped" in r:
        return [*lines, f"Not measured: {r['skipped']}.", ""]
    lines += [
        f"The corpus's real MiniLM vectors (the evals' cache: corpus chunks and NPL abstracts; {r['queries']} of "
        "them held out as questions) beside as many synthetic vectors from `bench/synthetic.py`. Distances are "
        "cosine distances; relative contrast is the mean distance over the 10th neighbour's (lower is harder); "
        "LID is the local intrinsic dimensionality (maximum likelihood, 20 neighbours; higher is harder). "
        "Recall@10 is of an HNSW index (m 16, ef_construction 64) at each ef_search against exact search.",
        "",
        "| vectors | n | mean-vector norm | mean distance | 1st neighbour p10 / p50 / p90 | 10th p50 | "
        "relative contrast | LID | top-10 / top-50 PC variance | participation ratio | recall@10 by ef_search |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in r["rows"]:
        recall = ", ".join(f"{ef}: {v:.3f}" for ef, v in row["recall_at_10_by_ef_search"].items())
        lines.append(
            f"| {row['name']} | {row['vectors']:,} | {row['mean_vector_norm']} | {row['mean_distance']} | "
            f"{row['nn1_p10']} / {row['nn1_p50']} / {row['nn1_p90']} | {row['nn10_p50']} | "
            f"{row['relative_contrast']} | {row['lid']} | {row['top10_variance']} / {row['top50_variance']} | "
            f"{row['participation_ratio']} | {recall} |"
        )
    return [*lines, ""]
