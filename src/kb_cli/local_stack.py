"""At the local stack's start: withdraw what was stored from files that are gone from the corpus folder.

The local AWS starts with an empty bucket, so a file deleted while the stack was stopped never produces
an ObjectRemoved event. Its documents are found by comparing the database with the folder instead.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from kb_core.settings import Settings


def withdrawn_versions(ingest_conninfo: str) -> dict[tuple[str, str], str]:
    """(doc code, version) -> the day it was withdrawn, of every withdrawn version: one that ingests again at
    this start was brought back by its file, which `make run` should say (found walking it: a `kb withdraw`
    was undone by the next `make run` without a word)."""
    with psycopg.connect(ingest_conninfo, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT doc_code, version, coalesce(withdrawn_at::date::text, 'an unknown day') FROM kb.documents "
            "WHERE status = 'withdrawn'"
        ).fetchall()
    return {(code, version): day for code, version, day in rows}


def reconcile_with_folder(settings: Settings, ingest_conninfo: str, bucket: str, folder: Path) -> list[tuple[str, str]]:
    """Withdraw the documents stored from s3://bucket/KEY, or by `kb ingest` from folder/KEY, where folder/KEY no
    longer exists; return the (doc code, version)s withdrawn."""
    from ingest.pipeline import document_files
    from ingest.upsert import withdraw
    from ingest.withdrawals import orphaned_sources

    files, _ = document_files([folder])
    # As each path stores them: the worker the object's key, `kb ingest` the file's URI (Path.as_uri quotes).
    present = [f"s3://{bucket}/{path.relative_to(folder).as_posix()}" for path in files]
    present += [path.resolve().as_uri() for path in files]
    prefixes = (f"s3://{bucket}/", folder.resolve().as_uri() + "/")
    withdrawn: list[tuple[str, str]] = []
    with psycopg.connect(ingest_conninfo, autocommit=True) as conn:
        for uri in orphaned_sources(conn, prefixes, present):
            with conn.transaction():
                withdrawn += withdraw(conn, uri, retention_days=settings.aws.withdrawn_retention_days)
    return withdrawn
