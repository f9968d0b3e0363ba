"""How an ingestion run looks to a person: a progress bar, then a summary with counts and reasons."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ingest.embedding_parts import EmbeddingProgress, Report
from ingest.parsers import FORMATS
from ingest.pipeline import IngestResult
from kb_core.words import counted

# Without a terminal (make run > log, a service's journal) a bar draws nothing: a line this often instead.
PLAIN_PROGRESS_EVERY_S = 10.0


@contextmanager
def progress_bar(console: Console, total: int) -> Iterator[Callable[[IngestResult], None]]:
    if not console.is_terminal:
        with plain_progress(console, total) as advance:
            yield advance
        return
    progress = Progress(
        TextColumn("[bold]ingesting"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
        transient=True,
    )
    with progress:
        task = progress.add_task("", total=total)

        def advance(result: IngestResult) -> None:
            progress.update(task, advance=1, description=result.source_uri.rsplit("/", 1)[-1])

        yield advance


@contextmanager
def plain_progress(console: Console, total: int) -> Iterator[Callable[[IngestResult], None]]:
    """One line at the first file, then at most one each PLAIN_PROGRESS_EVERY_S and one at the last: a log
    read while ingestion runs shows it moving (it used to show nothing until the summary)."""
    started = time.monotonic()
    done = Counter[str]()
    last = [started - PLAIN_PROGRESS_EVERY_S]

    def advance(result: IngestResult) -> None:
        done[result.outcome] += 1
        now, count = time.monotonic(), sum(done.values())
        if now - last[0] >= PLAIN_PROGRESS_EVERY_S or count == total:
            last[0] = now
            failed = f", {done['failed']} failed" if done["failed"] else ""
            console.print(
                f"ingesting: {count}/{total} files ({done['ingested']} ingested, {done['unchanged']} unchanged"
                f"{failed}) · {now - started:.0f} s · last {result.source_uri.rsplit('/', 1)[-1]}",
                highlight=False,
                soft_wrap=True,
            )

    yield advance


def embedding_reporter(console: Console) -> Report:
    """A large file's embedding progress as a line (above the bar, on a terminal): minutes passed in silence."""

    def report(progress: EmbeddingProgress) -> None:
        console.print(progress.line(), highlight=False, soft_wrap=True)

    return report


def print_summary(console: Console, results: list[IngestResult], skipped: list[Path], seconds: float) -> None:
    outcomes = Counter(r.outcome for r in results)
    done = [r for r in results if r.outcome == "ingested"]
    chunks = sum(r.chunks for r in done)
    console.print(
        f"[bold]{outcomes['ingested']} ingested[/], {outcomes['unchanged']} unchanged, "
        f"[{'red' if outcomes['failed'] else 'green'}]{outcomes['failed']} failed[/]"
        f" · {counted(chunks, 'chunk')} ({sum(r.embedded for r in done)} embedded, "
        f"{sum(r.suspect_chunks for r in done)} injection-suspect) · {sum(r.tokens for r in done)} tokens "
        f"· {seconds:.1f} s",
        highlight=False,
    )
    if done:
        for label, key in (
            ("department", "department"),
            ("format", "source_format"),
            ("classification", "classification"),
            ("status", "status"),
        ):
            counts = Counter(getattr(r, key) for r in done)
            console.print(f"  by {label}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), highlight=False)
    failed = [r for r in results if r.outcome == "failed"]
    if failed:
        table = Table("file", "reason", title="failed", title_justify="left", show_lines=False)
        for r in failed:
            table.add_row(r.source_uri.rsplit("/", 1)[-1], r.reason or "")
        console.print(table)
    if skipped:
        console.print("  " + skipped_line([p.name for p in skipped]), highlight=False, soft_wrap=True)


def document_kinds() -> str:
    """The extensions ingestion reads: '.docx, .htm, .html, ...'."""
    return ", ".join(sorted(FORMATS))


def skipped_line(names: list[str]) -> str:
    """Said, not silent: a file of another type in the folder is in no answer."""
    shown = ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
    return f"skipped {counted(len(names), 'file')} of a type that is not a document ({document_kinds()}): {shown}"
