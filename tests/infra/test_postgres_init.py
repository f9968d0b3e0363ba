"""infra/postgres/initdb/10-kb-logins.sh, the compose stack's first-start script, on a fresh PostgreSQL.

It runs as the postgres image runs it (psql, POSTGRES_USER/POSTGRES_DB, the two passwords in the
environment), on a cluster of its own: roles are cluster-wide, and the script only ever meets an empty one.
The migrations must then run over it and keep both the logins' passwords and their attributes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import conninfo as pg_conninfo

from kb_core.db.embedded import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION, pgserver
from kb_core.db.migrations import migrate
from kb_core.embedders import embedding_space_for
from kb_core.roles import Role
from kb_core.settings import EmbeddingSettings

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "infra" / "postgres" / "initdb" / "10-kb-logins.sh"
# Quotes, a backslash, a semicolon and a psql variable sigil: the script must pass them as literals.
SERVER_PASSWORD = "s3rv'er pa$$ \\ :x"
INGEST_PASSWORD = "in'gest; DROP ROLE kb_server; --"


@pytest.fixture
def fresh_cluster(tmp_path: Path) -> Iterator[str]:
    data = tmp_path / "pgdata"
    server = pgserver.get_server(data, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def scram_matches(verifier: str, password: str) -> bool:
    """Whether a SCRAM-SHA-256 verifier from pg_authid was made from this password (RFC 5802/7677)."""
    mechanism, rest = verifier.split("$", 1)
    assert mechanism == "SCRAM-SHA-256"
    iterations_salt, keys = rest.split("$")
    iterations, salt = iterations_salt.split(":")
    stored_key, _server_key = keys.split(":")
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(salt), int(iterations))
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    return hmac.compare_digest(hashlib.sha256(client_key).digest(), base64.b64decode(stored_key))


def test_the_script_creates_both_logins_and_the_migrations_keep_them(fresh_cluster):
    params = pg_conninfo.conninfo_to_dict(fresh_cluster)
    psql_dir = Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION])
    env = {
        "PATH": f"{psql_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "PGHOST": str(params["host"]),
        "PGPORT": str(params.get("port", "5432")),
        "POSTGRES_USER": str(params.get("user", "postgres")),
        "POSTGRES_DB": "postgres",
        "KB_SERVER_DB_PASSWORD": SERVER_PASSWORD,
        "KB_INGEST_DB_PASSWORD": INGEST_PASSWORD,
    }
    result = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr

    with psycopg.connect(fresh_cluster, autocommit=True) as conn:
        conn.execute("CREATE DATABASE kosha_kb")
    owner = pg_conninfo.make_conninfo(fresh_cluster, dbname="kosha_kb")
    migrate(owner, embedding_space_for(EmbeddingSettings()))

    with psycopg.connect(owner) as conn:
        rows = conn.execute(
            "SELECT rolname, rolcanlogin, rolinherit, rolsuper, rolbypassrls, rolpassword"
            " FROM pg_authid WHERE rolname IN ('kb_server', 'kb_ingest') ORDER BY rolname"
        ).fetchall()
        memberships = conn.execute(
            "SELECT u.rolname, r.rolname FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid"
            " JOIN pg_roles u ON u.oid = m.member WHERE u.rolname LIKE 'kb\\_server%' ORDER BY 1"
        ).fetchall()
        reader_logins = conn.execute(
            "SELECT rolname, rolinherit, rolpassword FROM pg_authid WHERE rolname LIKE 'kb\\_server\\_%' ORDER BY 1"
        ).fetchall()
    (ingest, server) = rows
    assert server[:5] == ("kb_server", True, False, False, False)  # login, NOINHERIT, no superuser, no BYPASSRLS
    assert ingest[:5] == ("kb_ingest", True, True, False, False)
    assert scram_matches(server[5], SERVER_PASSWORD)
    assert scram_matches(ingest[5], INGEST_PASSWORD)
    assert not scram_matches(server[5], INGEST_PASSWORD)
    # kb_server itself can become no reader; each reader's login only its own role, with the server's password.
    assert sorted(memberships) == sorted((f"kb_server_{r.value}", r.value) for r in Role)
    assert [login for login, _, _ in reader_logins] == sorted(f"kb_server_{r.value}" for r in Role)
    for _, inherits, password in reader_logins:
        assert inherits is False and scram_matches(password, SERVER_PASSWORD)


def test_the_script_refuses_to_run_without_the_passwords(tmp_path):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "POSTGRES_USER": "postgres", "POSTGRES_DB": "postgres"}
    result = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "KB_SERVER_DB_PASSWORD must be set" in result.stderr
