"""The full-text leg ranks by Okapi BM25 from statistics the writer keeps in the chunks' own transaction:
they always equal a recount of the effective chunks (after ingest, supersede, withdraw and reinstatement), and a
role reads only the statistics of the classifications it may read."""

from __future__ import annotations

import psycopg
import pytest
from pgvector.psycopg import register_vector_async
from tests.support.documents import markdown_document

from kb_core.db.targets import DatabaseTargets
from kb_core.roles import Role
from kb_server.db.reader import reader_transaction
from kb_server.search import _QUERY_WORDS, hybrid_search, statement_params

pytestmark = pytest.mark.anyio


def ingest(ingestor, text: str, uri: str) -> None:
    result = ingestor.ingest(text.encode(), name=uri.rsplit("/", 1)[-1], source_uri=uri)
    assert result.outcome == "ingested", result.reason


def kept(conninfo: str) -> tuple[set, set]:
    with psycopg.connect(conninfo) as conn:
        lexemes = set(conn.execute("SELECT classification::text, lexeme, chunks FROM kb.lexeme_stats").fetchall())
        totals = set(conn.execute("SELECT classification::text, chunks, terms FROM kb.text_stats").fetchall())
    return lexemes, totals


def recounted(conninfo: str) -> tuple[set, set]:
    with psycopg.connect(conninfo) as conn:
        lexemes = set(
            conn.execute(
                """SELECT c.classification::text, l.lexeme, count(*) FROM kb.chunks c, unnest(c.tsv) l
                   WHERE c.is_effective GROUP BY 1, 2"""
            ).fetchall()
        )
        totals = set(
            conn.execute(
                "SELECT classification::text, count(*), sum(terms) FROM kb.chunks WHERE is_effective GROUP BY 1"
            ).fetchall()
        )
    return lexemes, totals


def without_empty(stats: tuple[set, set]) -> tuple[set, set]:
    lexemes, totals = stats
    return lexemes, {row for row in totals if row[1] != 0}


def test_the_statistics_equal_a_recount_after_ingest_supersede_withdraw_and_reinstate(ingestor, database):
    steps = [
        (markdown_document("CMP-SOP-901"), "file:///c/a-1.md"),
        (markdown_document("FIN-SOP-902", classification="confidential", title="Treasury"), "file:///c/b.md"),
        (
            markdown_document(
                "CMP-SOP-901", version="2.0", effective_date="2026-02-01", sections={"1. Scope": "Chargebacks only."}
            ),
            "file:///c/a-2.md",
        ),
        (
            markdown_document(
                "FIN-SOP-902", version="2.0", effective_date="2026-03-01", classification="confidential", title="Moved"
            ),
            "file:///c/b.md",
        ),
    ]
    for text, uri in steps:
        ingest(ingestor, text, uri)
        assert without_empty(kept(database.ingest)) == recounted(database.ingest)
    assert any(row[0] == "confidential" for row in kept(database.ingest)[0])
    ingestor.withdraw("file:///c/b.md")  # both versions stored from it: kept as withdrawn, out of search
    assert without_empty(kept(database.ingest)) == recounted(database.ingest)
    assert not any(row[0] == "confidential" for row in kept(database.ingest)[0])
    ingest(ingestor, steps[-1][0], "file:///c/b.md")  # the identical file reinstates its version
    assert without_empty(kept(database.ingest)) == recounted(database.ingest)
    assert any(row[0] == "confidential" for row in kept(database.ingest)[0])


def test_a_role_reads_the_statistics_of_the_classifications_it_may_read_only(ingestor, database):
    ingest(ingestor, markdown_document("CMP-SOP-901", classification="public"), "file:///c/public.md")
    secret = {"1. Purpose": "Project nightjar covers the reconciliation of the treasury ledger."}
    ingest(ingestor, markdown_document("FIN-SOP-902", classification="restricted", sections=secret), "file:///c/r.md")
    for role, visible in ((Role.DEMO_READONLY, {"public"}), (Role.COMPLIANCE_OFFICER, {"public", "restricted"})):
        with psycopg.connect(database.reader(role), autocommit=True) as conn:
            with conn.transaction():
                conn.execute(f"SET LOCAL ROLE {role.value}")
                seen = {r[0] for r in conn.execute("SELECT DISTINCT classification::text FROM kb.lexeme_stats")}
                totals = {r[0] for r in conn.execute("SELECT classification::text FROM kb.text_stats")}
                nightjar = conn.execute("SELECT count(*) FROM kb.lexeme_stats WHERE lexeme = 'nightjar'").fetchone()
            assert seen == visible and totals == visible
            assert nightjar == ((1,) if role is Role.COMPLIANCE_OFFICER else (0,))
            # The login itself, outside its reader role, reads no statistics at all.
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT count(*) FROM kb.lexeme_stats")


@pytest.fixture
def common_and_rare(ingestor, database: DatabaseTargets) -> DatabaseTargets:
    """Twenty sections that say 'ledger' (one of them four times), and one that says 'reconciliation' once."""
    sections = {f"{n}. Entries {n}": f"Ledger entry {n} is posted daily to the books." for n in range(1, 20)}
    sections["20. Ledger"] = "Ledger ledger ledger: the ledger is posted daily to the books."
    sections["21. Close"] = "Month-end reconciliation is posted daily to the books."
    ingest(ingestor, markdown_document("FIN-SOP-903", classification="public", sections=sections), "file:///c/l.md")
    return database


async def _first(database: DatabaseTargets, text: str, text_rank: str) -> str:
    async with await psycopg.AsyncConnection.connect(database.reader(Role.DEMO_READONLY), autocommit=True) as conn:
        await register_vector_async(conn)
        hits = await hybrid_search(
            conn, Role.DEMO_READONLY, text=text, vector=None, departments=None, limit=3, text_rank=text_rank
        )
    return hits[0].section_path


async def test_a_rare_word_outweighs_many_occurrences_of_a_common_one(common_and_rare):
    # ts_rank counts occurrences, so the section saying 'ledger' five times wins; BM25 weighs the word that
    # twenty sections share far below the one only one section has.
    assert await _first(common_and_rare, "ledger reconciliation", "ts_rank") == "20. Ledger"
    assert await _first(common_and_rare, "ledger reconciliation", "bm25") == "21. Close"


@pytest.fixture
def hyphenated(ingestor, database: DatabaseTargets) -> DatabaseTargets:
    """A public section spelling 'E-mail' and one spelling 'oncall', among others sharing neither."""
    sections = {
        "1. Mailboxes": "Retain each E-mail message for seven years after it is sent.",
        "2. Rota": "The oncall engineer acknowledges a page within five minutes.",
        "3. Paper": "Printed letters are scanned and shredded within a week.",
        "4. Chat": "Chat transcripts are kept for two years.",
    }
    ingest(ingestor, markdown_document("SEC-SOP-904", classification="public", sections=sections), "file:///c/h.md")
    # The only 'in-app' spelling is above the public role's ceiling.
    secret = {"1. Messages": "In-app messages to the board are kept for ten years."}
    ingest(ingestor, markdown_document("FIN-SOP-905", classification="restricted", sections=secret), "file:///c/r.md")
    return database


async def _sections(database: DatabaseTargets, text: str, *, role: Role = Role.DEMO_READONLY, **kwargs) -> list[str]:
    async with await psycopg.AsyncConnection.connect(database.reader(role), autocommit=True) as conn:
        await register_vector_async(conn)
        hits = await hybrid_search(conn, role, text=text, vector=None, departments=None, limit=5, **kwargs)
    return [h.section_path for h in hits]


async def test_a_word_is_found_however_its_hyphens_are_written(hyphenated):
    # The parser keeps 'E-mail' whole (lexeme 'e-mail'), so "emails" (lexeme 'email') matched nothing.
    assert await _sections(hyphenated, "emails", hyphen_spellings=False) == []
    assert await _sections(hyphenated, "emails") == ["1. Mailboxes"]
    assert (await _sections(hyphenated, "how long do we keep e-mails"))[0] == "1. Mailboxes"
    # And the other way: the question hyphenates what the chunk writes as one word.
    assert await _sections(hyphenated, "on-call", hyphen_spellings=False) == []
    assert await _sections(hyphenated, "on-call") == ["2. Rota"]


async def test_a_spelling_only_above_the_roles_ceiling_adds_nothing_to_its_question(hyphenated):
    # The spellings come from the statistics rows the role may read (sql/008's policy): the public role's
    # "inapp" stays one word, so not even its share of the match cap says an 'in-app' exists above it.
    words = {}
    for role in (Role.DEMO_READONLY, Role.COMPLIANCE_OFFICER):
        login = hyphenated.reader(role)
        async with (
            await psycopg.AsyncConnection.connect(login, autocommit=True) as conn,
            reader_transaction(conn, role) as tx,
        ):
            statement = "WITH " + _QUERY_WORDS.format(tsq="NULL", filtered="") + " SELECT lexemes FROM query"
            cursor = await tx.execute(statement, statement_params(text="inapp", vector=None, departments=None, limit=5))
            words[role] = sorted((await cursor.fetchone())[0])
    assert words == {Role.DEMO_READONLY: ["inapp"], Role.COMPLIANCE_OFFICER: ["in-app", "inapp"]}
    assert await _sections(hyphenated, "inapp", role=Role.COMPLIANCE_OFFICER) == ["1. Messages"]
