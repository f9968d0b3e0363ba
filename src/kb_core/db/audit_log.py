"""Reading and pruning the retrieval audit log (sql/005), for compliance staff and the operator.

The server writes the log (kb_server.audit); this is the other side: `kb audit` reads it as the owner
or as a login granted the compliance role, and `kb audit prune` removes records past their retention
through the one privileged path the database allows (kb.prune_audit_log, owner only). A prune is itself
recorded in the log.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from kb_core.db.targets import redact

COLUMNS = (
    "audit_id",
    "at",
    "caller",
    "role",
    "transport",
    "kind",
    "operation",
    "arguments",
    "citations",
    "doc_codes",
    "result_count",
    "degraded",
    "outcome",
    "error",
    "duration_ms",
    "flagged",  # last: added after the others (sql/014), so a CSV reader's column positions hold
)
COMPLIANCE_ROLE = "compliance_officer"
_AGE = re.compile(r"^\s*(\d{1,6})\s*([dwy])\s*$")
_DAYS = {"d": 1, "w": 7, "y": 365}


class AuditAccessError(Exception):
    """The login may not read or prune the audit log; the message says which login is needed."""


@dataclass(frozen=True)
class AuditFilter:
    caller: str | None = None
    role: str | None = None
    doc_code: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int | None = None
    flagged: bool = False  # only answers that carried a chunk flagged as looking like instructions to an AI


def parse_age(text: str) -> timedelta:
    """'365d', '52w', '7y' -> a timedelta; anything else raises ValueError saying the form."""
    match = _AGE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not an age: use a number of days, weeks or years, e.g. 365d, 52w or 7y")
    if int(match[1]) == 0:
        raise ValueError(f"{text!r} is no age: prune records at least 1 day old, e.g. 365d, 52w or 7y")
    return timedelta(days=int(match[1]) * _DAYS[match[2]])


def _query(where: AuditFilter) -> tuple[sql.Composed, dict[str, Any]]:
    conditions: list[sql.Composable] = []
    params: dict[str, Any] = {}
    if where.caller is not None:
        conditions.append(sql.SQL("caller = %(caller)s"))
        params["caller"] = where.caller
    if where.role is not None:
        conditions.append(sql.SQL("role = %(role)s"))
        params["role"] = where.role
    if where.doc_code is not None:
        conditions.append(sql.SQL("doc_codes @> ARRAY[%(doc_code)s]::text[]"))
        params["doc_code"] = where.doc_code.strip().upper()
    if where.since is not None:
        conditions.append(sql.SQL("at >= %(since)s"))
        params["since"] = where.since
    if where.until is not None:
        conditions.append(sql.SQL("at < %(until)s"))
        params["until"] = where.until
    if where.flagged:
        conditions.append(sql.SQL("cardinality(flagged) > 0"))
    query = sql.SQL("SELECT {} FROM kb.audit_log").format(sql.SQL(", ").join(map(sql.Identifier, COLUMNS)))
    if conditions:
        query += sql.SQL(" WHERE ") + sql.SQL(" AND ").join(conditions)
    query += sql.SQL(" ORDER BY at, audit_id")
    if where.limit is not None:
        query += sql.SQL(" LIMIT {}").format(sql.Literal(int(where.limit)))
    return query, params


def read_audit_log(conninfo: str, where: AuditFilter) -> Iterator[dict[str, Any]]:
    """The records matching `where`, oldest first, streamed (a year of records need not fit in memory).

    A login that is not the owner reads as the compliance role (SET ROLE, for a login granted it)."""
    query, params = _query(where)
    with _connect(conninfo, "KB_AUDIT_DATABASE_URL or DATABASE_URL") as conn:
        _become_reader(conn)
        with conn.transaction(), conn.cursor("kb_audit", row_factory=dict_row) as cursor:
            conn.execute("SET TRANSACTION READ ONLY")
            cursor.execute(query, params)
            yield from cursor


def _connect(conninfo: str, setting: str) -> psycopg.Connection:
    """A connection, or one line naming the login that failed and the setting to check (no traceback)."""
    try:
        return psycopg.connect(conninfo, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        said = " ".join(str(exc).split())[:300] or exc.__class__.__name__
        raise AuditAccessError(f"cannot reach the audit log at {redact(conninfo)}: {said}; check {setting}") from None


def _become_reader(conn: psycopg.Connection) -> None:
    if to_regclass_missing(conn):
        raise AuditAccessError("this database has no audit log yet: run `kb db migrate`")
    row = conn.execute(
        """SELECT has_table_privilege('kb.audit_log', 'SELECT'),
                  pg_has_role(current_user, %(role)s, 'SET') AND NOT pg_has_role(current_user, %(role)s, 'USAGE')""",
        {"role": COMPLIANCE_ROLE},
    ).fetchone()
    may_select, must_switch = row if row else (False, False)
    if must_switch:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(COMPLIANCE_ROLE)))
    elif not may_select:
        user = conn.info.user
        raise AuditAccessError(
            f"login {user!r} may not read the audit log: use the owner's DATABASE_URL, or set "
            f"KB_AUDIT_DATABASE_URL to a login granted {COMPLIANCE_ROLE}"
        )


def to_regclass_missing(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT to_regclass('kb.audit_log') IS NULL").fetchone()
    return bool(row and row[0])


def prune_audit_log(owner_conninfo: str, older_than: timedelta, *, operator: str) -> int:
    """Remove records older than `older_than` (owner only); record the prune itself; return how many."""
    with _connect(owner_conninfo, "DATABASE_URL") as conn:
        if to_regclass_missing(conn):
            raise AuditAccessError("this database has no audit log yet: run `kb db migrate`")
        try:
            with conn.transaction():
                row = conn.execute("SELECT kb.prune_audit_log(%s)", (older_than,)).fetchone()
                removed = int(row[0]) if row else 0
                conn.execute(
                    """INSERT INTO kb.audit_log (caller, role, transport, kind, operation, arguments, result_count,
                                                 outcome, duration_ms)
                       VALUES (%s, current_user, 'cli', 'maintenance', 'audit prune', %s, %s, 'ok', 0)""",
                    (operator, Jsonb({"older_than_days": older_than.days}), removed),
                )
        except psycopg.errors.InsufficientPrivilege as exc:
            raise AuditAccessError(
                f"login {conn.info.user!r} may not prune the audit log: only the owner (DATABASE_URL) may ({exc})"
            ) from None
        except psycopg.errors.RaiseException as exc:
            raise AuditAccessError(str(exc.diag.message_primary)) from None
    return removed
