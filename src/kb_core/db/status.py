"""What `kb db status` reports: which database, its versions, migration level, embedding space, contents."""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg

from kb_core.db.embedding_space import EmbeddingSpace, stored_embedding_space
from kb_core.db.migrations import discover_migrations, migration_level
from kb_core.db.targets import DatabaseTargets, redact


@dataclass(frozen=True)
class DatabaseStatus:
    description: str
    postgres_version: str
    pgvector_version: str | None
    migration_level: int
    latest_migration: int
    embedding_space: EmbeddingSpace | None
    documents_by_status: dict[str, int] = field(default_factory=dict)
    chunks_by_classification: dict[str, int] = field(default_factory=dict)
    # How many chunks each injection-scanner version scanned (the caller knows which version is current).
    chunks_by_scanner_version: dict[int, int] = field(default_factory=dict)
    # Why the counts above could not be read (the writer's login refused), else None.
    contents_unread: str | None = None


def database_status(targets: DatabaseTargets) -> DatabaseStatus:
    with psycopg.connect(targets.owner, autocommit=True) as conn:
        postgres_version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        pgvector_version = row[0] if row else None
        if pgvector_version is None:
            available = conn.execute(
                "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
            pgvector_version = f"{available[0]} (available, not installed)" if available else None
        level = migration_level(conn)
        space = stored_embedding_space(conn)
    documents: dict[str, int] = {}
    chunks: dict[str, int] = {}
    scanners: dict[int, int] = {}
    unread = None
    if space is not None:
        # The writer's login sees every row; the owner is bound by FORCEd row-level security.
        try:
            conn = psycopg.connect(targets.ingest, autocommit=True)
        except psycopg.OperationalError as exc:
            # Found walking the production set-up: right after `kb db migrate` the writer has no password yet,
            # and the whole command failed on a line that named neither the login nor the setting.
            text = " ".join(str(exc).split())[:300]
            unread = (
                f"cannot log in to {redact(targets.ingest)} as the writer, which reads them: {text}; give kb_ingest "
                "a password and set KB_INGEST_DB_PASSWORD or KB_INGEST_DATABASE_URL"
            )
        else:
            with conn:
                documents = dict(conn.execute("SELECT status::text, count(*) FROM kb.documents GROUP BY 1").fetchall())
                chunks = dict(
                    conn.execute("SELECT classification::text, count(*) FROM kb.chunks GROUP BY 1").fetchall()
                )
                if _has_column(conn, "chunks", "scanner_version"):  # added by the scanner-version migration
                    scanners = dict(
                        conn.execute("SELECT scanner_version, count(*) FROM kb.chunks GROUP BY 1").fetchall()
                    )
    return DatabaseStatus(
        description=targets.description,
        postgres_version=postgres_version,
        pgvector_version=pgvector_version,
        migration_level=level,
        latest_migration=len(discover_migrations()),
        embedding_space=space,
        documents_by_status=documents,
        chunks_by_classification=chunks,
        chunks_by_scanner_version=scanners,
        contents_unread=unread,
    )


def _has_column(conn: psycopg.Connection, table: str, column: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM information_schema.columns "
            "WHERE table_schema = 'kb' AND table_name = %s AND column_name = %s",
            (table, column),
        ).fetchone()
        is not None
    )
