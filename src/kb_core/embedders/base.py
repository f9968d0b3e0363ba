"""What every embedder is: a model that turns texts into unit vectors of one embedding space."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from kb_core.db.embedding_space import EmbeddingSpace


class EmbeddingError(Exception):
    """The embedder could not embed a batch (after its retries)."""


@dataclass
class Embeddings:
    vectors: np.ndarray  # (n, dimensions) float32, unit length
    tokens: int = 0  # tokens the model was billed or run on, for the record
    windows: list[int] = field(default_factory=list)  # per text: how many model windows it took


class Embedder(Protocol):
    @property
    def space(self) -> EmbeddingSpace: ...

    def embed(self, texts: Sequence[str]) -> Embeddings:
        """Embed documents' chunks (batched as the model needs)."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one search query."""
        ...
