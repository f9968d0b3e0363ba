"""At the local stack's start: withdraw what was stored from files that are gone from the corpus folder.

The local AWS starts with an empty bucket, so a file deleted while the stack was stopped never produces
an ObjectRemoved event. Its documents are found by comparing the database with the folder instead.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from kb_core.settings import Settings


def reconcile_with_folder(settings: Settings, ingest_conninfo: str, bucket: str, folder: Path) -> list[str]:
    """Withdraw the documents stored from s3://bucket/KEY where folder/KEY no longer exists; return their codes."""
    from ingest.pipeline import document_files
    from ingest.upsert import withdraw
    from ingest.withdrawals import orphaned_sources

    files, _ = document_files([folder])
    present = [path.relative_to(folder).as_posix() for path in files]
    withdrawn: list[str] = []
    with psycopg.connect(ingest_conninfo, autocommit=True) as conn:
        for uri in orphaned_sources(conn, bucket, present):
            with conn.transaction():
                withdrawn += [
                    f"{code} v{version}"
                    for code, version in withdraw(conn, uri, retention_days=settings.aws.withdrawn_retention_days)
                ]
    return withdrawn
