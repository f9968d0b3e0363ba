"""Ingestion progress where no bar can be drawn (make run > log, a service's journal)."""

from __future__ import annotations

import io

from rich.console import Console

from ingest.pipeline import IngestResult
from kb_cli.ingest_report import progress_bar


def test_without_a_terminal_progress_is_a_line_at_the_first_file_every_ten_seconds_and_at_the_last(monkeypatch):
    # A log read while `make run > log` ingested showed nothing until the summary, about 150 s later.
    now = [100.0]
    monkeypatch.setattr("kb_cli.ingest_report.time.monotonic", lambda: now[0])
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    outcomes = ["ingested", "unchanged", "failed", "ingested", "ingested"]
    with progress_bar(console, total=5) as advance:
        for n, outcome in enumerate(outcomes):
            now[0] += 4.0  # files 4 s apart: a line at the first, then 10 s on (the fourth), then the last
            advance(IngestResult(f"s3://bucket/doc-{n}.md", outcome))
    lines = out.getvalue().splitlines()
    assert lines == [
        "ingesting: 1/5 files (1 ingested, 0 unchanged) · 4 s · last doc-0.md",
        "ingesting: 4/5 files (2 ingested, 1 unchanged, 1 failed) · 16 s · last doc-3.md",
        "ingesting: 5/5 files (3 ingested, 1 unchanged, 1 failed) · 20 s · last doc-4.md",
    ]
