"""Classification ceilings, enforced by PostgreSQL for each of the four reader roles."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector, register_vector_async
from psycopg import sql

from kb_core.db.targets import SERVER_LOGIN, DatabaseTargets, reader_login
from kb_core.roles import Classification, Role
from kb_server.db.reader import RoleSwitchUnsafe, reader_transaction

CLASSIFICATIONS = [c.value for c in Classification]
DIMENSIONS = 384
CHUNKS_PER_CLASSIFICATION = 30


def _unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal(DIMENSIONS).astype(np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture
def seeded(database: DatabaseTargets) -> DatabaseTargets:
    """Two documents per classification, each with chunks mentioning 'ledger' and their own level."""
    rng = np.random.default_rng(7)
    with psycopg.connect(database.ingest) as conn:
        register_vector(conn)
        for level, classification in enumerate(CLASSIFICATIONS):
            for n in range(2):
                (doc_id,) = conn.execute(
                    """INSERT INTO kb.documents (doc_code, version, version_key, title, status, effective_date,
                           owner, department, classification, source_uri, source_format, source_sha256)
                       VALUES (%s, '1.0', '{1,0}', %s, 'effective', '2026-01-01', 'Owner', 'compliance', %s,
                               %s, 'markdown', %s) RETURNING doc_id""",
                    (
                        f"CMP-SOP-{level}{n}0",
                        f"Doc {classification} {n}",
                        classification,
                        f"test://{classification}/{n}",
                        f"{level * 10 + n:064x}",
                    ),
                ).fetchone()
                for ordinal in range(CHUNKS_PER_CLASSIFICATION // 2):
                    conn.execute(
                        """INSERT INTO kb.chunks (doc_id, classification, department, is_effective, ordinal,
                               section_path, anchor, title, content, token_count, embedding_sha256, embedding)
                           VALUES (%s, %s, 'compliance', true, %s, '1. Scope', '1', 'T', %s, 10, 'x', %s)""",
                        (
                            doc_id,
                            classification,
                            ordinal,
                            f"The ledger entry {ordinal} is {classification} material.",
                            _unit(rng),
                        ),
                    )
        conn.commit()
    return database


def visible(role: Role) -> set[str]:
    return {c.value for c in Classification if role.may_read(c)}


async def _as(
    database: DatabaseTargets, role: Role, query: str, *params: object, index_only: bool = False
) -> list[tuple]:
    async with await psycopg.AsyncConnection.connect(database.reader(role), autocommit=True) as conn:
        await register_vector_async(conn)
        async with reader_transaction(conn, role) as tx:
            if index_only:  # these tables are tiny: make the planner take the index path being tested
                await tx.execute("SET LOCAL enable_seqscan = off")
                await tx.execute("SET LOCAL enable_sort = off")  # an ORDER BY must come from the index
            return await (await tx.execute(query, params or None)).fetchall()


def _plan(rows: list[tuple]) -> str:
    return "\n".join(r[0] for r in rows)


@pytest.mark.anyio
@pytest.mark.parametrize("role", list(Role))
async def test_each_role_sees_exactly_the_rows_at_or_below_its_ceiling_with_plain_select(seeded, role):
    chunks = await _as(seeded, role, "SELECT classification::text FROM kb.chunks")
    documents = await _as(seeded, role, "SELECT classification::text FROM kb.documents")
    searchable = await _as(seeded, role, "SELECT classification::text FROM kb.searchable_chunks")
    for rows, per_classification in (
        (chunks, CHUNKS_PER_CLASSIFICATION),
        (documents, 2),
        (searchable, CHUNKS_PER_CLASSIFICATION),
    ):
        assert {r[0] for r in rows} == visible(role)
        assert len(rows) == per_classification * len(visible(role))


@pytest.mark.anyio
@pytest.mark.parametrize("role", list(Role))
async def test_the_hnsw_path_returns_only_rows_within_the_ceiling(seeded, role):
    query = _unit(np.random.default_rng(1))
    # The search indexes cover effective chunks only (sql/003), as search asks for them, and index the vectors'
    # half-precision key (sql/011), which search orders by.
    statement = (
        "SELECT classification::text FROM kb.searchable_chunks WHERE is_effective "
        "ORDER BY embedding_key <=> %s::halfvec LIMIT 200"
    )
    rows = await _as(seeded, role, statement, query, index_only=True)
    assert {r[0] for r in rows} == visible(role)
    assert len(rows) == CHUNKS_PER_CLASSIFICATION * len(visible(role))
    plan = _plan(await _as(seeded, role, "EXPLAIN " + statement, query, index_only=True))
    for classification in CLASSIFICATIONS:
        uses_index = f"chunks_{classification}_embedding_idx" in plan
        assert uses_index == (classification in visible(role)), plan


@pytest.mark.anyio
@pytest.mark.parametrize("role", list(Role))
async def test_the_full_text_path_returns_only_rows_within_the_ceiling(seeded, role):
    statement = """SELECT classification::text FROM kb.searchable_chunks
                   WHERE is_effective AND tsv @@ websearch_to_tsquery('english', 'ledger')"""
    rows = await _as(seeded, role, statement, index_only=True)
    assert {r[0] for r in rows} == visible(role)
    assert len(rows) == CHUNKS_PER_CLASSIFICATION * len(visible(role))
    plan = _plan(await _as(seeded, role, "EXPLAIN " + statement, index_only=True))
    for classification in CLASSIFICATIONS:
        uses_index = f"chunks_{classification}_tsv_idx" in plan
        assert uses_index == (classification in visible(role)), plan


@pytest.mark.anyio
@pytest.mark.parametrize("role", list(Role))
async def test_a_query_naming_a_partition_above_the_ceiling_gets_nothing(seeded, role):
    for classification in CLASSIFICATIONS:
        rows = await _as(seeded, role, f"SELECT count(*) FROM kb.chunks_{classification}")
        expected = CHUNKS_PER_CLASSIFICATION if classification in visible(role) else 0
        assert rows[0][0] == expected
    rows = await _as(seeded, role, "SELECT count(*) FROM kb.chunks WHERE classification = 'restricted'")
    assert rows[0][0] == (CHUNKS_PER_CLASSIFICATION if role is Role.COMPLIANCE_OFFICER else 0)


@pytest.mark.parametrize("login", [SERVER_LOGIN, *(reader_login(r) for r in Role)])
def test_the_server_logins_see_zero_rows_without_a_role_switch(seeded, login):
    conninfo = psycopg.conninfo.make_conninfo(seeded.server, user=login)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == login
        for relation in (
            "kb.documents",
            "kb.chunks",
            "kb.searchable_chunks",
            *(f"kb.chunks_{c}" for c in CLASSIFICATIONS),
        ):
            # kb_server has SELECT and no policy (zero rows); a reader's login has not even SELECT.
            try:
                assert conn.execute(f"SELECT count(*) FROM {relation}").fetchone()[0] == 0, relation
            except psycopg.errors.InsufficientPrivilege:
                assert login != SERVER_LOGIN


@pytest.mark.anyio
@pytest.mark.parametrize("role", list(Role))
async def test_a_readers_connection_cannot_become_any_other_reader_by_any_sql(seeded, role):
    """sql/010: the connection a request of `role` runs on belongs to a login that is a member of that role
    only, so neither SET ROLE inside the request nor RESET ROLE then SET ROLE reaches another role's rows."""
    others = [r for r in Role if r is not role]
    async with await psycopg.AsyncConnection.connect(seeded.reader(role), autocommit=True) as conn:
        for other in others:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                async with reader_transaction(conn, role) as tx:
                    await tx.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(other.value)))
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                async with reader_transaction(conn, role) as tx:
                    await tx.execute("RESET ROLE")
                    await tx.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(other.value)))
            with pytest.raises(psycopg.errors.InsufficientPrivilege):  # and outside any request
                await conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(other.value)))
        # What PostgreSQL says this login may become: its own role and nothing else.
        becomes = await (
            await conn.execute(
                "SELECT rolname FROM pg_roles WHERE pg_has_role(current_user, oid, 'SET') "
                "AND rolname <> current_user ORDER BY 1"
            )
        ).fetchall()
        assert becomes == [(role.value,)]


def test_the_servers_own_login_can_become_no_reader(seeded):
    with psycopg.connect(seeded.server, autocommit=True) as conn:
        for role in Role:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role.value)))


def test_the_server_login_cannot_write_or_read_the_ingest_log(seeded):
    with psycopg.connect(seeded.server, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM kb.chunks")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM kb.ingest_log")


def test_the_logins_are_not_superusers_owners_or_rls_bypassers(seeded):
    with psycopg.connect(seeded.owner, autocommit=True) as conn:
        for login in ("kb_server", "kb_ingest", *(reader_login(r) for r in Role)):
            superuser, bypass = conn.execute(
                "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s", (login,)
            ).fetchone()
            assert (superuser, bypass) == (False, False)
            owned = conn.execute(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'kb' AND pg_get_userbyid(c.relowner) = %s",
                (login,),
            ).fetchone()[0]
            assert owned == 0
        inherits = conn.execute(
            "SELECT bool_or(rolinherit) FROM pg_roles WHERE rolname = 'kb_server' OR rolname LIKE 'kb\\_server\\_%'"
        ).fetchone()[0]
        assert inherits is False
        unforced = conn.execute(
            """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = 'kb' AND c.relkind IN ('r', 'p')
                 AND c.relname IN ('documents', 'chunks', 'chunks_public', 'chunks_internal',
                                   'chunks_confidential', 'chunks_restricted', 'ingest_log')
                 AND NOT (c.relrowsecurity AND c.relforcerowsecurity)"""
        ).fetchall()
        assert unforced == []


@pytest.mark.anyio
async def test_the_role_switch_ends_with_the_request(seeded):
    async with await psycopg.AsyncConnection.connect(seeded.reader(Role.ANALYST), autocommit=True) as conn:
        async with reader_transaction(conn, Role.ANALYST) as tx:
            assert (await (await tx.execute("SELECT current_user")).fetchone())[0] == "analyst"
        assert (await (await conn.execute("SELECT current_user")).fetchone())[0] == "kb_server_analyst"
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # the login itself may not read chunks at all
            await conn.execute("SELECT count(*) FROM kb.chunks")


@pytest.mark.anyio
async def test_the_role_switch_refuses_a_connection_already_in_a_transaction(seeded):
    reader = seeded.reader(Role.COMPLIANCE_OFFICER)
    async with await psycopg.AsyncConnection.connect(reader) as conn:  # not autocommit
        await conn.execute("SELECT 1")  # now inside an implicit transaction
        with pytest.raises(RoleSwitchUnsafe):
            async with reader_transaction(conn, Role.COMPLIANCE_OFFICER):
                pass
        assert (await (await conn.execute("SELECT current_user")).fetchone())[0] == "kb_server_compliance_officer"


@pytest.mark.anyio
async def test_an_error_inside_the_request_still_ends_the_role_switch(seeded):
    async with await psycopg.AsyncConnection.connect(seeded.reader(Role.COMPLIANCE_OFFICER), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UndefinedTable):
            async with reader_transaction(conn, Role.COMPLIANCE_OFFICER) as tx:
                await tx.execute("SELECT * FROM kb.no_such_table")
        assert (await (await conn.execute("SELECT current_user")).fetchone())[0] == "kb_server_compliance_officer"


def test_the_partition_policies_match_the_ceiling_table(seeded):
    """The ceilings live in kb.role_ceilings (per-row policies) and in the partitions' role lists."""
    with psycopg.connect(seeded.owner, autocommit=True) as conn:
        ceilings = dict(conn.execute("SELECT role_name::text, ceiling::text FROM kb.role_ceilings").fetchall())
        policies = conn.execute(
            "SELECT tablename, roles::text[] FROM pg_policies WHERE schemaname = 'kb' AND tablename LIKE 'chunks\\_%'"
        ).fetchall()
    assert ceilings == {r.value: r.ceiling.value for r in Role}
    readers = {table.removeprefix("chunks_"): set(roles) for table, roles in policies}
    for classification in CLASSIFICATIONS:
        expected = {r.value for r in Role if r.may_read(Classification(classification))}
        assert readers[classification] == expected
