"""Embedders: the local default (offline MiniLM) and OpenAI text-embedding-3-large (production)."""

from __future__ import annotations

from kb_core.db.embedding_space import EmbeddingSpace
from kb_core.embedders.base import Embedder, EmbeddingError, Embeddings
from kb_core.settings import EmbeddingSettings

__all__ = ["Embedder", "EmbeddingError", "Embeddings", "embedding_space_for", "make_embedder"]


def embedding_space_for(settings: EmbeddingSettings) -> EmbeddingSpace:
    """The space the configured embedder produces, without loading the model."""
    if settings.provider == "openai":
        return EmbeddingSpace(settings.openai_model, settings.openai_dimensions)
    from kb_core.embedders.local import DIMENSIONS, MODEL_NAME

    return EmbeddingSpace(MODEL_NAME, DIMENSIONS)


def make_embedder(settings: EmbeddingSettings, bulk: bool = False) -> Embedder:
    """`bulk`: the caller embeds documents (ingest) rather than questions; the local model then runs one call
    per core at once (the OpenAI one always sends KB_EMBED_CONCURRENCY requests at once)."""
    if settings.provider == "openai":
        from kb_core.embedders.openai_embedder import OpenAIEmbedder

        return OpenAIEmbedder.from_settings(settings)
    from kb_core.embedders.local import LocalEmbedder

    return LocalEmbedder(threads=settings.local_threads, bulk=bulk)
