"""The hybrid search is one SQL statement in one round trip: the client sends BEGIN, the role switch,
the settings, the query and COMMIT, and waits once (counted with libpq's protocol trace)."""

from __future__ import annotations

import tempfile

import psycopg
import pytest
from pgvector.psycopg import register_vector_async

from kb_core.roles import Role
from kb_server.search import hybrid_search

pytestmark = pytest.mark.anyio


async def test_a_search_waits_on_the_database_once(corpus_database, local_embedder):
    vector = local_embedder.embed_query("wire cut-off time")
    async with await psycopg.AsyncConnection.connect(
        corpus_database.targets.reader(Role.SUPPORT_AGENT), autocommit=True
    ) as conn:
        await register_vector_async(conn)
        with tempfile.TemporaryFile("w+") as trace:
            conn.pgconn.trace(trace.fileno())
            conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE)
            hits = await hybrid_search(
                conn, Role.SUPPORT_AGENT, text="wire cut-off time", vector=vector, departments=None, limit=5
            )
            conn.pgconn.untrace()
            trace.seek(0)
            # Protocol messages start with F (front end: sent) or B (back end: received); a statement's own
            # line breaks continue the line before.
            lines = [line.split("\t") for line in trace.read().splitlines() if line[:2] in ("F\t", "B\t")]
    assert hits
    sent = [line[2] for line in lines if line[0] == "F"]
    # One Sync: the client sends every statement, then waits for the answers once. (libpq may read
    # answers that have already arrived while it is still sending; that is not a wait.)
    assert sent.count("Sync") == 1, sent
    assert sent.index("Sync") > max(i for i, kind in enumerate(sent) if kind == "Execute")
    statements = [line[3] for line in lines if line[0] == "F" and line[2] == "Parse"]
    assert len([s for s in statements if "WITH query AS" in s]) == 1
    assert '"BEGIN READ ONLY"' in statements[0] and '"COMMIT"' in statements[-1]
