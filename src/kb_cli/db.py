"""`kb db ...`: migrate, status, start and stop the database."""

from __future__ import annotations

import os

import typer

from kb_cli.common import console, err, friendly_errors, settings_or_exit
from kb_core.words import counted

app = typer.Typer(no_args_is_help=True, help="The database: migrate, status, start, stop.")


@app.command("migrate")
@friendly_errors
def db_migrate() -> None:
    """Apply pending migrations from sql/ (safe to run again)."""
    from kb_core.db.migrations import migrate
    from kb_core.db.targets import resolve_database
    from kb_core.embedders import embedding_space_for

    settings = settings_or_exit()
    targets = resolve_database(settings.database)
    applied = migrate(targets.owner, embedding_space_for(settings.embedding))
    if applied:
        for migration in applied:
            console.print(f"applied {migration.version:03d}_{migration.name}")
    else:
        console.print("nothing to apply: the schema is up to date")


@app.command("status")
@friendly_errors
def db_status() -> None:
    """Which database is in use, its versions, migration level and embedding model."""
    from kb_core.db.embedded import EmbeddedPostgres
    from kb_core.db.status import database_status
    from kb_core.db.targets import resolve_database
    from kb_core.departments import DOC_STATUSES

    settings = settings_or_exit()
    started_here = settings.database.embedded and not EmbeddedPostgres(settings.database.state_dir).is_running()
    status = database_status(resolve_database(settings.database))
    table = _Rows()
    # Found walking it: after `kb db stop`, this started the database and showed it healthy, without a word.
    note = " [yellow](was not running: started for this command; `kb db start` keeps it up)[/]" if started_here else ""
    table.add_row("database", status.description + note)
    table.add_row("PostgreSQL", status.postgres_version)
    table.add_row("pgvector", status.pgvector_version or "[red]not available[/]")
    table.add_row("migrations", f"{status.migration_level} of {status.latest_migration}")
    table.add_row(
        "embedding model",
        str(status.embedding_space) if status.embedding_space else "none yet (run `kb db migrate`)",
    )
    if status.embedding_space and status.contents_unread:
        table.add_row("document versions", f"[red]not read[/]: {status.contents_unread}")
    elif status.embedding_space:
        docs = status.documents_by_status
        # Each stored version counts: a document of two versions is 1 effective and 1 superseded.
        table.add_row(
            "document versions",
            f"{sum(docs.values())} (" + ", ".join(f"{docs.get(s, 0)} {s}" for s in DOC_STATUSES) + ")",
        )
        chunks = status.chunks_by_classification
        table.add_row(
            "chunks",
            f"{sum(chunks.values())} ("
            + ", ".join(f"{chunks.get(c, 0)} {c}" for c in ("public", "internal", "confidential", "restricted"))
            + ")",
        )
        table.add_row("injection scanner", _scanner_line(status.chunks_by_scanner_version))
    table.print()
    if status.contents_unread:
        raise typer.Exit(2)


def _scanner_line(by_version: dict[int, int]) -> str:
    from ingest.scanner import SCANNER_VERSION

    older = sum(n for version, n in by_version.items() if version < SCANNER_VERSION)
    line = f"version {SCANNER_VERSION}; {older} chunks scanned by an older version"
    return line + (" (run `kb rescan`)" if older else "")


class _Rows:
    """Label/value lines that never wrap or truncate, so they can be read and grepped."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str]] = []

    def add_row(self, label: str, value: str) -> None:
        self.rows.append((label, value))

    def print(self) -> None:
        width = max(len(label) for label, _ in self.rows)
        for label, value in self.rows:
            console.print(f"[bold]{label:<{width}}[/]  {value}", soft_wrap=True, highlight=False)


@app.command("start")
@friendly_errors
def db_start() -> None:
    """Start the embedded PostgreSQL and keep it running after this command exits."""
    from kb_core.db.targets import resolve_database

    settings = settings_or_exit()
    if settings.database.url is not None:
        err.print("DATABASE_URL is set: the embedded database is not used, there is nothing to start")
        raise typer.Exit(2)
    targets = resolve_database(settings.database, keep_running=True)
    console.print(f"running: {targets.description}")


def command_of(pid: int) -> str:
    """'pid 4242: kb serve --transport http', from the process's command line where it can be read (found walking
    it: the refusal named only pids and a guess, 'make run, kb serve or kb worker')."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return f"pid {pid}"
    if not argv:
        return f"pid {pid}"
    # `.venv/bin/kb up` runs as 'python .venv/bin/kb up': shown from the kb on.
    start = next((n for n, word in enumerate(argv) if os.path.basename(word) == "kb"), 0)
    return f"pid {pid}: {' '.join([os.path.basename(argv[start]), *argv[start + 1 :]])[:80]}"


@app.command("stop")
@friendly_errors
def db_stop(
    force: bool = typer.Option(False, "--force", help="Stop it even while processes (a server, a worker) use it."),
) -> None:
    """Stop the embedded PostgreSQL (refused while a running kb process holds it, unless --force)."""
    from kb_core.db.embedded import EmbeddedPostgres

    settings = settings_or_exit()
    if settings.database.url is not None:
        # As `kb db start` says: found walking it, --force stopped the embedded database under `make run`.
        err.print("DATABASE_URL is set: the embedded database is not used, there is nothing to stop")
        raise typer.Exit(2)
    server = EmbeddedPostgres(settings.database.state_dir)
    server.drop_dead_holders()
    holding = [pid for pid in server.holders() if pid != os.getpid()]
    if holding and not force:
        # Found walking it: stopped under `make run`, every tool call answered "temporarily unavailable" until
        # make run was restarted, since nothing starts the database again.
        err.print(
            f"[bold red]error:[/] the database is in use by {counted(len(holding), 'running process')} "
            f"({', '.join(map(command_of, holding))}): "
            + (
                "stop them, and the last one to exit stops the database; or pass --force to stop it under them"
                if len(holding) > 1
                else "stop it, and the database stops as it exits; or pass --force to stop it under it"
            ),
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(2)
    stopped = server.stop()
    if stopped and holding:
        console.print(
            f"stopped under {counted(len(holding), 'running process')}: they answer 'temporarily unavailable' "
            "until `kb db start` brings it back",
            highlight=False,
            soft_wrap=True,
        )
    else:
        console.print("stopped" if stopped else "it was not running")
