"""Five formats reach the chunker in one shape: a header and headings, paragraphs and tables."""

from __future__ import annotations

import csv

import psycopg
import pytest
from tests.conftest import REPO
from tests.support.documents import markdown_document

from ingest.document import HeaderError, Heading, Paragraph, ParseError, Table, Unit
from ingest.parsers import parse_document

MANIFEST = {row["path"]: row for row in csv.DictReader((REPO / "corpus" / "MANIFEST.csv").open())}
ONE_OF_EACH = [
    "corpus/compliance/CMP-SOP-004.md",
    "corpus/compliance/CMP-SOP-006.pdf",
    "corpus/compliance/CMP-SOP-003.docx",
    "corpus/compliance/CMP-REF-007.html",
    "corpus/payments/PAY-API-007.yaml",
    "corpus/engineering/ENG-API-008.json",
]


def parse(path: str):  # type: ignore[no-untyped-def]
    return parse_document((REPO / path).read_bytes(), path, max_bytes=25_000_000)


@pytest.mark.parametrize("path", ONE_OF_EACH)
def test_each_format_yields_the_header_the_manifest_records(path):
    document = parse(path)
    row = MANIFEST[path]
    header = document.header
    assert (header.doc_code, header.title, header.version, header.status) == (
        row["doc_code"],
        row["title"],
        row["version"],
        row["status"],
    )
    assert (header.department, header.classification.value) == (row["department"], row["classification"])
    assert document.source_format == row["format"]
    assert any(isinstance(b, Heading) for b in document.blocks)


def test_pdf_headings_follow_font_sizes_and_tables_keep_the_spaces_between_words():
    document = parse("corpus/compliance/CMP-SOP-006.pdf")
    headings = [(b.level, b.text) for b in document.blocks if isinstance(b, Heading)]
    assert (2, "6. Filing Deadlines") in headings and (3, "6.1 Initial SAR") in headings
    tables = [b for b in document.blocks if isinstance(b, Table)]
    assert tables, "find_tables() found the ruled tables"
    cells = [cell for table in tables for row in table.rows for cell in row]
    assert "Suspicious Activity Report: the report filed with FinCEN through BSA E-Filing" in cells


def test_docx_headings_come_from_word_styles_and_the_header_table_is_not_body_text():
    document = parse("corpus/compliance/CMP-SOP-003.docx")
    assert [b for b in document.blocks if isinstance(b, Heading) and b.level == 1]
    text = " ".join(b.text for b in document.blocks if isinstance(b, Paragraph))
    assert "Doc code" not in text
    assert any(isinstance(b, Table) for b in document.blocks)


def test_html_page_chrome_is_not_content():
    document = parse("corpus/compliance/CMP-REF-007.html")
    text = " ".join(getattr(b, "text", "") for b in document.blocks)
    assert "Kosha Wiki" not in text  # the navigation bar
    assert "Typology Thresholds" in text


def test_openapi_gives_one_section_per_operation_with_refs_resolved():
    document = parse("corpus/payments/PAY-API-007.yaml")
    operations = [b.text for b in document.blocks if isinstance(b, Heading) and b.level == 2]
    assert "POST /v2/payments" in operations and "GET /v2/settlements" in operations
    create = next(b.text for b in document.blocks if isinstance(b, Unit) and b.text.startswith("POST /v2/payments "))
    assert "card_token" in create  # a property of PaymentMethod, reached through $ref
    assert "Idempotency-Key (in header, required" in create  # a parameter defined under components


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda t: t.replace("doc_code: CMP-SOP-901\n", ""), "Doc code"),
        (lambda t: t.replace("classification: internal", "classification: secret"), "Classification"),
        (lambda t: t.replace("effective_date: 2026-01-01", "effective_date: next spring"), "Effective date"),
        (lambda t: t.replace('version: "1.0"', "version: 3.10"), "Version"),
        (lambda t: t.replace("doc_code: CMP-SOP-901", "doc_code: FIN-SOP-901"), "Doc code"),
        (lambda t: t.replace("status: effective", "status: approved"), "Status"),
        (lambda t: t.replace("regulatory_refs: []\n", ""), "Regulatory refs"),
        (lambda t: t.replace("department: compliance", "department: marketing"), "Department"),
    ],
    ids=[
        "missing-doc-code",
        "bad-classification",
        "bad-date",
        "unquoted-version",
        "code-vs-department",
        "bad-status",
        "missing-refs",
        "unknown-department",
    ],
)
def test_an_invalid_header_field_fails_with_an_error_naming_the_field(edit, field):
    text = edit(markdown_document())
    with pytest.raises(HeaderError) as caught:
        parse_document(text.encode(), "doc.md", max_bytes=1_000_000)
    assert field in str(caught.value)


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("doc.md", b"# Title\n\n## 1. Purpose\n\ntext\n", "YAML front matter"),
        ("page.html", b"<html><body><h2>1. Scope</h2><p>x</p></body></html>", "document-control"),
        (
            "api.yaml",
            b"openapi: 3.0.3\ninfo: {title: X, version: '1'}\npaths: {/a: {get: {responses: {}}}}\n",
            "x-document-control",
        ),
    ],
)
def test_a_missing_header_block_is_named_with_the_form_it_takes(name, content, expected):
    with pytest.raises(HeaderError, match=expected):
        parse_document(content, name, max_bytes=1_000_000)


@pytest.mark.parametrize(
    ("path", "where"),
    [
        (
            "corpus/compliance/CMP-POL-001.md",
            "Markdown took longer than the 1e-06 s limit (KB_MAX_PARSE_SECONDS), at block 1 of",
        ),
        (
            "corpus/compliance/CMP-STD-009.html",
            "HTML took longer than the 1e-06 s limit (KB_MAX_PARSE_SECONDS), at block 1 (<",
        ),
        (
            "corpus/engineering/ENG-API-007.yaml",
            "OpenAPI took longer than the 1e-06 s limit (KB_MAX_PARSE_SECONDS), at operation 1 of",
        ),
        (
            "corpus/engineering/ENG-API-008.json",
            "OpenAPI took longer than the 1e-06 s limit (KB_MAX_PARSE_SECONDS), at operation 1 of",
        ),
    ],
)
def test_a_text_format_still_parsing_past_the_time_budget_fails_on_one_line_naming_the_budget(path, where):
    data = (REPO / path).read_bytes()
    with pytest.raises(ParseError) as refused:
        parse_document(data, path, max_bytes=10**7, max_parse_seconds=1e-6)
    assert where in str(refused.value) and "\n" not in str(refused.value)
    assert parse_document(data, path, max_bytes=10**7, max_parse_seconds=60).blocks


def test_the_ingestor_reports_a_file_over_the_time_budget_as_failed_naming_the_budget_and_stores_nothing(
    database, counting_embedder
):
    from ingest.pipeline import Ingestor

    data = (REPO / "corpus/compliance/CMP-POL-001.md").read_bytes()
    with Ingestor(database.ingest, counting_embedder, max_bytes=2_000_000, max_parse_seconds=1e-6) as strict:
        failed = strict.ingest(data, name="slow.md", source_uri="file:///inbox/slow.md")
    assert failed.outcome == "failed" and "KB_MAX_PARSE_SECONDS" in (failed.reason or "")
    assert counting_embedder.calls == 0
    with psycopg.connect(database.ingest) as conn:
        assert conn.execute("SELECT count(*) FROM kb.documents").fetchone() == (0,)
