"""`kb withdraw DOC_CODE`: take a document out of the knowledge base by its code."""

from __future__ import annotations

import typer

from kb_cli.common import console, err, friendly_errors, settings_or_exit


@friendly_errors
def withdraw(doc_code: str = typer.Argument(..., help="For example CMP-SOP-004.")) -> None:
    """Withdraw every version of a document now (its file, ingested again, brings it back)."""
    import psycopg

    from ingest.withdrawals import stored_versions, withdraw_document
    from kb_cli.prepare import prepare_database
    from kb_core.departments import DOC_CODE
    from kb_core.words import counted

    settings = settings_or_exit()
    code = doc_code.strip().upper()
    if not DOC_CODE.match(code):
        err.print(f"[bold red]error:[/] {doc_code!r} is not a doc code: use one such as CMP-SOP-004", highlight=False)
        raise typer.Exit(2)
    targets = prepare_database(settings, login="ingest")
    with psycopg.connect(targets.ingest, autocommit=True) as conn:
        withdrawn = withdraw_document(conn, code, retention_days=settings.aws.withdrawn_retention_days)
        stored = stored_versions(conn, code) if not withdrawn else 0
    if not withdrawn:
        if stored:
            versions = counted(stored, "stored version")
            err.print(f"{code} is already withdrawn ({versions}, every one withdrawn): nothing to do", highlight=False)
            return
        err.print(f"[bold red]error:[/] no stored document {code} (`kb db status` counts what is stored)")
        raise typer.Exit(1)
    versions = ", ".join(f"v{version}" for _, version in withdrawn)
    # The bucket still holds its file: only ingesting that file again brings the document back.
    console.print(
        f"withdrew {code} ({versions}); an upload leaves its file in the bucket alone while it is unchanged, but "
        "the next `make run` starts with an empty bucket and ingests it again: delete the file from the corpus "
        "folder to keep it out",
        highlight=False,
        soft_wrap=True,
    )
