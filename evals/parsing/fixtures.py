"""The real-world fixture files (tests/fixtures/real_world/manifest.csv: source, licence, what is expected of
each), and the header block each is given before it is parsed, the way docs/header-block.md asks for it in
that format: public files have none, and without one every file fails the same way."""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "real_world"
MANIFEST = FIXTURES / "manifest.csv"
KINDS = {".pdf": "pdf", ".docx": "docx", ".html": "html", ".yaml": "openapi", ".json": "openapi"}

TITLE = "Real World Fixture"
FIELDS = {
    "Doc code": "ENG-REF-900",
    "Title": TITLE,
    "Version": "1.0",
    "Status": "effective",
    "Effective date": "2026-01-01",
    "Owner": "Platform Engineering",
    "Department": "engineering",
    "Classification": "public",
    "Regulatory refs": "none",
}


@dataclass(frozen=True)
class Fixture:
    file: str  # relative to FIXTURES
    repository: str
    path: str
    commit: str
    licence: str
    expect: str  # 'parsed', or a phrase the parse error must contain
    min_word_recall: float
    min_trigram_recall: float
    min_word_precision: float

    @property
    def kind(self) -> str:
        return KINDS[Path(self.file).suffix.lower()]

    def read(self) -> bytes:
        return (FIXTURES / self.file).read_bytes()


def load_manifest() -> list[Fixture]:
    with MANIFEST.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [
        Fixture(
            file=row["file"],
            repository=row["repository"],
            path=row["path"],
            commit=row["commit"],
            licence=row["licence"],
            expect=row["expect"],
            min_word_recall=float(row["min_word_recall"] or 0),
            min_trigram_recall=float(row["min_trigram_recall"] or 0),
            min_word_precision=float(row["min_word_precision"] or 0),
        )
        for row in rows
    ]


def with_header_block(kind: str, data: bytes) -> bytes:
    """The file with a header block added where docs/header-block.md puts it in its format."""
    return {"pdf": _pdf, "docx": _docx, "html": _html, "openapi": _openapi}[kind](data)


def _pdf(data: bytes) -> bytes:
    """A first page with the title in a large bold font, then 'Document control' and 'Label: value' lines.
    An encrypted file is returned as it is (it cannot be changed without its password)."""
    import pymupdf

    with pymupdf.open(stream=data, filetype="pdf") as document:
        if document.needs_pass:
            return data
        page = document.new_page(0)
        page.insert_text((72, 72), TITLE, fontsize=20, fontname="hebo")
        block = "\n".join(["Document control", *(f"{k}: {v}" for k, v in FIELDS.items())])
        page.insert_text((72, 102), block, fontsize=10, fontname="helv", lineheight=1.5)
        return document.tobytes()


def _docx(data: bytes) -> bytes:
    """A two-column table of labels and values, moved to the start of the body (before the first heading)."""
    import docx

    document = docx.Document(io.BytesIO(data))
    table = document.add_table(rows=0, cols=2)
    for label, value in FIELDS.items():
        cells = table.add_row().cells
        cells[0].text, cells[1].text = label, value
    body = document.element.body
    body.remove(table._tbl)
    body.insert(0, table._tbl)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _html(data: bytes) -> bytes:
    """A <dl class="document-control"> just before the page's first <h1> or <h2> (inside a theme's main
    column, where the pages put their headings), else at the start of <body>."""
    text = data.decode("utf-8")
    pairs = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in FIELDS.items())
    block = f'<dl class="document-control">{pairs}</dl>\n'
    at = re.search(r"<h[12][\s>]", text) or re.search(r"<body[^>]*>", text)
    if at is None:
        return (block + text).encode("utf-8")
    index = at.start() if at.group(0).startswith("<h") else at.end()
    return (text[:index] + block + text[index:]).encode("utf-8")


def _openapi(data: bytes) -> bytes:
    """info.x-document-control with the fields info.title and info.version do not give."""
    is_json = data.lstrip().startswith(b"{")
    spec = json.loads(data) if is_json else yaml.safe_load(data)
    control = {
        "doc_code": FIELDS["Doc code"],
        "status": FIELDS["Status"],
        "effective_date": FIELDS["Effective date"],
        "owner": FIELDS["Owner"],
        "department": FIELDS["Department"],
        "classification": FIELDS["Classification"],
        "regulatory_refs": [],
    }
    spec.setdefault("info", {})["x-document-control"] = control
    if is_json:
        return json.dumps(spec, indent=2).encode("utf-8")
    return yaml.safe_dump(spec, sort_keys=False, allow_unicode=True).encode("utf-8")
