"""Both legs of the hybrid query stay on their indexes under every role, on a PostgreSQL where the
knowledge base's owner is not a superuser (as on RDS or Aurora), and the ceiling still holds.

A per-row policy such as USING (classification <= ceiling) would turn the full-text leg into a sequential
scan, because PostgreSQL evaluates the policy before the non-LEAKPROOF `@@`; the classification partitions
with role-listed policies avoid that (sql/002). The last test shows the per-row form failing, for contrast.
"""

from __future__ import annotations

import shutil

import psycopg
import pytest
from bench.synthetic import MARKERS, SyntheticCorpus, load, query_vectors
from pgvector.psycopg import register_vector
from tests.conftest import server_dir, targets_for

from kb_core.db.embedded import EmbeddedPostgres
from kb_core.db.embedding_space import EmbeddingSpace
from kb_core.db.migrations import migrate
from kb_core.db.targets import reader_conninfo
from kb_core.roles import Role
from kb_server.search import hybrid_sql, statement_params

SPEC = SyntheticCorpus(chunks=32_000, dimensions=32)


@pytest.fixture(scope="module")
def managed_like():
    """A separate cluster whose knowledge-base owner has CREATEROLE and CREATEDB but is no superuser; the
    vector extension is created by the platform's administrator, as RDS's rds_superuser does."""
    folder = server_dir("managed")
    server = EmbeddedPostgres(folder)
    superuser = server.start()
    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute("CREATE ROLE kb_admin LOGIN CREATEROLE CREATEDB")
        conn.execute("CREATE DATABASE kb OWNER kb_admin")
    with psycopg.connect(psycopg.conninfo.make_conninfo(superuser, dbname="kb"), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
    targets = targets_for(superuser, "kb")
    admin = psycopg.conninfo.make_conninfo(targets.owner, user="kb_admin")
    migrate(admin, EmbeddingSpace("synthetic-32", 32))
    load(targets.owner, SPEC)  # COPY, as the platform administrator: a bulk load, not the product's path
    yield targets, admin
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)


def plan(conninfo: str, role: Role, statement: str, params: dict) -> str:  # type: ignore[type-arg]
    return "\n".join(r[0] for r in run(conninfo, role, "EXPLAIN " + statement, params))


def params(text: str, **kwargs) -> dict:  # type: ignore[type-arg]
    return statement_params(text=text, vector=query_vectors(SPEC, 1)[0], departments=None, limit=8, **kwargs)


def test_the_migrations_run_as_an_owner_who_is_not_a_superuser(managed_like):
    _targets, admin = managed_like
    with psycopg.connect(admin) as conn:
        superuser = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]
        owner = conn.execute("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'kb.chunks'::regclass")
        assert (superuser, owner.fetchone()[0]) == (False, "kb_admin")


@pytest.mark.parametrize("role", list(Role))
def test_each_role_reads_both_legs_through_their_indexes_and_only_its_partitions(managed_like, role):
    """What runs (the plan also holds the exact search of a small collection, which never runs here: exact_rows 0
    makes every role's collection count as large)."""
    targets, _ = managed_like
    explained = executed(
        targets.server, hybrid_sql(with_vector=True), params(MARKERS["rare"][0], exact_rows=0), role=role
    )
    for classification in ("public", "internal", "confidential", "restricted"):
        allowed = role.ceiling.level >= ("public", "internal", "confidential", "restricted").index(classification)
        assert (f"Index Scan using chunks_{classification}_embedding_idx" in explained) == allowed, explained
        assert (f"Bitmap Index Scan on chunks_{classification}_tsv_idx" in explained) == allowed, explained
        assert (f"Seq Scan on chunks_{classification}" in explained) is False, explained


def test_a_per_row_ceiling_policy_would_have_lost_the_full_text_index(managed_like):
    targets, _ = managed_like
    naive = (
        "SELECT chunk_id FROM kb.chunks WHERE tsv @@ websearch_to_tsquery('english', %(text)s) "
        "ORDER BY ts_rank_cd(tsv, websearch_to_tsquery('english', %(text)s)) DESC LIMIT 50"
    )
    explained = plan(targets.server, Role.SUPPORT_AGENT, naive, {"text": MARKERS["rare"][0]})
    assert "tsv_idx" not in explained  # the GIN index cannot be used under the per-row policy
    assert "classification <= (InitPlan" in explained  # the policy's ceiling, compared row by row


@pytest.mark.parametrize("table", ["kb.documents", "kb.chunks", "kb.lexeme_stats", "kb.text_stats"])
def test_the_ceiling_is_looked_up_once_per_statement_not_once_per_row(managed_like, table):
    """sql/009: kb.role_ceiling() reads a table, so PostgreSQL cannot inline it; called from the policy as
    is, it ran once for every row checked (17 ms of a 30 ms as_of statement at 100k chunks)."""
    targets, _ = managed_like
    explained = plan(targets.server, Role.SUPPORT_AGENT, f"SELECT * FROM {table} WHERE classification IS NOT NULL", {})
    assert "kb.role_ceiling()" not in explained, explained
    assert "classification <= (InitPlan 1).col1" in explained, explained


def run(conninfo: str, role: Role, statement: str, params: dict) -> list:  # type: ignore[type-arg]
    with psycopg.connect(reader_conninfo(conninfo, role), autocommit=True) as conn:
        register_vector(conn)
        with conn.transaction():
            conn.execute(f"SET LOCAL ROLE {role.value}")
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            return conn.execute(statement, params).fetchall()


def filtered_params(term: str, departments: list[str], **kwargs) -> dict:  # type: ignore[type-arg]
    return statement_params(text=term, vector=query_vectors(SPEC, 1)[0], departments=departments, limit=8, **kwargs)


def executed(conninfo: str, statement: str, params: dict, role: Role = Role.DEMO_READONLY) -> str:  # type: ignore[type-arg]
    """A role's plan (the lowest's by default) as run, without the nodes that never ran (each one's details and
    children are indented under it)."""
    explained = run(conninfo, role, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + statement, params)
    kept, skipping_below = [], None
    for (line,) in explained:
        indent = len(line) - len(line.lstrip())
        if skipping_below is not None and indent > skipping_below:
            continue
        skipping_below = indent if "never executed" in line else None
        if skipping_below is None:
            kept.append(line)
    return "\n".join(kept)


def test_a_filter_that_keeps_few_chunks_is_read_through_the_department_index_not_the_graph_or_a_common_words_matches(
    managed_like,
):
    """The 1% department filter keeps 80 of the lowest role's chunks; the common marker is in a quarter of them
    all, far more than the filter keeps, so both legs read the filter's chunks by the department index."""
    targets, _ = managed_like
    statement = hybrid_sql(with_vector=True)
    common = executed(targets.server, statement, filtered_params(MARKERS["common"][0], ["finance"]))
    assert "chunks_public_embedding_idx" not in common, common
    assert "chunks_public_tsv_idx" not in common, common
    assert "Bitmap Index Scan on chunks_public_department_idx" in common, common
    assert "COALESCE((tsv @@ w.word), false)" in common, common  # each filtered chunk tested for the word
    # a rare word's few matches are still found as before: through its own index condition, whichever index the
    # planner picks for it (at this size, the department's)
    rare = executed(targets.server, statement, filtered_params(MARKERS["rare"][0], ["finance"]))
    assert "COALESCE((tsv @@ w.word), false)" not in rare, rare
    unfiltered = executed(
        targets.server,
        hybrid_sql(with_vector=True, department_filter=False),
        params(MARKERS["common"][0], exact_rows=0),
    )
    assert "Index Scan using chunks_public_embedding_idx" in unfiltered, unfiltered


@pytest.mark.parametrize("role", [Role.DEMO_READONLY, Role.COMPLIANCE_OFFICER])
@pytest.mark.parametrize("departments", [["finance"], ["legal"], ["finance", "legal"]])
@pytest.mark.parametrize("term", ["rare", "medium", "common"])
def test_a_word_read_through_the_department_index_matches_what_its_own_index_matches(
    managed_like, role, departments, term
):
    """few_rows 0 turns the department paths off: every filter, word and role gets the same full-text answer."""
    targets, _ = managed_like
    statement = hybrid_sql(with_vector=False)
    words = f"{MARKERS[term][0]} {MARKERS['common'][0]}"  # the common word too: every filter has some matches
    served = run(targets.server, role, statement, filtered_params(words, departments))
    indexes_alone = run(targets.server, role, statement, filtered_params(words, departments, few_rows=0))
    assert served and served == indexes_alone


@pytest.mark.parametrize("role", [Role.DEMO_READONLY, Role.COMPLIANCE_OFFICER])
@pytest.mark.parametrize("departments", [["finance"], ["legal"], ["finance", "legal"]])
def test_a_filter_that_keeps_few_chunks_gets_the_exact_nearest_chunks(managed_like, role, departments):
    """Read by the department index, the vector leg is exact: the top_k are the filter's nearest chunks (the
    graph's iterative scan may miss some of them)."""
    targets, _ = managed_like
    served = run(targets.server, role, hybrid_sql(with_vector=True, with_text=False), filtered_params("", departments))
    exact = run(
        targets.server,
        role,
        # every chunk's distance, then sorted (OFFSET 0: not through the graph, which ORDER BY distance would use)
        "SELECT doc_code, anchor FROM (SELECT d.doc_code, c.anchor, c.embedding_key <=> %(vector)s::halfvec AS distance"
        " FROM kb.searchable_chunks c JOIN kb.documents d USING (doc_id)"
        " WHERE c.is_effective AND c.department = ANY(%(departments)s) OFFSET 0) every ORDER BY distance LIMIT 8",
        filtered_params("", departments),
    )
    assert len(exact) == 8 and [(r[0], r[6]) for r in served] == exact


@pytest.mark.parametrize("department_filter", [False, True])
def test_a_role_that_reads_few_chunks_in_all_gets_the_exact_nearest_chunks_not_the_graphs(
    managed_like, department_filter
):
    """Below exact_rows readable chunks (kb.text_stats) the vector leg reads every chunk's distance: a flood of
    near-identical chunks can trap the graph's walk (tests/server/test_near_duplicates.py)."""
    targets, _ = managed_like
    statement = hybrid_sql(with_vector=True, with_text=False, department_filter=department_filter)
    small = params("", exact_rows=10**9)
    ran = executed(targets.server, statement, small)
    assert "embedding_idx" not in ran and "Seq Scan on chunks_public" in ran, ran
    served = run(targets.server, Role.DEMO_READONLY, statement, small)
    exact = run(
        targets.server,
        Role.DEMO_READONLY,
        "SELECT doc_code, anchor FROM (SELECT d.doc_code, c.anchor, c.embedding_key <=> %(vector)s::halfvec AS distance"
        " FROM kb.searchable_chunks c JOIN kb.documents d USING (doc_id) WHERE c.is_effective OFFSET 0) every"
        " ORDER BY distance LIMIT 8",
        small,
    )
    assert len(exact) == 8 and [(r[0], r[6]) for r in served] == exact


def test_the_statement_that_allows_a_filter_still_answers_without_one(managed_like):
    """hybrid_sql's default keeps the department paths; called without departments it must walk the graph and
    the GIN index as the unfiltered statement does (it once counted the missing filter's chunks as zero, "few",
    and answered nothing)."""
    targets, _ = managed_like
    words = f"{MARKERS['rare'][0]} {MARKERS['common'][0]}"
    with_paths = run(targets.server, Role.DEMO_READONLY, hybrid_sql(with_vector=True), params(words))
    without = run(
        targets.server, Role.DEMO_READONLY, hybrid_sql(with_vector=True, department_filter=False), params(words)
    )
    assert len(with_paths) == 8 and with_paths == without


def test_a_words_other_spellings_are_looked_up_through_the_statistics_index_not_a_scan(managed_like):
    """sql/013: under the row policy a condition may use an index only if it is leakproof; `replace()` on the
    lexeme is not, so the statistics keep the spelling without hyphens as a column and the lookup compares it."""
    targets, _ = managed_like
    explained = executed(targets.server, hybrid_sql(with_vector=True), params(MARKERS["rare"][0] + " e-mail"))
    assert "Scan on lexeme_stats_unhyphenated" in explained or "Scan using lexeme_stats_unhyphenated" in explained
    assert "Seq Scan on lexeme_stats" not in explained, explained
