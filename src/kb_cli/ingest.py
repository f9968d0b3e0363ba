"""`kb ingest`: files straight into the database, without the queue."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from kb_cli.common import console, err, friendly_errors, settings_or_exit


@friendly_errors
def ingest(
    paths: list[Path] = typer.Argument(
        ..., help="Files or folders (folders are walked for known formats).", exists=True
    ),
) -> None:
    """Ingest files directly, without the queue: parse, chunk, scan, embed and store each one."""
    from ingest.pipeline import Ingestor, document_files, ingest_files
    from kb_cli.ingest_report import embedding_reporter, print_summary, progress_bar
    from kb_cli.prepare import prepare_database
    from kb_core.embedders import make_embedder
    from kb_core.process_memory import limit_malloc_arenas

    settings = settings_or_exit()
    files, skipped = document_files(paths)
    if not files:
        # A wrong folder said "0 ingested, 0 unchanged, 0 failed" and exited 0, as if all was well.
        from kb_cli.ingest_report import document_kinds, skipped_line

        named = ", ".join(str(p) for p in paths)
        if skipped:
            console.print(skipped_line([p.name for p in skipped]), highlight=False, soft_wrap=True)
        err.print(
            f"[bold red]error:[/] no documents in {named}: nothing to ingest (the formats are {document_kinds()})"
        )
        raise typer.Exit(2)
    targets = prepare_database(settings, login="ingest")
    started = time.perf_counter()
    limit_malloc_arenas()  # before the parse and model threads start
    embedder = make_embedder(settings.embedding, bulk=True)
    with (
        Ingestor.from_settings(targets.ingest, embedder, settings.aws, embedding_reporter(console)) as ingestor,
        progress_bar(console, len(files)) as advance,
    ):
        results = list(ingest_files(ingestor, files, on_result=advance))
    print_summary(console, results, skipped, time.perf_counter() - started)
    if any(r.outcome == "failed" for r in results):
        raise typer.Exit(1)
