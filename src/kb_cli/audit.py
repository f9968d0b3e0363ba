"""`kb audit ...`: the retrieval audit log, read by compliance staff and pruned by the operator."""

from __future__ import annotations

import csv
import json
import sys
from datetime import UTC, datetime
from typing import Any

import typer

from kb_cli.common import err, friendly_errors, role_or_exit, settings_or_exit
from kb_core.departments import DOC_CODE

app = typer.Typer(
    invoke_without_command=True,
    help="The retrieval audit log: every tool call and resource read (compliance role and owner only).",
)


def _moment(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        err.print(f"[bold red]error:[/] {option} {value!r} is not a date: use 2026-01-31 or 2026-01-31T09:00:00Z")
        raise typer.Exit(2) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _csv_value(value: Any) -> Any:
    if isinstance(value, bool):  # as the JSON lines write it, not Python's True/False
        return "true" if value else "false"
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _json_value(value: Any) -> Any:
    """ISO 8601 ('2026-12-06T03:48:12.256057+00:00'), as the CSV writes it; str() put a space for the T."""
    return value.isoformat() if isinstance(value, datetime) else str(value)


@app.callback()
@friendly_errors
def audit(
    ctx: typer.Context,
    caller: str | None = typer.Option(None, help="Only this caller (a token's name, or KB_STDIO_CALLER)."),
    role: str | None = typer.Option(None, help="Only calls made as this role."),
    doc: str | None = typer.Option(None, help="Only calls that named or cited this doc code, e.g. CMP-SOP-004."),
    since: str | None = typer.Option(None, help="From this time on (ISO date or time; UTC when no zone)."),
    until: str | None = typer.Option(None, help="Before this time."),
    output: str = typer.Option("jsonl", "--format", help="jsonl (one JSON object a line) or csv."),
    limit: int | None = typer.Option(None, min=1, help="At most this many records (oldest first)."),
    flagged: bool = typer.Option(
        False, "--flagged", help="Only answers that carried a chunk flagged as looking like instructions to an AI."
    ),
) -> None:
    """Print audit records, oldest first, as JSON lines or CSV. Reads as the owner (DATABASE_URL), or as
    KB_AUDIT_DATABASE_URL's login when set (one granted compliance_officer)."""
    if ctx.invoked_subcommand is not None:
        return
    from kb_core.db.audit_log import COLUMNS, AuditAccessError, AuditFilter, read_audit_log

    if output not in ("jsonl", "csv"):
        err.print(f"[bold red]error:[/] --format must be jsonl or csv, not {output!r}")
        raise typer.Exit(2)
    if role is not None:
        role = role_or_exit(role).value
    if doc is not None and not DOC_CODE.match(doc.strip().upper()):
        # a filter that can match nothing would print nothing, which reads as "no such calls"
        err.print(f"[bold red]error:[/] --doc {doc!r} is not a doc code: the form is DEP-TYP-NNN, e.g. CMP-SOP-004")
        raise typer.Exit(2)
    where = AuditFilter(caller, role, doc, _moment(since, "--since"), _moment(until, "--until"), limit, flagged)
    settings = settings_or_exit()
    if settings.audit.reader_url is not None:
        conninfo = settings.audit.reader_url.get_secret_value()
    else:
        from kb_core.db.targets import MissingLogin, resolve_database

        try:
            conninfo = resolve_database(settings.database).owner
        except MissingLogin:
            # The owner is DATABASE_URL's fallback; the setting made for reading the log is the one to name.
            err.print(
                "[bold red]error:[/] kb audit reads the log as a login granted compliance_officer: set "
                "KB_AUDIT_DATABASE_URL (or DATABASE_URL, the owner)",
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(2) from None
    writer = csv.DictWriter(sys.stdout, fieldnames=COLUMNS) if output == "csv" else None
    if writer is not None:
        writer.writeheader()
    written = 0
    try:
        for record in read_audit_log(conninfo, where):
            written += 1
            if writer is not None:
                writer.writerow({k: _csv_value(v) for k, v in record.items()})
            else:
                sys.stdout.write(json.dumps(record, default=_json_value, ensure_ascii=False) + "\n")
    except AuditAccessError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2) from None
    if not written:
        # On stderr: stdout stays the records alone (none), for a script that reads them.
        err.print("no audit records match", highlight=False)


@app.command("prune")
@friendly_errors
def prune(
    older_than: str | None = typer.Option(
        None, help="Remove records older than this: 365d, 52w or 7y (default KB_AUDIT_RETENTION_DAYS)."
    ),
) -> None:
    """Remove audit records past their retention (the owner's login only); the prune is itself recorded."""
    from datetime import timedelta

    from kb_core.db.audit_log import AuditAccessError, parse_age, prune_audit_log
    from kb_core.db.targets import resolve_database
    from kb_core.settings import default_stdio_caller

    settings = settings_or_exit()
    try:
        age = parse_age(older_than) if older_than else timedelta(days=settings.audit.retention_days)
    except ValueError as exc:
        err.print(f"[bold red]error:[/] --older-than: {exc}", highlight=False)
        raise typer.Exit(2) from None
    owner = resolve_database(settings.database).owner
    try:
        removed = prune_audit_log(owner, age, operator=default_stdio_caller())
    except AuditAccessError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2) from None
    err.print(f"removed {removed} audit records older than {age.days} days", highlight=False)
