"""Retrieval metrics over ranked chunks: recall@k, reciprocal rank, nDCG@k (binary relevance), and
their means. A chunk is relevant to an expected section when it is of that document and its section path
ends with that heading (or the heading is one of the path's segments, for a chunk of a subsection)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from evals.golden import Expected

SEPARATOR = " › "


@dataclass(frozen=True)
class Ranked:
    doc_code: str
    section_path: str


def matches(chunk: Ranked, expected: Expected) -> bool:
    if chunk.doc_code != expected.doc_code:
        return False
    segments = [s.strip() for s in chunk.section_path.split(SEPARATOR)]
    return expected.section.strip() in segments


def first_match(ranked: Sequence[Ranked], expected: Expected) -> int | None:
    """1-based rank of the first chunk matching `expected`."""
    return next((i for i, chunk in enumerate(ranked, start=1) if matches(chunk, expected)), None)


def recall_at(ranked: Sequence[Ranked], expected: Sequence[Expected], k: int) -> float:
    found = [first_match(ranked[:k], e) is not None for e in expected]
    return sum(found) / len(expected)


def reciprocal_rank(ranked: Sequence[Ranked], expected: Sequence[Expected]) -> float:
    ranks = [r for e in expected if (r := first_match(ranked, e)) is not None]
    return 1.0 / min(ranks) if ranks else 0.0


def ndcg_at(ranked: Sequence[Ranked], expected: Sequence[Expected], k: int) -> float:
    """Each expected section counts once, at its first matching rank."""
    gains = {first_match(ranked[:k], e) for e in expected} - {None}
    dcg = sum(1 / math.log2(rank + 1) for rank in gains if rank is not None)
    ideal = sum(1 / math.log2(rank + 1) for rank in range(1, min(len(expected), k) + 1))
    return dcg / ideal if ideal else 0.0


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
