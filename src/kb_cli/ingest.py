"""`kb ingest`: files straight into the database, without the queue."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from kb_cli.common import console, friendly_errors, settings_or_exit


@friendly_errors
def ingest(
    paths: list[Path] = typer.Argument(
        ..., help="Files or folders (folders are walked for known formats).", exists=True
    ),
) -> None:
    """Ingest files directly, without the queue: parse, chunk, scan, embed and store each one."""
    from ingest.pipeline import Ingestor, document_files, ingest_files
    from kb_cli.ingest_report import print_summary, progress_bar
    from kb_cli.prepare import prepare_database
    from kb_core.embedders import make_embedder
    from kb_core.process_memory import limit_malloc_arenas

    settings = settings_or_exit()
    files, skipped = document_files(paths)
    targets = prepare_database(settings)
    started = time.perf_counter()
    limit_malloc_arenas()  # before the parse and model threads start
    embedder = make_embedder(settings.embedding, bulk=True)
    with (
        Ingestor.from_settings(targets.ingest, embedder, settings.aws) as ingestor,
        progress_bar(console, len(files)) as advance,
    ):
        results = list(ingest_files(ingestor, files, on_result=advance))
    print_summary(console, results, skipped, time.perf_counter() - started)
    if any(r.outcome == "failed" for r in results):
        raise typer.Exit(1)
