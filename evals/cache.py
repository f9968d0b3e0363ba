"""An embedder wrapper with an on-disk cache of vectors, keyed by model and text.

The evals and the tests build fresh databases from the same corpus again and again; this keeps a
developer's repeated runs from embedding the same texts again (a fresh machine computes them all). The
product does not need it: its database already reuses a stored vector for a text it has seen.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kb_core.db.embedding_space import EmbeddingSpace
from kb_core.embedders.base import Embedder, Embeddings


class CachingEmbedder:
    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner, self.path = inner, path
        self.cache: dict[str, np.ndarray] = {}
        if path.exists():
            with np.load(path) as stored:
                self.cache = {key: stored[key] for key in stored.files}

    @property
    def space(self) -> EmbeddingSpace:
        return self.inner.space

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.space.model}\n{text}".encode()).hexdigest()

    def embed(self, texts: Sequence[str]) -> Embeddings:
        missing = list(dict.fromkeys(t for t in texts if self._key(t) not in self.cache))
        tokens = 0
        if missing:
            fresh = self.inner.embed(missing)
            tokens = fresh.tokens
            self.cache.update({self._key(t): v for t, v in zip(missing, fresh.vectors, strict=True)})
        return Embeddings(np.vstack([self.cache[self._key(t)] for t in texts]), tokens, [1] * len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One temporary file per process: test workers and evals save the same cache side by side.
        temporary = self.path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(temporary, **self.cache)  # type: ignore[arg-type]
        temporary.replace(self.path)
