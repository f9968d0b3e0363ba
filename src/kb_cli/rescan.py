"""`kb rescan`: re-flag stored chunks with the current injection scanner, without re-embedding anything."""

from __future__ import annotations

import typer

from kb_cli.common import console, err, friendly_errors, settings_or_exit


@friendly_errors
def rescan(
    everything: bool = typer.Option(
        False, "--all", help="Re-scan every chunk, not only those scanned by an older scanner version."
    ),
) -> None:
    """Re-scan stored chunks for prompt injection after the scanner changed; embeddings are left alone."""
    import psycopg

    from ingest.rescan import rescan as rescan_chunks
    from ingest.scanner import SCANNER_VERSION
    from kb_cli.prepare import writer_login_refused
    from kb_core.db.targets import resolve_database

    settings = settings_or_exit()
    targets = resolve_database(settings.database)
    try:
        conn = psycopg.connect(targets.ingest)
    except psycopg.OperationalError as exc:
        # As kb withdraw says it: the login and its setting named (not prepare_database: a rescan embeds
        # nothing, so it must not refuse a database built for another embedder). Unreachable: the usual line.
        refused = writer_login_refused(targets.ingest, exc)
        if refused is None:
            raise
        err.print(f"[bold red]error:[/] {refused}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    try:
        with conn:
            result = rescan_chunks(conn, everything=everything)
    except psycopg.errors.UndefinedColumn:
        err.print("[bold red]error:[/] the schema predates per-chunk scanner versions: run `kb db migrate` first")
        raise typer.Exit(2) from None
    except psycopg.errors.UndefinedTable:
        err.print("[bold red]error:[/] the database has no knowledge base yet: run `kb db migrate` first")
        raise typer.Exit(2) from None
    console.print(
        f"rescanned {result.scanned} chunks with scanner version {SCANNER_VERSION}: "
        f"{result.newly_flagged} newly flagged, {result.cleared} cleared, {result.rule_changed} with other rules "
        "(nothing re-embedded)",
        highlight=False,
    )
