"""Which PostgreSQL the product uses, and the logins it uses it with.

- owner: runs migrations (DATABASE_URL's user; the superuser of the embedded server);
- kb_server: the MCP server's own login; it reads the migration ledger and the embedding space only;
- kb_server_<role>: one login per reader role, each able to become that role and no other (sql/010);
  the server answers a caller on its role's login. Same host, database and password as kb_server;
- kb_ingest: the writer's login.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import conninfo as pg_conninfo
from psycopg import sql
from pydantic import SecretStr

from kb_core.roles import Role
from kb_core.settings import DatabaseSettings

SERVER_LOGIN = "kb_server"
INGEST_LOGIN = "kb_ingest"


def reader_login(role: Role) -> str:
    return f"{SERVER_LOGIN}_{Role(role).value}"


def reader_conninfo(server: str, role: Role) -> str:
    """The server's conninfo with the login of `role`: a connection that can become that role only."""
    return pg_conninfo.make_conninfo(server, user=reader_login(role))


@dataclass(frozen=True)
class DatabaseTargets:
    owner: str
    server: str
    ingest: str
    description: str
    embedded: Any = None  # the EmbeddedPostgres holding the server, when there is one

    def reader(self, role: Role) -> str:
        return reader_conninfo(self.server, role)


def resolve_database(settings: DatabaseSettings, *, keep_running: bool = False) -> DatabaseTargets:
    """Return the conninfo of each login; start the embedded server first when DATABASE_URL is unset."""
    connect_args = {"connect_timeout": str(max(1, round(settings.connect_timeout_s)))}
    if settings.url is None:
        from kb_core.db.embedded import EmbeddedPostgres  # only then: the bundled server is ~70 MB

        embedded = EmbeddedPostgres(settings.state_dir)
        superuser = embedded.start(keep_running=keep_running)
        _create_database_if_missing(superuser, settings.embedded_database)
        owner = pg_conninfo.make_conninfo(superuser, dbname=settings.embedded_database, **connect_args)
        return DatabaseTargets(
            owner=owner,
            server=pg_conninfo.make_conninfo(owner, user=SERVER_LOGIN),
            ingest=pg_conninfo.make_conninfo(owner, user=INGEST_LOGIN),
            description=f"{embedded.describe()}, database {settings.embedded_database}",
            embedded=embedded,
        )

    owner = pg_conninfo.make_conninfo(settings.url.get_secret_value(), **connect_args)
    server = _login(owner, settings.server_url, SERVER_LOGIN, settings.server_password)
    ingest = _login(owner, settings.ingest_url, INGEST_LOGIN, settings.ingest_password)
    return DatabaseTargets(owner=owner, server=server, ingest=ingest, description=f"DATABASE_URL {redact(owner)}")


def _login(owner: str, explicit: SecretStr | None, user: str, password: SecretStr | None) -> str:
    if explicit is not None:
        return pg_conninfo.make_conninfo(explicit.get_secret_value())
    extra = {"password": password.get_secret_value()} if password is not None else {"password": ""}
    return pg_conninfo.make_conninfo(owner, user=user, **extra)


def redact(conninfo: str) -> str:
    """host:port/dbname as user, never the password."""
    params = pg_conninfo.conninfo_to_dict(conninfo)
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    return f"postgresql://{params.get('user', '')}@{host}:{port}/{params.get('dbname', '')}"


def _create_database_if_missing(superuser: str, name: str) -> None:
    with psycopg.connect(superuser, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            # Another kb process may create it at the same moment.
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
