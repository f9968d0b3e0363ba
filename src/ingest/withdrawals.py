"""Withdrawals that do not wait for an event: by doc code, and by comparing what is stored with its source.

A removed object withdraws its document through the queue (ObjectRemoved). These cover the cases with
no event: a person withdrawing a document by its code, and a file deleted while the local stack was
stopped (the stack starts with an empty bucket, so nothing is ever removed from it). Both go through
`ingest.upsert.withdraw`, so a withdrawal is stored the one way the product stores withdrawals.
"""

from __future__ import annotations

from collections.abc import Iterable

import psycopg

from ingest.upsert import withdraw


def withdraw_document(
    conn: psycopg.Connection, doc_code: str, *, retention_days: int | None = None
) -> list[tuple[str, str]]:
    """Withdraw every stored version of `doc_code`, whatever file it came from; return (code, version)s."""
    uris = [
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT source_uri FROM kb.documents WHERE doc_code = %s AND status::text <> 'withdrawn'",
            (doc_code,),
        ).fetchall()
    ]
    withdrawn: list[tuple[str, str]] = []
    with conn.transaction():
        for uri in uris:
            withdrawn += withdraw(conn, uri, retention_days=retention_days, reason="withdrawn by its doc code")
    return withdrawn


def stored_versions(conn: psycopg.Connection, doc_code: str) -> int:
    """How many versions of `doc_code` are stored, withdrawn ones included."""
    row = conn.execute("SELECT count(*) FROM kb.documents WHERE doc_code = %s", (doc_code,)).fetchone()
    return int(row[0]) if row else 0


def orphaned_sources(conn: psycopg.Connection, prefixes: Iterable[str], present: Iterable[str]) -> list[str]:
    """Source URIs under any of `prefixes` (s3://bucket/, file:///…/corpus/) that documents are stored from but
    that are not among the `present` URIs."""
    there = set(present)
    orphaned: set[str] = set()
    for prefix in prefixes:
        stored = conn.execute(
            """SELECT DISTINCT source_uri FROM kb.documents
               WHERE starts_with(source_uri, %s) AND status::text <> 'withdrawn'""",
            (prefix,),
        ).fetchall()
        orphaned |= {uri for (uri,) in stored if uri not in there}
    return sorted(orphaned)
