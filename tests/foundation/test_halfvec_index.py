"""sql/011 on a database that already holds chunks: the HNSW index becomes a half-precision expression index over
the unchanged vector column, nothing is re-embedded or rewritten, and the vector leg reads the new index."""

from __future__ import annotations

import psycopg
from bench.synthetic import SyntheticCorpus, load, query_vectors
from pgvector.psycopg import register_vector

from kb_core.db.embedding_space import EmbeddingSpace
from kb_core.db.migrations import discover_migrations, migrate
from kb_core.db.targets import reader_conninfo
from kb_core.roles import Role
from kb_server.search import hybrid_sql, statement_params

SPACE = EmbeddingSpace("synthetic-32", 32)
SPEC = SyntheticCorpus(chunks=200, dimensions=32)
VECTORS = "SELECT chunk_id, embedding::text FROM kb.chunks ORDER BY chunk_id"


def test_the_halfvec_migration_keeps_every_stored_vector_and_the_vector_leg_uses_its_index(empty_database, tmp_path):
    before_011 = tmp_path / "sql"
    before_011.mkdir()
    for migration in discover_migrations():
        if migration.version < 11:
            (before_011 / f"{migration.version:03d}_{migration.name}.sql").write_text(migration.sql)
    migrate(empty_database.owner, SPACE, before_011)
    load(empty_database.owner, SPEC)  # an existing database with chunks and the full-precision index
    with psycopg.connect(empty_database.owner) as conn:
        stored = conn.execute(VECTORS).fetchall()

    applied = migrate(empty_database.owner, SPACE)

    assert 11 in [m.version for m in applied]
    with psycopg.connect(empty_database.owner) as conn:
        assert conn.execute(VECTORS).fetchall() == stored and len(stored) == SPEC.chunks
        column = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'kb.chunks'::regclass AND attname = 'embedding'"
        ).fetchone()
        assert column == ("vector(32)",)
        (definition,) = conn.execute("SELECT pg_get_indexdef('kb.chunks_embedding_hnsw'::regclass)").fetchone()
        assert "halfvec(32)" in definition and "halfvec_cosine_ops" in definition and "is_effective" in definition
    statement = hybrid_sql(with_vector=True)
    params = statement_params(text="policy", vector=query_vectors(SPEC, 1)[0], departments=None, limit=8)
    with psycopg.connect(reader_conninfo(empty_database.server, Role.COMPLIANCE_OFFICER), autocommit=True) as conn:
        register_vector(conn)
        with conn.transaction():
            conn.execute(f"SET LOCAL ROLE {Role.COMPLIANCE_OFFICER.value}")
            conn.execute("SET LOCAL enable_seqscan = off")  # 200 rows: a scan would be cheaper; can it use the index?
            conn.execute("SET LOCAL enable_sort = off")
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + statement, params))
            cursor = conn.execute(statement, params)
            rows = cursor.fetchall()
            vector_rank = [c.name for c in cursor.description or []].index("vector_rank")
    for classification in ("public", "internal", "confidential", "restricted"):
        assert f"Index Scan using chunks_{classification}_embedding_idx" in plan, plan
    # Ranked by the vector leg too. (By name: row[-4], as this read, was another column once the statement
    # returned one more, and it had been injection_suspect, never None, so the check could not fail.)
    assert len(rows) == 8 and any(row[vector_rank] is not None for row in rows)
