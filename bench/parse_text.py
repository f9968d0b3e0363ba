"""Parse throughput of the text formats (`python -m bench --parts parse_text`): MB/s for Markdown and HTML,
operations/s for OpenAPI, at sizes up to the file limit, plus the shapes that used to be quadratic (a list or
quote per few lines, 30k repeated subsection names, a 10 MB base64 data-URI line, 100k headings). Each file is
generated here, parsed and chunked in this process (parse_document then chunk_document, as the worker does)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ingest.chunker import chunk_document
from ingest.parsers import parse_document

MB = 1_000_000
REPO = Path(__file__).resolve().parents[1]
FRONT_MATTER = (
    '---\ndoc_code: CMP-SOP-990\ntitle: Throughput Procedure\nversion: "1.0"\nstatus: effective\n'
    "effective_date: 2026-01-01\nowner: Bench Owner\ndepartment: compliance\nclassification: internal\n"
    "regulatory_refs: []\n---\n\n# Throughput Procedure\n\n"
)
CONTROL = (
    '<dl class="document-control"><dt>Doc code</dt><dd>CMP-SOP-990</dd><dt>Title</dt><dd>Throughput Procedure</dd>'
    "<dt>Version</dt><dd>1.0</dd><dt>Status</dt><dd>effective</dd><dt>Effective date</dt><dd>2026-01-01</dd>"
    "<dt>Owner</dt><dd>Bench Owner</dd><dt>Department</dt><dd>compliance</dd><dt>Classification</dt>"
    "<dd>internal</dd><dt>Regulatory refs</dt><dd>none</dd></dl>"
)


def _repeat_to(size: int, unit: Callable[[int], str]) -> str:
    parts, total, n = [], 0, 0
    while total < size:
        text = unit(n)
        parts.append(text)
        total += len(text.encode())
        n += 1
    return "".join(parts)


def markdown_mixed(size: int) -> bytes:
    """Sections of prose, a list, a quote, a table and a code block: a list or quote every ~30 lines."""

    def section(n: int) -> str:
        return (
            f"## {n}. Control {n}\n\nThe analyst records the decision on case {n} and the reason for it, then "
            f"escalates breaks above ${n},000 to the Treasury Operations Lead within two business hours.\n\n"
            f"- Check the ledger entry {n}\n- Confirm the counterparty\n  - and its account\n\n"
            f"> Note {n}: exceptions need a second approver.\n\n"
            f"| Rule | Threshold |\n| --- | --- |\n| R{n} | ${n},000 |\n| S{n} | {n} days |\n\n"
            f"```\nreconcile(case={n}, window={n % 30})\n```\n\n"
        )

    return (FRONT_MATTER + _repeat_to(size, section)).encode()


def markdown_repeated_subsections(count: int) -> bytes:
    return (FRONT_MATTER + "".join(f"## {n}. Item {n}\n\n### Details\n\nText {n}.\n\n" for n in range(count))).encode()


def markdown_data_uri(size: int) -> bytes:
    blob = "QUJD" * (size // 4)
    return (FRONT_MATTER + f"## 1. Logo\n\n![logo](data:image/png;base64,{blob})\n\n## 2. After\n\nText.\n").encode()


def markdown_headings(count: int) -> bytes:
    return (FRONT_MATTER + "".join(f"## Heading {n}\n\nLine {n}.\n\n" for n in range(count))).encode()


def html_mixed(size: int) -> bytes:
    def section(n: int) -> str:
        return (
            f'<div class="section"><h2>{n}. Control {n}</h2><p>The analyst records the decision on case {n} and '
            f"the reason for it, then escalates breaks above ${n},000 within two business hours.</p>"
            f"<ul><li>Check the ledger entry {n}</li><li>Confirm the counterparty</li></ul>"
            f"<table><tr><th>Rule</th><th>Threshold</th></tr><tr><td>R{n}</td><td>${n},000</td></tr></table>"
            f'<p style="display:none">hidden {n}</p><aside>Note {n}.</aside></div>'
        )

    head = f"<!DOCTYPE html><html><body><h1>Throughput Procedure</h1>{CONTROL}"
    return (head + _repeat_to(size, section) + "</body></html>").encode()


def openapi_spec(operations: int) -> bytes:
    paths = {}
    for n in range(operations):
        paths[f"/v1/items{n}/{{id}}"] = {
            "get": {
                "operationId": f"getItem{n}",
                "summary": f"Read item {n}",
                "tags": [f"Group {n // 50}"],
                "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {
                    "200": {
                        "description": "The item",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Item"}}},
                    }
                },
            }
        }
    spec = {
        "openapi": "3.0.3",
        "info": {
            "title": "Throughput API",
            "version": "1.0",
            "x-document-control": {
                "doc_code": "ENG-API-990",
                "status": "effective",
                "effective_date": "2026-01-01",
                "owner": "Bench Owner",
                "department": "engineering",
                "classification": "internal",
                "regulatory_refs": [],
            },
        },
        "paths": paths,
        "components": {
            "schemas": {
                "Item": {
                    "type": "object",
                    "properties": {"id": {"type": "string"}, "amount": {"type": "integer", "description": "Cents"}},
                }
            }
        },
    }
    return json.dumps(spec).encode()


def _reset_peak_rss() -> float | None:
    """This process's resident MB now, with its high-water mark reset to it (Linux 4.0+; None elsewhere)."""
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return _status_mb("VmRSS")
    except OSError:
        return None


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise OSError(f"no {field} in /proc/self/status")


def measure(data: bytes, name: str) -> dict[str, Any]:
    before = _reset_peak_rss()
    started, cpu = time.perf_counter(), time.process_time()
    document = parse_document(data, name, max_bytes=30 * MB)
    parsed = time.perf_counter()
    chunks = chunk_document(document)
    done = time.perf_counter()
    return {
        "bytes": len(data),
        "parse_s": round(parsed - started, 3),
        "chunk_s": round(done - parsed, 3),
        "total_s": round(done - started, 3),
        # The CPU time this process had: on 2 shared cores the wall time also counts the other processes' turns.
        "cpu_s": round(time.process_time() - cpu, 3),
        "mb_per_s": round(len(data) / MB / max(done - started, 1e-9), 2),
        "parse_mb_per_s": round(len(data) / MB / max(parsed - started, 1e-9), 2),
        "chunks": len(chunks),
        # What parsing and chunking added to the process at their peak (the file's bytes were already in it).
        "peak_mb": None if before is None else round(_status_mb("VmHWM") - before, 1),
    }


TARGETS = {  # case -> seconds (issue 20): parse and chunk, on this machine's 2 cores
    "Markdown, mixed, 24 MB": 10.0,
    "Markdown, 30,000 repeated subsection names": 5.0,
}


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return done.stdout.strip()


def run(*, quick: bool = False) -> dict[str, Any]:
    """Each case once, in this process; sizes up to the 25 MiB file limit (KB_MAX_FILE_BYTES)."""
    sizes = [200_000] if quick else [1 * MB, 6 * MB, 24 * MB]
    scale = 100 if quick else 1
    cases: list[tuple[str, str, Callable[[], bytes]]] = []
    for size in sizes:
        cases.append((f"Markdown, mixed, {size // MB or size / MB:g} MB", "x.md", partial(markdown_mixed, size)))
    for size in sizes:
        cases.append((f"HTML, mixed, {size // MB or size / MB:g} MB", "x.html", partial(html_mixed, size)))
    cases += [
        (
            f"Markdown, {30_000 // scale:,} repeated subsection names",
            "x.md",
            lambda: markdown_repeated_subsections(30_000 // scale),
        ),
        (
            f"Markdown, a {10 // scale if not quick else 0.1:g} MB base64 data-URI line",
            "x.md",
            lambda: markdown_data_uri(10 * MB // scale),
        ),
        (f"Markdown, {100_000 // scale:,} headings", "x.md", lambda: markdown_headings(100_000 // scale)),
    ]
    # The machine is shared: its load when the part starts says how far to trust the seconds.
    results: dict[str, Any] = {"cases": [], "openapi": [], "load_average": round(os.getloadavg()[0], 1)}
    for label, name, make in cases:
        data = make()
        print(f"parse throughput: {label} ...", flush=True)
        results["cases"].append({"case": label, **measure(data, name)})
    for operations in [50] if quick else [1_000, 10_000, 60_000]:
        data = openapi_spec(operations)
        print(f"parse throughput: OpenAPI, {operations:,} operations ...", flush=True)
        measured = measure(data, "x.json")
        measured["operations_per_s"] = round(operations / max(measured["total_s"], 1e-9))
        results["openapi"].append({"operations": operations, **measured})
    return results


def render(r: dict[str, Any] | None) -> list[str]:
    if not r:
        return []
    lines = [
        "## Parse throughput: Markdown, HTML, OpenAPI",
        "",
        f"By `{r.get('command', 'python -m bench --parts parse_text')}`, commit {r.get('commit', '?')}. Each file "
        "is generated, then parsed (`parse_document`) and chunked (`chunk_document`, token counts included) in "
        "one process, once, under `nice -n 10` beside other work on the 2 cores"
        + (f" (load average {r['load_average']} when it started)" if "load_average" in r else "")
        + "; the first case also loads the tokenizer (~0.5 s).",
        "",
        "CPU s is the processor time the process itself used (what the seconds would be with a core to itself).",
        "",
        "Peak MB is what parsing and chunking added to the process's resident memory at their peak.",
        "",
        "| case | size MB | parse s | chunk s | total s | CPU s | parse MB/s | total MB/s | chunks | peak MB "
        "| target (total) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in r["cases"]:
        target = TARGETS.get(c["case"])
        verdict = "–" if target is None else f"≤ {target:g} s: " + ("met" if c["total_s"] <= target else "**missed**")
        lines.append(
            f"| {c['case']} | {c['bytes'] / MB:.1f} | {c['parse_s']:.2f} | {c['chunk_s']:.2f} | {c['total_s']:.2f} | "
            + (f"{c['cpu_s']:.2f} | " if "cpu_s" in c else "– | ")
            + f"{c['parse_mb_per_s']:.2f} | {c['mb_per_s']:.2f} | {c['chunks']:,} | {c.get('peak_mb') or '–'} | "
            + f"{verdict} |"
        )
    lines += ["", "| OpenAPI (JSON) operations | size MB | parse s | chunk s | operations/s |", "|---|---|---|---|---|"]
    for o in r["openapi"]:
        lines.append(
            f"| {o['operations']:,} | {o['bytes'] / MB:.1f} | {o['parse_s']:.2f} | {o['chunk_s']:.2f} | "
            f"{o['operations_per_s']:,} |"
        )
    return [*lines, ""]
