"""Parse throughput: generated files at the sizes the issue's targets name, each parsed by `parse_document`
(the worker's path: size checks, the parser, the section checks) in its own process, so its peak memory
is its own. Targets: a 2,000-page text PDF in 60 s, 20,000 DOCX paragraphs in 10 s.

    python -m bench --parts parse      # this part alone, merged into bench/results.json and results.md
"""

from __future__ import annotations

import io
import multiprocessing
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

FIELDS = {
    "Doc code": "PAY-REF-990",
    "Title": "Settlement Ledger",
    "Version": "1.0",
    "Status": "effective",
    "Effective date": "2026-01-01",
    "Owner": "Payments Operations Lead",
    "Department": "payments",
    "Classification": "internal",
    "Regulatory refs": "none",
}
SENTENCE = "the reconciliation break is escalated to the Treasury Operations Lead within two business hours"


def _title_and_header_block(page: Any, y: float) -> float:
    """Page 1's title and header block at `y`; returns where the body starts."""
    page.insert_text((72, y), FIELDS["Title"], fontsize=20, fontname="hebo")
    block = "\n".join(["Document control", *(f"{k}: {v}" for k, v in FIELDS.items())])
    page.insert_text((72, y + 30), block, fontsize=10, fontname="helv", lineheight=1.5)
    return y + 30 + 15 * 11


def text_pdf(pages: int) -> bytes:
    """A ledger-like text PDF: the header block on page 1, a bold numbered heading every 10 pages, a running
    header with the page number, and 44 lines of body text a page."""
    import pymupdf

    document = pymupdf.open()
    for number in range(pages):
        page = document.new_page()
        page.insert_text((72, 36), f"Settlement Ledger - Page {number + 1}", fontsize=8, fontname="helv")
        y = 72.0
        if number == 0:
            y = _title_and_header_block(page, y)
        if number % 10 == 0:
            page.insert_text((72, y), f"{number // 10 + 1}. Month {number // 10 + 1}", fontsize=14, fontname="hebo")
            y += 24
        rows = (770 - y) // 15
        body = "\n".join(f"Entry {number * 44 + k}: on day {k % 28 + 1} {SENTENCE}." for k in range(int(rows)))
        page.insert_text((72, y), body, fontsize=10, fontname="helv", lineheight=1.5)
    return document.tobytes()


def ruled_pdf(pages: int) -> bytes:
    """A PDF of ruled tables: each page a heading, three lines of notes and a grid of up to 20 x 4 stroked
    cells with text."""
    import pymupdf

    document = pymupdf.open()
    for number in range(pages):
        page = document.new_page()
        y = 72.0
        if number == 0:
            y = _title_and_header_block(page, y)
        page.insert_text((72, y), f"{number + 1}. Limits table {number + 1}", fontsize=14, fontname="hebo")
        body = "\n".join(f"Note {k}: {SENTENCE}." for k in range(3))
        page.insert_text((72, y + 20), body, fontsize=10, fontname="helv", lineheight=1.5)
        y += 20 + 15 * 3
        for r in range(min(20, int((800 - y) // 24))):
            for c in range(4):
                box = pymupdf.Rect(72 + 115 * c, y + 24 * r, 187 + 115 * c, y + 24 * (r + 1))
                page.draw_rect(box, color=(0, 0, 0), width=0.5)
                page.insert_text((box.x0 + 3, box.y1 - 8), f"Desk {r}-{c} {number}", fontsize=9, fontname="helv")
    return document.tobytes()


def docx_file(paragraphs: int) -> bytes:
    """A .docx of `paragraphs` body paragraphs with a Heading 1 every 50, the header block as the first table."""
    import docx

    document = docx.Document()
    document.add_heading(FIELDS["Title"], level=0)
    table = document.add_table(rows=0, cols=2)
    for label, value in FIELDS.items():
        cells = table.add_row().cells
        cells[0].text, cells[1].text = label, value
    for n in range(paragraphs):
        if n % 50 == 0:
            document.add_heading(f"{n // 50 + 1}. Section {n // 50 + 1}", level=1)
        document.add_paragraph(f"Paragraph {n}: {SENTENCE}.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


@dataclass
class Case:
    format: str
    shape: str
    units: int
    unit: str
    target_s: float | None
    make: Callable[[int], bytes]
    name: str


def cases(quick: bool) -> list[Case]:
    return [
        Case("PDF", "text", 20 if quick else 2_000, "pages", None if quick else 60.0, text_pdf, "ledger.pdf"),
        Case("PDF", "ruled tables", 5 if quick else 200, "pages", None, ruled_pdf, "limits.pdf"),
        Case(
            "DOCX", "paragraphs", 200 if quick else 20_000, "paragraphs", None if quick else 10.0, docx_file, "a.docx"
        ),
        # Toward the file limits: a text PDF of ~10 MB (KB_MAX_FILE_BYTES is 25 MiB), a DOCX whose XML comes
        # near its decompressed budget (KB_MAX_DECOMPRESSED_BYTES, 32 MiB); no target, the rate is the point.
        Case("PDF", "text", 40 if quick else 10_000, "pages", None, text_pdf, "ledger.pdf"),
        Case("DOCX", "paragraphs", 400 if quick else 100_000, "paragraphs", None, docx_file, "a.docx"),
    ]


def _parse_in_child(data: bytes, name: str, queue: Any) -> None:
    import ingest.parsers.docx
    import ingest.parsers.pdf  # noqa: F401  (imported before the clock starts: a worker has them loaded)
    from ingest.parsers import parse_document

    try:
        started = time.perf_counter()
        document = parse_document(data, name, max_bytes=25 * 1024 * 1024)
        seconds = time.perf_counter() - started
        queue.put((seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, len(document.blocks)))
    except Exception as exc:  # the parent reports it instead of waiting for ever
        queue.put(f"{exc.__class__.__name__}: {exc}")


def parse_benchmark(quick: bool) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")  # a fresh process: its peak memory is this parse's
    measured = []
    for case in cases(quick):
        print(f"parse: {case.format} {case.shape}, {case.units:,} {case.unit} ...", flush=True)
        data = case.make(case.units)
        queue = context.Queue()
        child = context.Process(target=_parse_in_child, args=(data, case.name, queue))
        child.start()
        outcome = queue.get()
        child.join()
        if isinstance(outcome, str):
            raise RuntimeError(f"{case.format} {case.shape} did not parse: {outcome}")
        seconds, peak_mb, blocks = outcome
        row = {k: v for k, v in asdict(case).items() if k not in ("make", "name")}
        row.update(
            megabytes=round(len(data) / 1e6, 2),
            seconds=round(seconds, 2),
            per_second=round(case.units / seconds, 1),
            peak_mb=round(peak_mb),
            blocks=blocks,
        )
        measured.append(row)
    return {"cases": measured}


def render(p: dict[str, Any] | None) -> list[str]:
    if not p:
        return []
    lines = [
        "## Parse throughput",
        "",
        "Generated files (`bench/parse.py`), each parsed by `parse_document` in a fresh process; peak memory is "
        "that process's maximum RSS (Python and the parser libraries included). "
        + (f"By `{p['command']}`, commit {p['commit']}." if "command" in p else ""),
        "",
        "| format | shape | size | file MB | seconds | per second | target | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in p["cases"]:
        if c["target_s"] is None:
            target = "–"
        else:
            target = f"≤ {c['target_s']:.0f} s: " + ("met" if c["seconds"] <= c["target_s"] else "**missed**")
        lines.append(
            f"| {c['format']} | {c['shape']} | {c['units']:,} {c['unit']} | {c['megabytes']} | {c['seconds']} | "
            f"{c['per_second']:,} {c['unit']}/s | {target} | {c['peak_mb']} |"
        )
    return [*lines, ""]


def splice(markdown: str, section: list[str]) -> str:
    """results.md with its parse-throughput section replaced, or put before the server-memory section: the
    rest of the file, notes added to it included, stays as it is."""
    lines = markdown.split("\n")
    start = next((i for i, line in enumerate(lines) if line == section[0]), None)
    if start is None:
        at = next((i for i, line in enumerate(lines) if line == "## MCP server memory"), len(lines))
        return "\n".join([*lines[:at], *section, *lines[at:]])
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "\n".join([*lines[:start], *section, *lines[end:]])
