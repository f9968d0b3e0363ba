"""The embedding space an index was built for: model and dimension, recorded in kb.embedding_space.

Vectors from two models (or two dimensions of one model) are not comparable, so every ingest and
every server start checks its embedder against the record and refuses a mismatch by name.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg


@dataclass(frozen=True)
class EmbeddingSpace:
    model: str
    dimensions: int

    def __str__(self) -> str:
        return f"{self.model} ({self.dimensions} dimensions)"


class EmbeddingSpaceMismatch(Exception):
    def __init__(self, stored: EmbeddingSpace, configured: EmbeddingSpace) -> None:
        self.stored = stored
        self.configured = configured
        super().__init__(
            f"the index was built for {stored}, but the configured embedder is {configured}; "
            "vectors of different models cannot be compared. Set KB_EMBEDDER (and its model settings) back "
            f"to {stored.model}, or build a new database for {configured.model} and ingest the corpus again"
        )


class SchemaNotReady(Exception):
    pass


def stored_embedding_space(conn: psycopg.Connection) -> EmbeddingSpace | None:
    exists = conn.execute("SELECT to_regclass('kb.embedding_space') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return None
    row = conn.execute("SELECT model, dimensions FROM kb.embedding_space").fetchone()
    return EmbeddingSpace(row[0], row[1]) if row else None


def check_embedding_space(conn: psycopg.Connection, configured: EmbeddingSpace) -> None:
    stored = stored_embedding_space(conn)
    if stored is None:
        raise SchemaNotReady("the database has no knowledge-base schema yet: run `kb db migrate`")
    if stored != configured:
        raise EmbeddingSpaceMismatch(stored, configured)
