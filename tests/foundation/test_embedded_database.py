"""The embedded PostgreSQL: started on demand under one state directory, shared by every kb process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
from psycopg import conninfo as pg_conninfo

from kb_core.db.migrations import discover_migrations


def kb(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kb_cli.main", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def postmaster_pid(state_dir: Path) -> int:
    return int((state_dir / "pgdata" / "postmaster.pid").read_text().splitlines()[0])


def test_kb_processes_attach_to_the_one_running_instance(postgres_superuser, test_state_dir):
    if os.environ.get("KB_TEST_DATABASE_URL"):
        return  # the session runs on an external server; there is no embedded one to share
    pid = postmaster_pid(test_state_dir)
    env = {"KB_STATE_DIR": str(test_state_dir), "KB_EMBEDDED_DATABASE": "kb_attach_test"}
    first = kb("db", "migrate", env=env)
    second = kb("db", "status", env=env)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert str(test_state_dir) in second.stdout and "kb_attach_test" in second.stdout
    assert "was not running" not in second.stdout  # it was: this session holds it
    latest = len(discover_migrations())
    assert f"{latest} of {latest}" in second.stdout.replace("\n", " ")
    # Both commands attached to the server this test session holds: it was neither restarted nor stopped.
    assert postmaster_pid(test_state_dir) == pid
    with psycopg.connect(postgres_superuser, autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_first_kb_process_starts_the_server_and_the_last_one_stops_it(fresh_state_dir):
    state = fresh_state_dir
    env = {"KB_STATE_DIR": str(state)}
    result = kb("db", "status", env=env)
    assert result.returncode == 0, result.stderr
    assert "PostgreSQL" in result.stdout and "18." in result.stdout
    assert "0.8" in result.stdout  # pgvector >= 0.8
    assert (state / "pgdata" / "PG_VERSION").exists()
    assert not (state / "pgdata" / "postmaster.pid").exists()  # no holder left, so it stopped
    # It says so: found walking it, after `kb db stop` this started the database and showed it healthy.
    assert "was not running: started for this command" in " ".join(result.stdout.split())


def test_db_start_keeps_the_server_running_until_db_stop(fresh_state_dir):
    env = {"KB_STATE_DIR": str(fresh_state_dir)}
    assert kb("db", "start", env=env).returncode == 0
    try:
        assert (fresh_state_dir / "pgdata" / "postmaster.pid").exists()
    finally:
        stopped = kb("db", "stop", env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert not (fresh_state_dir / "pgdata" / "postmaster.pid").exists()


def test_with_database_url_set_that_server_is_used_unchanged(database, tmp_path):
    params = pg_conninfo.conninfo_to_dict(database.owner)
    url = f"postgresql://{params['user']}@/{params['dbname']}?host={params['host']}"
    state = tmp_path / "never-created"
    result = kb("db", "status", env={"DATABASE_URL": url, "KB_STATE_DIR": str(state)})
    assert result.returncode == 0, result.stderr
    assert "DATABASE_URL" in result.stdout and params["dbname"] in result.stdout
    assert not state.exists()  # no embedded server was started


def test_db_status_shows_what_the_owner_reads_and_names_the_writer_login_it_cannot_use(database, tmp_path):
    # Found walking the production set-up: right after `kb db migrate` the writer has no password yet, and the
    # whole command failed on a line that named neither the login nor the setting to fix.
    params = pg_conninfo.conninfo_to_dict(database.owner)
    url = f"postgresql://{params['user']}@/{params['dbname']}?host={params['host']}"
    refused = f"postgresql://kb_no_such_writer@/{params['dbname']}?host={params['host']}"
    env = {"DATABASE_URL": url, "KB_INGEST_DATABASE_URL": refused, "KB_STATE_DIR": str(tmp_path / "state")}
    result = kb("db", "status", env=env)
    assert result.returncode == 2, result.stderr
    assert f"migrations         {len(discover_migrations())} of {len(discover_migrations())}" in result.stdout
    assert "document versions  not read: cannot log in to postgresql://kb_no_such_writer@" in result.stdout
    assert "set KB_INGEST_DB_PASSWORD or KB_INGEST_DATABASE_URL" in result.stdout
    assert "Traceback" not in result.stderr
