"""Text fidelity of a parse against a reference extraction: how many of the reference's words the parse kept
(word recall), how many of its word trigrams, read in order, it kept (reading-order trigram recall), and how
many of the parse's words the reference has (word precision: text read twice, or added, lowers it; recall
cannot see a merged table cell repeated in every row it spans).

Words are lowercased runs of letters and digits, so Markdown the parser adds (pipes, '#', '**') and
punctuation do not count either way. Trigrams are taken inside each reference unit (a paragraph, a line, a
string of a spec): where a unit ends, the two extractions may legitimately put different things next."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_WORD = re.compile(r"\w+", re.UNICODE)
N = 3


def words(text: str) -> list[str]:
    """NFKC first: one extraction writes a ligature ('ﬁ') where the other writes its letters."""
    return [w.lower() for w in _WORD.findall(unicodedata.normalize("NFKC", text))]


def _recall(reference: Counter, found: Counter) -> float:
    total = sum(reference.values())
    if total == 0:
        return 1.0
    return sum(min(count, found[item]) for item, count in reference.items()) / total


def _ngrams(tokens: Sequence[str], n: int = N) -> Iterable[tuple[str, ...]]:
    return (tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


@dataclass(frozen=True)
class Fidelity:
    reference_words: int
    word_recall: float
    trigram_recall: float
    word_precision: float


def fidelity(reference_units: Iterable[str], parsed_text: str) -> Fidelity:
    """Word and reading-order trigram recall of `parsed_text` against the reference's units, in their order."""
    units = [words(unit) for unit in reference_units]
    parsed = words(parsed_text)
    reference_words = Counter(w for unit in units for w in unit)
    reference_grams = Counter(gram for unit in units for gram in _ngrams(unit))
    return Fidelity(
        reference_words=sum(reference_words.values()),
        word_recall=_recall(reference_words, Counter(parsed)),
        trigram_recall=_recall(reference_grams, Counter(_ngrams(parsed))),
        word_precision=_recall(Counter(parsed), reference_words),
    )
