"""The full-text leg's BM25 statistics (sql/008), kept by the writer in the chunks' own transaction.

Call `add` after a version's effective chunks are stored, and `remove` before effective chunks stop being
effective, are replaced or are deleted: the statistics then always count exactly the effective chunks.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg


def add(conn: psycopg.Connection, doc_ids: Sequence[int]) -> None:
    _count(conn, doc_ids, 1)


def remove(conn: psycopg.Connection, doc_ids: Sequence[int]) -> None:
    _count(conn, doc_ids, -1)


def _count(conn: psycopg.Connection, doc_ids: Sequence[int], direction: int) -> None:
    if doc_ids:
        conn.execute("SELECT kb.count_text_stats(%s::bigint[], %s)", (list(doc_ids), direction))
