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


class MissingLogin(ValueError):
    """A command needs a login the settings do not give (a process handed only its own login's URL)."""


_SETTING = {
    "owner": "DATABASE_URL (the owner login)",
    "server": "KB_SERVER_DATABASE_URL (or DATABASE_URL)",
    "ingest": "KB_INGEST_DATABASE_URL (or DATABASE_URL)",
}


@dataclass(frozen=True)
class DatabaseTargets:
    """Each login's conninfo. A process may be given only its own login (the server KB_SERVER_DATABASE_URL, a
    worker KB_INGEST_DATABASE_URL, without DATABASE_URL): asking for another then raises MissingLogin."""

    owner_login: str | None
    server_login: str | None
    ingest_login: str | None
    description: str
    embedded: Any = None  # the EmbeddedPostgres holding the server, when there is one

    @property
    def owner(self) -> str:
        return self._login("owner", self.owner_login)

    @property
    def server(self) -> str:
        return self._login("server", self.server_login)

    @property
    def ingest(self) -> str:
        return self._login("ingest", self.ingest_login)

    def _login(self, kind: str, conninfo: str | None) -> str:
        if conninfo is None:
            raise MissingLogin(f"this needs the {kind} login and only {self.description} is set: set {_SETTING[kind]}")
        return conninfo

    def reader(self, role: Role) -> str:
        return reader_conninfo(self.server, role)


def resolve_database(settings: DatabaseSettings, *, keep_running: bool = False) -> DatabaseTargets:
    """Return the conninfo of each login; start the embedded server first when DATABASE_URL is unset."""
    connect_args = {"connect_timeout": str(max(1, round(settings.connect_timeout_s)))}
    if settings.url is None and not settings.embedded:
        # A process given only its own login (the production server, a worker): that database, never an
        # embedded one under KB_STATE_DIR (it used to start one, empty, and serve it without a word).
        server = _explicit(settings.server_url, connect_args)
        ingest = _explicit(settings.ingest_url, connect_args)
        named = [
            f"{name} {redact(conninfo)}"
            for name, conninfo in (("KB_SERVER_DATABASE_URL", server), ("KB_INGEST_DATABASE_URL", ingest))
            if conninfo is not None
        ]
        return DatabaseTargets(None, server, ingest, " and ".join(named))
    if settings.url is None:  # and so embedded (the branch above took the other logins)
        from kb_core.db.embedded import EmbeddedPostgres  # only then: the bundled server is ~70 MB

        embedded = EmbeddedPostgres(settings.state_dir)
        superuser = embedded.start(keep_running=keep_running)
        _create_database_if_missing(superuser, settings.embedded_database)
        owner = pg_conninfo.make_conninfo(superuser, dbname=settings.embedded_database, **connect_args)
        return DatabaseTargets(
            owner_login=owner,
            server_login=pg_conninfo.make_conninfo(owner, user=SERVER_LOGIN),
            ingest_login=pg_conninfo.make_conninfo(owner, user=INGEST_LOGIN),
            description=f"{embedded.describe()}, database {settings.embedded_database}",
            embedded=embedded,
        )

    owner = pg_conninfo.make_conninfo(settings.url.get_secret_value(), **connect_args)
    server = _login(owner, settings.server_url, SERVER_LOGIN, settings.server_password)
    ingest = _login(owner, settings.ingest_url, INGEST_LOGIN, settings.ingest_password)
    return DatabaseTargets(owner, server, ingest, description=f"DATABASE_URL {redact(owner)}")


def _explicit(url: SecretStr | None, connect_args: dict[str, str]) -> str | None:
    return pg_conninfo.make_conninfo(url.get_secret_value(), **connect_args) if url is not None else None


def _login(owner: str, explicit: SecretStr | None, user: str, password: SecretStr | None) -> str:
    if explicit is not None:
        return pg_conninfo.make_conninfo(explicit.get_secret_value())
    extra = {"password": password.get_secret_value()} if password is not None else {"password": ""}
    return pg_conninfo.make_conninfo(owner, user=user, **extra)


def redact(conninfo: str) -> str:
    """host:port/dbname as user, never the password."""
    params = pg_conninfo.conninfo_to_dict(conninfo)
    host = str(params.get("host") or "localhost")
    port = params.get("port") or "5432"
    if host.startswith("/"):  # a unix socket's directory: the URL form that names one
        return f"postgresql://{params.get('user', '')}@/{params.get('dbname', '')}?host={host}"
    return f"postgresql://{params.get('user', '')}@{host}:{port}/{params.get('dbname', '')}"


def _create_database_if_missing(superuser: str, name: str) -> None:
    with psycopg.connect(superuser, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            # Another kb process may create it at the same moment.
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
