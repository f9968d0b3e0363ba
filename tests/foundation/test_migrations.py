"""Numbered migrations: from zero to the latest level, idempotent, append-only, one embedding space."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import psycopg
import pytest

from kb_core.db.embedding_space import EmbeddingSpace, EmbeddingSpaceMismatch
from kb_core.db.migrations import (
    MigrationError,
    discover_migrations,
    migrate,
    migration_level,
    migrations_dir,
)

SCHEMA_FINGERPRINT = """
SELECT 'column', table_name || '.' || column_name || ':' || data_type || ':' || is_nullable
  FROM information_schema.columns WHERE table_schema = 'kb'
UNION ALL SELECT 'index', indexname || ':' || indexdef FROM pg_indexes WHERE schemaname = 'kb'
UNION ALL SELECT 'policy', tablename || '.' || policyname || ':' || roles::text || ':' || coalesce(qual, '')
  FROM pg_policies WHERE schemaname = 'kb'
UNION ALL SELECT 'constraint', conrelid::regclass::text || '.' || conname || ':' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = 'kb'::regnamespace
UNION ALL SELECT 'grant', table_name || ':' || grantee || ':' || privilege_type
  FROM information_schema.role_table_grants WHERE table_schema = 'kb'
ORDER BY 1, 2
"""


def fingerprint(conninfo: str) -> list[tuple[str, str]]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        return conn.execute(SCHEMA_FINGERPRINT).fetchall()


def test_a_fresh_database_reaches_the_latest_level_from_zero(empty_database, local_space):
    applied = migrate(empty_database.owner, local_space)
    assert [m.version for m in applied] == [m.version for m in discover_migrations()]
    with psycopg.connect(empty_database.owner) as conn:
        assert migration_level(conn) == len(discover_migrations())
        assert conn.execute("SELECT model, dimensions FROM kb.embedding_space").fetchone() == (
            local_space.model,
            local_space.dimensions,
        )


def test_migrating_twice_leaves_the_schema_unchanged(empty_database, local_space):
    migrate(empty_database.owner, local_space)
    before = fingerprint(empty_database.owner)
    assert migrate(empty_database.owner, local_space) == []
    assert fingerprint(empty_database.owner) == before
    assert len(before) > 50  # the fingerprint really covers the schema


def test_two_processes_migrating_at_once_apply_each_file_once(empty_database, local_space):
    results: list[object] = []

    def run() -> None:
        try:
            results.append(migrate(empty_database.owner, local_space))
        except Exception as exc:  # the test reports it below
            results.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(r, list) for r in results), results
    assert sorted(len(r) for r in results) == [0, len(discover_migrations())]  # type: ignore[arg-type]


def test_a_migration_changed_after_it_was_applied_is_refused(empty_database, local_space, tmp_path: Path):
    copy = tmp_path / "sql"
    shutil.copytree(migrations_dir(), copy)
    migrate(empty_database.owner, local_space, copy)
    first = sorted(copy.glob("001_*.sql"))[0]
    first.write_text(first.read_text() + "\n-- an edit after the fact\n")
    with pytest.raises(MigrationError, match="changed after it was applied"):
        migrate(empty_database.owner, local_space, copy)


def test_a_misnamed_or_gapped_migration_folder_is_refused(tmp_path: Path):
    (tmp_path / "001_a.sql").write_text("SELECT 1;")
    (tmp_path / "003_c.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match="without gaps"):
        discover_migrations(tmp_path)
    (tmp_path / "2_b.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match=r"NNN_name\.sql"):
        discover_migrations(tmp_path)


@pytest.mark.parametrize(
    "other",
    [
        EmbeddingSpace("sentence-transformers/all-MiniLM-L6-v2@onnx-int8", 1024),
        EmbeddingSpace("text-embedding-3-large", 384),
    ],
    ids=["other-dimension", "other-model"],
)
def test_a_mismatched_embedding_dimension_or_model_is_refused_naming_both(database, local_space, other):
    with pytest.raises(EmbeddingSpaceMismatch) as caught:
        migrate(database.owner, other)
    message = str(caught.value)
    assert str(local_space) in message and str(other) in message
