"""The full-text leg's match cap is shared out among the question's words, so a rare word's chunks are
always ranked, however many chunks a common word of the same question matches."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector, register_vector_async

from kb_core.db.targets import DatabaseTargets
from kb_core.roles import Role
from kb_server.search import hybrid_search

COMMON = 40
pytestmark = pytest.mark.anyio


@pytest.fixture
def common_and_rare(database: DatabaseTargets) -> DatabaseTargets:
    """COMMON public chunks that say 'ledger', then (stored last) one that also says 'reconciliation'."""
    vector = np.ones(384, dtype=np.float32) / np.sqrt(384)  # the vector leg is not asked here
    with psycopg.connect(database.ingest) as conn:
        register_vector(conn)
        (doc_id,) = conn.execute(
            """INSERT INTO kb.documents (doc_code, version, version_key, title, status, effective_date, owner,
                   department, classification, source_uri, source_format, source_sha256)
               VALUES ('FIN-SOP-001', '1.0', '{1,0}', 'Ledger', 'effective', '2026-01-01', 'Owner', 'finance',
                       'public', 'test://ledger', 'markdown', repeat('a', 64)) RETURNING doc_id"""
        ).fetchone()
        contents = [f"Ledger entry {n} is posted daily." for n in range(COMMON)]
        contents.append("Ledger reconciliation runs at month end.")
        for ordinal, content in enumerate(contents):
            conn.execute(
                """INSERT INTO kb.chunks (doc_id, classification, department, is_effective, ordinal, section_path,
                       anchor, title, content, token_count, embedding_sha256, embedding)
                   VALUES (%s, 'public', 'finance', true, %s, %s, %s, 'Ledger', %s, 8, 'x', %s)""",
                (doc_id, ordinal, f"{ordinal + 1}. Entry", str(ordinal + 1), content, vector),
            )
        conn.commit()
    return database


async def _full_text(database: DatabaseTargets, text: str, *, match_cap: int) -> list[str]:
    async with await psycopg.AsyncConnection.connect(database.reader(Role.DEMO_READONLY), autocommit=True) as conn:
        await register_vector_async(conn)
        hits = await hybrid_search(
            conn, Role.DEMO_READONLY, text=text, vector=None, departments=None, limit=5, match_cap=match_cap
        )
    return [hit.content for hit in hits]


async def test_a_rare_word_is_ranked_when_a_common_word_of_the_question_overflows_the_cap(common_and_rare):
    # 41 chunks match 'ledger', far over a cap of 10; the one chunk that also says 'reconciliation' is
    # stored last, so the first 10 matches of the whole OR query would not include it.
    found = await _full_text(common_and_rare, "ledger reconciliation", match_cap=10)
    assert found[0] == "Ledger reconciliation runs at month end."
    assert len(found) == 5


async def test_under_the_cap_every_match_is_ranked(common_and_rare):
    found = await _full_text(common_and_rare, "ledger reconciliation", match_cap=2000)
    assert found[0] == "Ledger reconciliation runs at month end."


async def test_a_question_of_stop_words_alone_matches_nothing_and_does_not_fail(common_and_rare):
    assert await _full_text(common_and_rare, "what is the", match_cap=10) == []
