"""Hashed word and character n-grams of a text: the bag the injection classifier's linear part reads.

Word 1-2-grams catch phrasings ("reply only", "the conversation"), character 2-5-grams within each
whitespace-separated token catch spellings, punctuation and markup (`<|im`, `[INST`, `::`) and words in
any language. Each n-gram is hashed (CRC-32, so no vocabulary is stored) into BUCKETS slots; counts are
damped (1 + log count) and weighted by the bucket's inverse document frequency on the training passages
(TF-IDF: a rare n-gram says more than "the"), and the word and the character parts are each scaled to unit
length, so a long text does not score higher for being long. The same functions build the training matrix
(evals/injection/train.py) and score at run time, so the two cannot drift apart. Standard library and numpy.
"""

from __future__ import annotations

import itertools
import re
import zlib

import numpy as np

BUCKETS = 1 << 18
CHAR_SIZES = (2, 3, 4, 5)
_WORD = re.compile(r"\w+")


def word_ngrams(normalised: str) -> list[str]:
    """Word unigrams and bigrams (prefix 'w ') of lower-cased text."""
    words = _WORD.findall(normalised.lower())
    return [f"w {word}" for word in words] + [f"w {a} {b}" for a, b in itertools.pairwise(words)]


def char_ngrams(normalised: str) -> list[str]:
    """Character 2-5-grams (prefix 'c ') of each lower-cased token padded with spaces."""
    grams = []
    for token in normalised.lower().split():
        padded = f" {token} "
        for size in CHAR_SIZES:
            grams += [f"c {padded[i : i + size]}" for i in range(len(padded) - size + 1)]
    return grams


def ngrams(normalised: str) -> list[str]:
    return word_ngrams(normalised) + char_ngrams(normalised)


def damped_counts(grams: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(bucket indices, 1 + log count) of these n-grams."""
    counts: dict[int, int] = {}
    for gram in grams:
        bucket = zlib.crc32(gram.encode("utf-8")) % BUCKETS
        counts[bucket] = counts.get(bucket, 0) + 1
    index = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
    return index, 1.0 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))


def _unit(values: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(values)
    return values / norm if norm else values


def hashed(normalised: str, idf: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(bucket indices, values) of the text's TF-IDF n-gram vector: the word part and the character part
    each of unit length (`idf` None weighs every bucket alike). An index can occur twice (a word and a
    character n-gram in one bucket); the values then add up."""
    parts = [damped_counts(word_ngrams(normalised)), damped_counts(char_ngrams(normalised))]
    if idf is not None:
        parts = [(index, values * idf[index]) for index, values in parts]
    return np.concatenate([p[0] for p in parts]), np.concatenate([_unit(p[1]) for p in parts])
