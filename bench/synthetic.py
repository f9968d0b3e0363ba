"""Synthetic chunks shaped like the real ones, for plans and benchmarks at 100k and 1M rows.

- Text: ~120 words per chunk drawn from a 20,000-word pseudo-English vocabulary with Zipf frequencies
  (like real text: a few very common words, a long tail), plus three marker words that match a known
  share of rows: `zephyrine` (rare, 0.01%), `quillonade` (medium, 1%) and `ledgerwort` (common, 25%).
- Vectors: a Gaussian mixture shaped like real text embeddings (see `EmbeddingModel`): 64 topics of 16
  subtopics each, subtopic sizes with Zipf-like weights, an anisotropic (power-law) spectrum, a spread of
  subtopic tightness, a direction every vector shares, and a random rotation; then unit length.
  `bench.realism` compares its neighbourhoods with the corpus's real 384-d embeddings.
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
from functools import lru_cache

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from scipy.fft import dct

from kb_core.departments import DEPARTMENTS

MARKERS = {"rare": ("zephyrine", 0.0001), "medium": ("quillonade", 0.01), "common": ("ledgerwort", 0.25)}
CLASSIFICATIONS = ("public", "internal", "confidential", "restricted")
SMALL_DEPARTMENT, MEDIUM_DEPARTMENT = "finance", "legal"
CHUNKS_PER_DOCUMENT = 20
_CHUNK_TYPES = ["int8", "text", "text", "bool", "int4", "text", "text", "text", "text", "int4", "text"]
WORDS_PER_CHUNK = 120


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


@lru_cache(maxsize=1)
def vocabulary(size: int = 20_000, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    onsets = ["b", "c", "d", "f", "g", "l", "m", "n", "p", "r", "s", "t", "v", "br", "cr", "st", "tr", "pl"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "io"]
    ends = ["n", "r", "s", "l", "x"]
    words: set[str] = set()
    # rng.integers(n) draws what rng.choice(list) would (the same words), without making an array each time.
    pick = rng.integers
    while len(words) < size:
        syllables = pick(2, 4)
        words.add(
            "".join(onsets[pick(len(onsets))] + vowels[pick(len(vowels))] for _ in range(syllables))
            + ends[pick(len(ends))]
        )
    return sorted(words)


@dataclass(frozen=True)
class EmbeddingModel:
    """The mixture the synthetic vectors come from. Real sentence embeddings are not uniform noise around a few
    centres: their variance is concentrated in a few directions (MiniLM's top 50 principal components carry
    ~60% of it), they share a common direction (the mean of unit vectors has norm ~0.4), topics nest, and some
    topics are tighter than others (nearest-neighbour distances spread widely). Each is a knob here, fitted by
    hand to the corpus's 384-d vectors (bench/realism.py prints both side by side):

    - centre spectrum: variance of principal direction i ∝ i^-`spectrum` (topics and subtopics);
    - within-subtopic spectrum: ∝ i^-`noise_spectrum`, scaled by `noise` × a per-subtopic factor
      exp(`tightness_spread` × N(0, 1));
    - subtopic offset from its topic: `subtopic` × the centre spectrum;
    - a random rotation (random signs and an orthonormal DCT: so no coordinate is special, which matters for
      halfvec's per-coordinate rounding), plus `shared` × a fixed unit direction, then unit length.

    The same recipe at 1024 dimensions stands in for text-embedding-3-large, whose vectors cannot be had here.
    """

    topics: int = 64
    subtopics: int = 16
    spectrum: float = 1.0
    noise_spectrum: float = 1.0
    subtopic: float = 0.6
    noise: float = 1.2
    tightness_spread: float = 0.2
    shared: float = 0.65
    topic_zipf: float = 0.5


MODEL = EmbeddingModel()


@dataclass(frozen=True)
class Mixture:
    centres: np.ndarray  # (topics × subtopics, d), before rotation
    weights: np.ndarray
    noise_scale: np.ndarray  # per subtopic
    noise_sd: np.ndarray  # per coordinate
    shared: np.ndarray
    signs: np.ndarray  # the rotation: random signs, then an orthonormal DCT (O(d log d), unlike a dense matrix)

    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        picks = rng.choice(len(self.centres), count, p=self.weights)
        noise = rng.standard_normal((count, self.centres.shape[1]), dtype=np.float32)
        raw = self.centres[picks] + noise * self.noise_sd * self.noise_scale[picks, None]
        vectors = dct(raw * self.signs, type=2, norm="ortho", axis=1) + self.shared
        return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def _power_law(dimensions: int, exponent: float) -> np.ndarray:
    """Per-coordinate standard deviations with variance ∝ i^-exponent and unit total variance."""
    sd = np.arange(1, dimensions + 1, dtype=np.float64) ** (-exponent / 2)
    return (sd / np.sqrt((sd**2).sum())).astype(np.float32)


@lru_cache(maxsize=4)
def mixture(dimensions: int, seed: int, model: EmbeddingModel = MODEL) -> Mixture:
    rng = np.random.default_rng(seed)
    centre_sd = _power_law(dimensions, model.spectrum)
    topics = rng.standard_normal((model.topics, dimensions)) * centre_sd
    offsets = rng.standard_normal((model.topics, model.subtopics, dimensions)) * centre_sd * model.subtopic
    centres = (topics[:, None, :] + offsets).reshape(-1, dimensions).astype(np.float32)
    weights = 1.0 / np.arange(1, len(centres) + 1) ** model.topic_zipf
    shared = rng.standard_normal(dimensions)
    return Mixture(
        centres=centres,
        weights=weights / weights.sum(),
        noise_scale=(model.noise * np.exp(model.tightness_spread * rng.standard_normal(len(centres)))).astype(
            np.float32
        ),
        noise_sd=_power_law(dimensions, model.noise_spectrum),
        shared=(model.shared * shared / np.linalg.norm(shared)).astype(np.float32),
        signs=rng.choice(np.array([-1.0, 1.0], dtype=np.float32), dimensions),
    )


def query_vectors(spec: SyntheticCorpus, count: int, seed: int = 99) -> np.ndarray:
    """Questions from the same mixture as the chunks (none of them a stored chunk)."""
    return mixture(spec.dimensions, spec.seed).sample(count, np.random.default_rng(seed))


def _rows(spec: SyntheticCorpus, doc_ids: list[tuple[int, str, str]]) -> Iterator[tuple]:
    rng = np.random.default_rng(spec.seed)
    words = np.array(vocabulary())
    zipf = 1.0 / np.arange(1, len(words) + 1)
    zipf /= zipf.sum()
    source = mixture(spec.dimensions, spec.seed)
    batch = 10_000
    for start in range(0, spec.chunks, batch):
        count = min(batch, spec.chunks - start)
        vectors = source.sample(count, rng)
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


def load(superuser_conninfo: str, spec: SyntheticCorpus, *, vector_index: bool = True) -> dict[str, float]:
    """Fill an empty, migrated database; return timings (seconds) of the load and the index builds (without
    the HNSW index if not `vector_index`: bench/storage.py builds its own)."""
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
            " title, content, token_count, embedding_sha256, embedding) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            # Binary: a 1024-d vector as text is ~10 KB of decimal digits to format and parse per row.
            # The classification enum's binary form is its label, as text's is.
            copy.set_types([*_CHUNK_TYPES, "vector"])
            for row in _rows(spec, doc_ids):
                copy.write_row(row)
        timings["load_s"] = time.perf_counter() - started
        for name, key in (("chunks_embedding_hnsw", "hnsw_build_s"), ("chunks_tsv_gin", "gin_build_s")):
            if name == "chunks_embedding_hnsw" and not vector_index:
                continue
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
