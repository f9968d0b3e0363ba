"""tools/corpus/build.py: deterministic PDF/DOCX builds whose header block and structure parsers can read."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

docx = pytest.importorskip("docx")
pymupdf = pytest.importorskip("pymupdf")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "corpus" / "build.py"

FRONT_MATTER = """---
doc_code: {code}
title: Sanctions Screening Procedure
version: "3.10"
status: effective
effective_date: 2026-02-01
owner: Head of Sanctions Compliance
department: compliance
classification: confidential
regulatory_refs:
  - 31 CFR 501
  - OFAC Framework
---
"""
BODY = """
# Sanctions Screening Procedure

## 1. Purpose

This procedure sets out how **Kosha Financial** screens customers against the *OFAC SDN list* using
`screening-svc`. The first office must override the hold only with CCO approval.

### 1.1 Steps

1. Screen the customer.
2. Review the match.

- Escalate true matches.

#### 1.1.1 Escalation matrix

| Level | Owner | Deadline |
|---|---|---|
| L1 | Sanctions analyst on duty | 4 business hours |
| L2 | Sanctions lead | 1 business day |
| L3 | Run `rescreen` now | same day |

```
kosha-screening refresh-lists
```
"""
LABELS = [
    "Doc code",
    "Title",
    "Version",
    "Status",
    "Effective date",
    "Owner",
    "Department",
    "Classification",
    "Regulatory refs",
]


def run_build(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The sample sources built twice, into two separate output directories."""
    root = tmp_path_factory.mktemp("build")
    sources = root / "sources"
    sources.mkdir()
    (sources / "CMP-SOP-003.docx.md").write_text(FRONT_MATTER.format(code="CMP-SOP-003") + BODY)
    (sources / "CMP-SOP-006.pdf.md").write_text(FRONT_MATTER.format(code="CMP-SOP-006") + BODY)
    outs = []
    for name in ("out1", "out2"):
        result = run_build("--sources", str(sources), "--out", str(root / name))
        assert result.returncode == 0, result.stderr
        outs.append(root / name)
    return sources, outs[0], outs[1]


def test_builds_are_byte_identical(built: tuple[Path, Path, Path]) -> None:
    _, first, second = built
    names = sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file())
    assert names == ["MANIFEST.csv", "compliance/CMP-SOP-003.docx", "compliance/CMP-SOP-006.pdf"]
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_manifest_rows(built: tuple[Path, Path, Path]) -> None:
    rows = list(csv.DictReader((built[1] / "MANIFEST.csv").open()))
    assert [r["path"] for r in rows] == [
        "corpus/compliance/CMP-SOP-003.docx",
        "corpus/compliance/CMP-SOP-006.pdf",
    ]
    assert rows[1]["format"] == "pdf" and rows[1]["version"] == "3.10" and len(rows[1]["sha256"]) == 64


def test_docx_control_table_first_then_headings(built: tuple[Path, Path, Path]) -> None:
    document = docx.Document(str(built[1] / "compliance" / "CMP-SOP-003.docx"))
    body = [child.tag.rsplit("}", 1)[1] for child in document.element.body]
    assert body[:2] == ["p", "tbl"]
    assert document.paragraphs[0].style.name == "Title"
    rows = document.tables[0].rows
    assert rows[0].cells[0].text == "Document control"
    assert [r.cells[0].text for r in rows[1:]] == LABELS
    assert rows[1].cells[1].text == "CMP-SOP-003"
    assert rows[3].cells[1].text == "3.10"
    assert rows[9].cells[1].text == "31 CFR 501; OFAC Framework"
    styles = {p.text: p.style.name for p in document.paragraphs}
    assert styles["1. Purpose"] == "Heading 1"
    assert styles["1.1 Steps"] == "Heading 2"
    assert styles["1.1.1 Escalation matrix"] == "Heading 3"
    assert styles["Screen the customer."] == "List Number"
    assert styles["Escalate true matches."] == "List Bullet"
    assert styles["kosha-screening refresh-lists"] == "Code"
    grid = document.tables[1]
    assert grid.style.name == "Table Grid"
    assert [c.text for c in grid.rows[1].cells] == ["L1", "Sanctions analyst on duty", "4 business hours"]
    assert all(run.bold for c in grid.rows[0].cells for run in c.paragraphs[0].runs)


def test_pdf_header_headings_and_table(built: tuple[Path, Path, Path]) -> None:
    pdf = pymupdf.open(str(built[1] / "compliance" / "CMP-SOP-006.pdf"))
    page = pdf[0]
    lines = page.get_text().splitlines()
    assert lines[:3] == ["Sanctions Screening Procedure", "Document control", "Doc code: CMP-SOP-006"]
    assert [line.split(":")[0] for line in lines[2:11]] == LABELS
    assert "first office" in page.get_text()  # no ligature glyphs

    spans = [s for b in page.get_text("dict")["blocks"] for ln in b["lines"] for s in ln["spans"]]
    size_of = {s["text"].strip(): (round(s["size"], 1), bool(s["flags"] & 16)) for s in spans}
    body_size = size_of["Doc code: CMP-SOP-006"]
    assert size_of["Sanctions Screening Procedure"] == (20.0, True)
    assert size_of["1. Purpose"] == (15.0, True)
    assert size_of["1.1 Steps"] == (12.5, True)
    assert size_of["1.1.1 Escalation matrix"] == (11.0, True)
    assert body_size == (10.0, False)
    assert [entry[:2] for entry in pdf.get_toc()] == [
        [1, "1. Purpose"],
        [2, "1.1 Steps"],
        [3, "1.1.1 Escalation matrix"],
    ]

    tables = page.find_tables().tables
    assert len(tables) == 1
    assert tables[0].extract() == [
        ["Level", "Owner", "Deadline"],
        ["L1", "Sanctions analyst on duty", "4 business hours"],
        ["L2", "Sanctions lead", "1 business day"],
        ["L3", "Run rescreen now", "same day"],
    ]
    assert "|L3|Run `rescreen` now|same day|" in tables[0].to_markdown()  # spaces kept around the code span


def test_check_reports_a_stale_binary(built: tuple[Path, Path, Path], tmp_path: Path) -> None:
    sources, first, _ = built
    corpus = tmp_path / "corpus"
    (corpus / "compliance").mkdir(parents=True)
    for path in first.rglob("*.*"):
        (corpus / path.relative_to(first)).write_bytes(path.read_bytes())
    assert run_build("--sources", str(sources), "--out", str(corpus), "--check").returncode == 0
    (corpus / "compliance" / "CMP-SOP-006.pdf").write_bytes(b"%PDF-1.7 stale")
    result = run_build("--sources", str(sources), "--out", str(corpus), "--check")
    assert result.returncode == 1
    assert "CMP-SOP-006.pdf" in result.stderr and "CMP-SOP-003.docx" not in result.stderr
    (corpus / "MANIFEST.csv").write_text("path\n")
    result = run_build("--sources", str(sources), "--out", str(corpus), "--check")
    assert "MANIFEST.csv" in result.stderr


def test_missing_header_field_names_file_and_field(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "risk").mkdir(parents=True)
    text = FRONT_MATTER.format(code="RSK-SOP-002").replace("department: compliance", "department: risk")
    (corpus / "risk" / "RSK-SOP-002.md").write_text(text.replace("owner: Head of Sanctions Compliance\n", ""))
    (corpus / "risk" / "RSK-REF-006.html").write_text(
        '<dl class="document-control"><dt>Doc code</dt><dd>RSK-REF-006</dd></dl><h2>1. Limits</h2>'
    )
    result = run_build("--sources", str(tmp_path / "none"), "--out", str(corpus))
    assert result.returncode == 1
    assert "RSK-REF-006.html" in result.stderr and "'title'" in result.stderr
    (corpus / "risk" / "RSK-REF-006.html").unlink()
    result = run_build("--sources", str(tmp_path / "none"), "--out", str(corpus))
    assert "RSK-SOP-002.md" in result.stderr and "'owner'" in result.stderr
