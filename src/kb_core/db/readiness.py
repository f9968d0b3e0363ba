"""Is a database ready to serve: reachable, migrated to the latest level, built for the configured embedder?

Used at start-up (`kb serve`, `kb search`) and by the HTTP server's /readyz. Each problem is one sentence
that names the command that fixes it.
"""

from __future__ import annotations

import psycopg

from kb_core.db.embedding_space import EmbeddingSpace, stored_embedding_space
from kb_core.db.migrations import discover_migrations

MIGRATE = "run `kb db migrate`"


def schema_problem(conn: psycopg.Connection, space: EmbeddingSpace | None = None) -> str | None:
    """None when the schema is current (and built for `space`); otherwise what is wrong and the fix."""
    latest = len(discover_migrations())
    try:
        row = conn.execute("SELECT coalesce(max(version), 0) FROM kb.schema_migrations").fetchone()
        level = int(row[0]) if row else 0
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
        _end_failed_transaction(conn)
        return f"the database has no knowledge-base schema yet: {MIGRATE}"
    except psycopg.errors.InsufficientPrivilege:
        # Read access to the ledger is granted by a later migration, so not being able to read it means
        # that migration is missing.
        _end_failed_transaction(conn)
        return f"the database's schema is older than this version of kosha-kb: {MIGRATE}"
    if level < latest:
        return f"the database is at migration {level} of {latest}: {MIGRATE}"
    if level > latest:
        return f"the database is at migration {level}, newer than this kosha-kb (knows {latest}): upgrade kosha-kb"
    if space is not None:
        stored = stored_embedding_space(conn)
        if stored is not None and stored != space:
            return (
                f"the index was built for {stored}, but the configured embedder is {space}: set KB_EMBEDDER "
                f"back to {stored.model}, or build a new database for {space.model}"
            )
    return None


def _end_failed_transaction(conn: psycopg.Connection) -> None:
    if not conn.autocommit:
        conn.rollback()
