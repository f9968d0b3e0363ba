"""Before serving or searching: make the database ready where that is safe, or say in one line what to run.

- The embedded database (DATABASE_URL unset) belongs to this state directory: it is started and migrated
  here, so a first `kb serve` or `kb search` on an empty state directory just works.
- A database named by DATABASE_URL belongs to someone else: it is only checked. Unreachable, not migrated
  or built for another embedder, the command stops within seconds with one line naming the fix.
"""

from __future__ import annotations

from typing import Literal

import psycopg

from kb_core.db.targets import DatabaseTargets, redact, resolve_database
from kb_core.roles import Role
from kb_core.settings import Settings

CHECK_TIMEOUT_S = 2


class NotReady(Exception):
    """The database cannot be used yet; the message is one line that names the fixing command."""


def prepare_database(settings: Settings, *, login: Literal["server", "ingest"] = "server") -> DatabaseTargets:
    """`login`: the one the command uses, checked (the server's also checks its four reader logins)."""
    from kb_core.db.migrations import migrate
    from kb_core.db.readiness import schema_problem
    from kb_core.embedders import embedding_space_for

    space = embedding_space_for(settings.embedding)
    if settings.database.embedded:
        state = settings.database.state_dir
        try:
            state.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            # Found walking it: a state directory under a file was reported as the database not starting, with
            # a log to read under a folder that cannot exist.
            raise NotReady(
                f"KB_STATE_DIR {state} cannot be made a folder ({exc.strerror or exc}); set KB_STATE_DIR to a folder "
                "you can write"
            ) from None
    try:
        targets = resolve_database(settings.database)
    except psycopg.OperationalError as exc:
        raise NotReady(f"cannot reach the database: {_first_line(exc)}; check DATABASE_URL") from None
    except Exception as exc:  # the bundled server failed to start: its log says why
        where = settings.database.state_dir / "pgdata" / "log"
        raise NotReady(
            f"the embedded database did not start ({exc.__class__.__name__}: {_first_line(exc)}); see {where}, "
            "or run `kb db stop` and try again"
        ) from None
    if targets.embedded is not None:
        migrate(targets.owner, space)  # ours: prepare it
    conninfo = targets.server if login == "server" else targets.ingest  # MissingLogin when not given
    who, setting = ("the server", "SERVER") if login == "server" else ("the writer", "INGEST")
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=CHECK_TIMEOUT_S) as conn:
            problem = schema_problem(conn, space)
    except psycopg.OperationalError as exc:
        text = _first_line(exc)
        if "does not exist" in text and "role" in text:
            problem = f"the database has no knowledge-base schema yet (no kb_{login} login): run `kb db migrate`"
        else:
            problem = login_refused(conninfo, who, setting, text)
    if problem:
        raise NotReady(problem)
    if login == "server":
        _check_reader_logins(targets)
    return targets


def login_refused(conninfo: str, who: str, setting: str, text: str) -> str:
    return (
        f"cannot log in to {redact(conninfo)} as {who}: {text}; check DATABASE_URL, "
        f"KB_{setting}_DATABASE_URL or KB_{setting}_DB_PASSWORD"
    )


_LOGIN_REFUSED = ("password", "authentication", "does not exist", "not permitted to log in")


def writer_login_refused(conninfo: str, exc: psycopg.OperationalError) -> str | None:
    """The line for the writer's login refused (no or a wrong password, no such role); None for a database
    that cannot be reached at all, which is not the login's fault."""
    text = _first_line(exc)
    return login_refused(conninfo, "the writer", "INGEST", text) if any(w in text for w in _LOGIN_REFUSED) else None


def check_audit_target(settings: Settings, targets: DatabaseTargets) -> None:
    """A server reading from a read replica needs the primary for its audit records: say so before serving."""
    from kb_server.server import REPLICA_WITHOUT_PRIMARY

    with psycopg.connect(targets.server, autocommit=True, connect_timeout=CHECK_TIMEOUT_S) as conn:
        replica = (conn.execute("SELECT pg_is_in_recovery()").fetchone() or (False,))[0]
    if not replica:
        return
    if settings.database.audit_write_url is None:
        raise NotReady(REPLICA_WITHOUT_PRIMARY)
    primary = settings.database.audit_write_url.get_secret_value()
    try:
        psycopg.connect(primary, autocommit=True, connect_timeout=CHECK_TIMEOUT_S).close()
    except psycopg.OperationalError as exc:
        raise NotReady(
            f"cannot reach the primary for audit records ({redact(primary)}): {_first_line(exc)}; "
            "check KB_AUDIT_WRITE_DATABASE_URL"
        ) from None


def _check_reader_logins(targets: DatabaseTargets) -> None:
    """Each reader role is served on a login of its own (sql/010); one that cannot log in is named now,
    not on the first request of its role."""
    for role in Role:
        try:
            psycopg.connect(targets.reader(role), autocommit=True, connect_timeout=CHECK_TIMEOUT_S).close()
        except psycopg.OperationalError as exc:
            raise NotReady(
                f"cannot log in to {redact(targets.reader(role))} (the {role.value} reader's login): "
                f"{_first_line(exc)}; give it the kb_server password (README: Run it in production)"
            ) from None


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] if text else exc.__class__.__name__
