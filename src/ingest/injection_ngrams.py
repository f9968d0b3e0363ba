"""Hashed word and character n-grams of a text: the bag the injection classifier's linear part reads.

Word 1-2-grams catch phrasings ("reply only", "the conversation"), character 3-5-grams within each
whitespace-separated token catch spellings, punctuation and markup (`<|im`, `[INST`, `::`) and words in
any language. Each n-gram is hashed (CRC-32, so no vocabulary is stored) into BUCKETS slots; counts are
damped (1 + log count) and the vector scaled to unit length, so a long text does not score higher for
being long. The same function builds the training matrix (evals/injection/train.py) and scores at run
time, so the two cannot drift apart. Standard library and numpy only.
"""

from __future__ import annotations

import itertools
import re
import zlib

import numpy as np

BUCKETS = 1 << 18
CHAR_SIZES = (3, 4, 5)
_WORD = re.compile(r"\w+")


def ngrams(normalised: str) -> list[str]:
    """Word unigrams and bigrams (prefix 'w ') and character 3-5-grams of each token padded with spaces
    (prefix 'c '), of lower-cased text."""
    text = normalised.lower()
    words = _WORD.findall(text)
    grams = [f"w {word}" for word in words]
    grams += [f"w {a} {b}" for a, b in itertools.pairwise(words)]
    for token in text.split():
        padded = f" {token} "
        for size in CHAR_SIZES:
            grams += [f"c {padded[i : i + size]}" for i in range(len(padded) - size + 1)]
    return grams


def hashed(normalised: str) -> tuple[np.ndarray, np.ndarray]:
    """(bucket indices, values) of the text's unit-length, log-damped n-gram counts."""
    counts: dict[int, int] = {}
    for gram in ngrams(normalised):
        bucket = zlib.crc32(gram.encode("utf-8")) % BUCKETS
        counts[bucket] = counts.get(bucket, 0) + 1
    if not counts:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    index = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
    values = 1.0 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))
    return index, values / np.linalg.norm(values)
