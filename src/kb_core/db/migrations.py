"""Numbered SQL migrations (`sql/NNN_name.sql`), applied in order and recorded in kb.schema_migrations.

Each migration runs in its own transaction together with its record, under an advisory lock, so two
processes migrating at once apply each file once. A file changed after it was applied is refused.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import psycopg

from kb_core.db.embedding_space import EmbeddingSpace, check_embedding_space

_FILENAME = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")
_LOCK_ID = 0x6B6F736861  # "kosha"


class MigrationError(Exception):
    pass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def migrations_dir() -> Path:
    """The installed copy (wheel) or the repository's sql/ (editable install)."""
    packaged = resources.files("kb_core") / "migrations"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "sql"


def discover_migrations(directory: Path | None = None) -> list[Migration]:
    directory = directory or migrations_dir()
    found: dict[int, Migration] = {}
    for path in sorted(directory.glob("*.sql")):
        match = _FILENAME.match(path.name)
        if not match:
            raise MigrationError(f"{path}: migration files are named NNN_name.sql (three digits, lower case)")
        version = int(match.group(1))
        if version in found:
            raise MigrationError(f"{path}: migration {version:03d} exists twice")
        found[version] = Migration(version, match.group(2), path.read_text())
    versions = sorted(found)
    if versions != list(range(1, len(versions) + 1)):
        raise MigrationError(f"migrations must be numbered 001, 002, ... without gaps; found {versions}")
    return [found[v] for v in versions]


def _ensure_ledger(conn: psycopg.Connection) -> None:
    conn.execute("CREATE SCHEMA IF NOT EXISTS kb")
    conn.execute(
        """CREATE TABLE IF NOT EXISTS kb.schema_migrations (
               version integer PRIMARY KEY,
               name text NOT NULL,
               checksum text NOT NULL,
               applied_at timestamptz NOT NULL DEFAULT now())"""
    )


def applied_migrations(conn: psycopg.Connection) -> dict[int, tuple[str, str]]:
    exists = conn.execute("SELECT to_regclass('kb.schema_migrations') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return {}
    rows = conn.execute("SELECT version, name, checksum FROM kb.schema_migrations").fetchall()
    return {version: (name, checksum) for version, name, checksum in rows}


def migrate(owner_conninfo: str, space: EmbeddingSpace, directory: Path | None = None) -> list[Migration]:
    """Apply what is pending; return it. Refuses a changed migration or a different embedding space."""
    migrations = discover_migrations(directory)
    applied_now: list[Migration] = []
    with psycopg.connect(owner_conninfo, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_ID,))
        try:
            _ensure_ledger(conn)
            done = applied_migrations(conn)
            for migration in migrations:
                if migration.version in done:
                    _, checksum = done[migration.version]
                    if checksum != migration.checksum:
                        raise MigrationError(
                            f"sql/{migration.version:03d}_{migration.name}.sql changed after it was applied; "
                            "migrations are append-only: revert the file and add a new one"
                        )
                    continue
                with conn.transaction():
                    conn.execute("SELECT set_config('kb.embedding_model', %s, true)", (space.model,))
                    conn.execute("SELECT set_config('kb.embedding_dimensions', %s, true)", (str(space.dimensions),))
                    conn.execute(migration.sql.encode())
                    conn.execute(
                        "INSERT INTO kb.schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                        (migration.version, migration.name, migration.checksum),
                    )
                applied_now.append(migration)
            check_embedding_space(conn, space)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_ID,))
    return applied_now


def migration_level(conn: psycopg.Connection) -> int:
    done = applied_migrations(conn)
    return max(done, default=0)
