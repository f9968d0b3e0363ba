"""Hashed word and character n-grams of a text: the bag the injection classifier's linear part reads.

Word 1-2-grams catch phrasings ("reply only", "the conversation"), character 2-5-grams within each
whitespace-separated token catch spellings, punctuation and markup (`<|im`, `[INST`, `::`) and words in
any language. Each n-gram is hashed (CRC-32, so no vocabulary is stored) into BUCKETS slots; counts are
damped (1 + log count) and weighted by the bucket's inverse document frequency on the training passages
(TF-IDF: a rare n-gram says more than "the"), and the word and the character parts are each scaled to unit
length, so a long text does not score higher for being long. The same functions build the training matrix
(evals/injection/train.py) and score at run time, so the two cannot drift apart. Standard library and numpy.

A text's buckets are found token by token, each token's cached: words recur across chunks, and hashing every
n-gram of every chunk anew was a third of the scan's cost.
"""

from __future__ import annotations

import functools
import itertools
import re
import zlib
from collections import Counter
from collections.abc import Iterable

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


def bucket(gram: str) -> int:
    return zlib.crc32(gram.encode("utf-8")) % BUCKETS


@functools.lru_cache(maxsize=1 << 16)
def _word_bucket(word: str) -> int:
    return bucket(f"w {word}")


@functools.lru_cache(maxsize=1 << 16)
def _token_char_buckets(token: str) -> tuple[int, ...]:
    padded = f" {token} "
    return tuple(bucket(f"c {padded[i : i + size]}") for size in CHAR_SIZES for i in range(len(padded) - size + 1))


def word_buckets(normalised: str) -> list[int]:
    """The buckets of word_ngrams(normalised), in the same order."""
    words = _WORD.findall(normalised.lower())
    return [_word_bucket(word) for word in words] + [bucket(f"w {a} {b}") for a, b in itertools.pairwise(words)]


def char_buckets(normalised: str) -> Iterable[int]:
    """The buckets of char_ngrams(normalised), in the same order."""
    return itertools.chain.from_iterable(map(_token_char_buckets, normalised.lower().split()))


def damped_bucket_counts(buckets: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
    """(bucket indices in order of first occurrence, 1 + log count)."""
    counts = Counter(buckets)
    index = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
    return index, 1.0 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))


def _unit(values: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(values)
    return values / norm if norm else values


def hashed(normalised: str, idf: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(bucket indices, values) of the text's TF-IDF n-gram vector: the word part and the character part
    each of unit length (`idf` None weighs every bucket alike). An index can occur twice (a word and a
    character n-gram in one bucket); the values then add up."""
    parts = [damped_bucket_counts(word_buckets(normalised)), damped_bucket_counts(char_buckets(normalised))]
    if idf is not None:
        parts = [(index, values * idf[index]) for index, values in parts]
    return np.concatenate([p[0] for p in parts]), np.concatenate([_unit(p[1]) for p in parts])
