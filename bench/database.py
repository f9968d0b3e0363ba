"""The benchmark's embedded PostgreSQL, shared by every part that starts one."""

from __future__ import annotations

from pathlib import Path

import psycopg

from kb_core.db.embedded import EmbeddedPostgres


def start_database(state: Path, *, tuned: bool) -> str:
    server = EmbeddedPostgres(state)
    superuser = server.start()
    if tuned:
        # The embedded server's default shared_buffers (128 MB) is a laptop's; give the benchmark a server's.
        with psycopg.connect(superuser, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_buffers = '4GB'")
            conn.execute("ALTER SYSTEM SET effective_cache_size = '12GB'")
            conn.execute("ALTER SYSTEM SET max_parallel_maintenance_workers = 2")
        server.restart()
    return superuser
