"""Synthetic chunks shaped like the real ones, for plans and benchmarks at 100k and 1M rows.

- Text: ~120 words per chunk drawn from a 20,000-word pseudo-English vocabulary with Zipf frequencies
  (like real text: a few very common words, a long tail), plus three marker words that match a known
  share of rows: `zephyrine` (rare, 0.01%), `quillonade` (medium, 1%) and `ledgerwort` (common, 25%).
- Vectors: unit vectors around 256 cluster centres (real embeddings are clustered by topic, not uniform).
- Classifications: a quarter each. Departments: `finance` holds 1% of rows and `legal` 10% (the filter
  cases), the other seven share the rest. One document per 20 chunks, all effective.

Rows are written with COPY by a superuser (COPY is refused under row-level security, and a superuser
bypasses it); the HNSW and GIN indexes are dropped first and rebuilt after, which is much faster than
maintaining them row by row, and the rebuild is timed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from kb_core.departments import DEPARTMENTS

MARKERS = {"rare": ("zephyrine", 0.0001), "medium": ("quillonade", 0.01), "common": ("ledgerwort", 0.25)}
CLASSIFICATIONS = ("public", "internal", "confidential", "restricted")
SMALL_DEPARTMENT, MEDIUM_DEPARTMENT = "finance", "legal"
CHUNKS_PER_DOCUMENT = 20
WORDS_PER_CHUNK = 120
CLUSTERS = 256


@dataclass(frozen=True)
class SyntheticCorpus:
    chunks: int
    dimensions: int
    seed: int = 7

    def department_weights(self) -> dict[str, float]:
        others = [d for d in DEPARTMENTS if d not in (SMALL_DEPARTMENT, MEDIUM_DEPARTMENT)]
        weights = {SMALL_DEPARTMENT: 0.01, MEDIUM_DEPARTMENT: 0.10}
        weights.update({d: 0.89 / len(others) for d in others})
        return weights


def vocabulary(size: int = 20_000, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    onsets = ["b", "c", "d", "f", "g", "l", "m", "n", "p", "r", "s", "t", "v", "br", "cr", "st", "tr", "pl"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "io"]
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.integers(2, 4)
        words.add(
            "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(syllables))
            + rng.choice(["n", "r", "s", "l", "x"])
        )
    return sorted(words)


def cluster_centres(dimensions: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((CLUSTERS, dimensions)).astype(np.float32)


def unit_vectors(centres: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    picks = rng.integers(0, len(centres), count)
    vectors = centres[picks] + 0.8 * rng.standard_normal((count, centres.shape[1])).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def query_vectors(spec: SyntheticCorpus, count: int, seed: int = 99) -> np.ndarray:
    return unit_vectors(cluster_centres(spec.dimensions, spec.seed), count, np.random.default_rng(seed))


def _rows(spec: SyntheticCorpus, doc_ids: list[tuple[int, str, str]]) -> Iterator[tuple]:
    rng = np.random.default_rng(spec.seed)
    words = np.array(vocabulary())
    zipf = 1.0 / np.arange(1, len(words) + 1)
    zipf /= zipf.sum()
    centres = cluster_centres(spec.dimensions, spec.seed)
    batch = 10_000
    for start in range(0, spec.chunks, batch):
        count = min(batch, spec.chunks - start)
        vectors = unit_vectors(centres, count, rng)
        drawn = rng.choice(words, size=(count, WORDS_PER_CHUNK), p=zipf)
        marks = {name: rng.random(count) < share for name, (_, share) in MARKERS.items()}
        for i in range(count):
            n = start + i
            doc_id, classification, department = doc_ids[n // CHUNKS_PER_DOCUMENT]
            text = list(drawn[i])
            for name, (word, _) in MARKERS.items():
                if marks[name][i]:
                    text[rng.integers(0, len(text))] = word
            yield (
                doc_id,
                classification,
                department,
                True,
                n % CHUNKS_PER_DOCUMENT,
                "1. Section",
                "1",
                "Synthetic document",
                " ".join(text),
                WORDS_PER_CHUNK,
                f"{n:064x}",
                vectors[i],
            )


def load(superuser_conninfo: str, spec: SyntheticCorpus) -> dict[str, float]:
    """Fill an empty, migrated database; return timings (seconds) of the load and the index builds."""
    timings: dict[str, float] = {}
    rng = np.random.default_rng(spec.seed + 1)
    documents = -(-spec.chunks // CHUNKS_PER_DOCUMENT)
    weights = spec.department_weights()
    departments = rng.choice(list(weights), size=documents, p=np.array(list(weights.values())))
    classifications = rng.choice(CLASSIFICATIONS, size=documents)
    with psycopg.connect(superuser_conninfo, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SET maintenance_work_mem = '1GB'")
        # The migrations' own definitions, to rebuild exactly these after the load.
        search_indexes: dict[str, str] = dict(
            conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'kb' AND tablename = 'chunks' "
                "AND indexname IN ('chunks_embedding_hnsw', 'chunks_tsv_gin')"
            ).fetchall()
        )
        conn.execute("DROP INDEX IF EXISTS kb.chunks_embedding_hnsw, kb.chunks_tsv_gin")
        started = time.perf_counter()
        with conn.cursor().copy(
            "COPY kb.documents (doc_code, version, version_key, title, status, effective_date, owner, department,"
            " classification, regulatory_refs, source_uri, source_format, source_sha256) FROM STDIN"
        ) as copy:
            for n in range(documents):
                code = f"{DEPARTMENTS[departments[n]]}-SYN-{n:06d}"
                copy.write_row(
                    (
                        code,
                        "1.0",
                        [1, 0],
                        f"Synthetic document {n}",
                        "effective",
                        "2026-01-01",
                        "Synthetic",
                        departments[n],
                        classifications[n],
                        [],
                        f"synthetic://{n}",
                        "markdown",
                        f"{n:064x}",
                    )
                )
        ids = conn.execute(
            "SELECT doc_id, classification::text, department FROM kb.documents "
            "WHERE source_uri LIKE 'synthetic://%%' ORDER BY doc_code"
        ).fetchall()
        # doc_code sorts by department code first; restore the generation order.
        order = {f"{DEPARTMENTS[departments[n]]}-SYN-{n:06d}": n for n in range(documents)}
        codes = conn.execute(
            "SELECT doc_code FROM kb.documents WHERE source_uri LIKE 'synthetic://%%' ORDER BY doc_code"
        ).fetchall()
        by_position = sorted(zip((order[c] for (c,) in codes), ids, strict=True))
        doc_ids = [row for _, row in by_position]
        with conn.cursor().copy(
            "COPY kb.chunks (doc_id, classification, department, is_effective, ordinal, section_path, anchor,"
            " title, content, token_count, embedding_sha256, embedding) FROM STDIN"
        ) as copy:
            for row in _rows(spec, doc_ids):
                copy.write_row(row)
        timings["load_s"] = time.perf_counter() - started
        for name, key in (("chunks_embedding_hnsw", "hnsw_build_s"), ("chunks_tsv_gin", "gin_build_s")):
            started = time.perf_counter()
            conn.execute(search_indexes[name].replace(" ON ONLY ", " ON "))  # and on every partition
            timings[key] = time.perf_counter() - started
        # COPY bypassed the writer, which keeps the full-text leg's BM25 statistics (sql/008): count them once.
        started = time.perf_counter()
        conn.execute("SELECT kb.rebuild_text_stats()")
        timings["text_stats_build_s"] = time.perf_counter() - started
        conn.execute("VACUUM ANALYZE kb.documents")
        conn.execute("VACUUM ANALYZE kb.chunks")
        conn.execute("VACUUM ANALYZE kb.lexeme_stats")
    return timings
