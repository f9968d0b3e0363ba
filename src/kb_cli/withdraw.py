"""`kb withdraw DOC_CODE`: take a document out of the knowledge base by its code."""

from __future__ import annotations

import typer

from kb_cli.common import console, err, friendly_errors, settings_or_exit


@friendly_errors
def withdraw(doc_code: str = typer.Argument(..., help="For example CMP-SOP-004.")) -> None:
    """Withdraw every version of a document now (its file, if still in the corpus, would bring it back)."""
    import psycopg

    from ingest.withdrawals import withdraw_document
    from kb_cli.prepare import prepare_database

    settings = settings_or_exit()
    code = doc_code.strip().upper()
    targets = prepare_database(settings)
    with psycopg.connect(targets.ingest, autocommit=True) as conn:
        withdrawn = withdraw_document(conn, code, retention_days=settings.aws.withdrawn_retention_days)
    if not withdrawn:
        err.print(f"[bold red]error:[/] no stored document {code} (`kb db status` counts what is stored)")
        raise typer.Exit(1)
    versions = ", ".join(f"v{version}" for _, version in withdrawn)
    console.print(
        f"withdrew {code} ({versions}); delete its file from the corpus folder too, or the next upload brings it back",
        highlight=False,
    )
