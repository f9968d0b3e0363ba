"""Errors that tell the truth: text in UTF-16/32 is read (or refused as such), a file whose content is not
what its extension says is named for what it is, and a file with two header blocks is refused. Every input is
generated here."""

from __future__ import annotations

import io
import zipfile

import docx
import psycopg
import pymupdf
import pytest
from tests.support.documents import markdown_document

from ingest.document import HeaderError, ParseError, Table
from ingest.parsers import parse_document
from ingest.parsers.text import decode_text

FIELDS = {
    "Doc code": "LEG-GDE-931",
    "Title": "Retention Guide",
    "Version": "1.0",
    "Status": "effective",
    "Effective date": "2026-01-01",
    "Owner": "Legal Counsel",
    "Department": "legal",
    "Classification": "internal",
    "Regulatory refs": "none",
}


def control(**changes: str) -> str:
    fields = {**FIELDS, **changes}
    return '<dl class="document-control">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in fields.items()) + "</dl>"


def html_page(extra: str = "") -> str:
    return (
        "<!DOCTYPE html><html><body><h1>Retention Guide</h1>"
        f"{control()}{extra}<h2>1. Scope</h2><p>Records are kept for seven years. Café ✓</p></body></html>"
    )


def parse(data: bytes, name: str):  # type: ignore[no-untyped-def]
    return parse_document(data, name, max_bytes=5_000_000)


def one_line_error(data: bytes, name: str, kind: type[ParseError] = ParseError) -> str:
    with pytest.raises(kind) as caught:
        parse(data, name)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32", "utf-32-be"])
def test_markdown_and_html_saved_as_utf16_or_utf32_with_a_byte_order_mark_are_read(encoding):
    markdown = markdown_document("CMP-SOP-931", title="Café Rules ✓")
    bom = {"utf-16-be": "\ufeff", "utf-32-be": "\ufeff"}.get(encoding, "")  # utf-16/utf-32 codecs write their own
    document = parse((bom + markdown).encode(encoding), "rules.md")
    assert (document.header.doc_code, document.header.title) == ("CMP-SOP-931", "Café Rules ✓")
    page = parse((bom + html_page()).encode(encoding), "guide.html")
    assert page.header.doc_code == "LEG-GDE-931"
    assert any("Café ✓" in getattr(b, "text", "") for b in page.blocks)


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_utf16_or_utf32_without_a_byte_order_mark_is_recognised_by_its_nul_bytes_and_read(encoding):
    markdown = markdown_document("CMP-SOP-932", title="Café Rules ✓")
    document = parse(markdown.encode(encoding), "rules.md")
    assert (document.header.doc_code, document.header.title) == ("CMP-SOP-932", "Café Rules ✓")
    assert document.blocks == parse(markdown.encode(), "rules.md").blocks  # the same text as its UTF-8 file


def test_damaged_utf16_fails_saying_it_is_not_valid_utf16_and_how_to_fix_it():
    data = "\ufeff---\ntitle: x\n".encode("utf-16-le") + b"\x00\xd8" + "---\n".encode("utf-16-le")  # lone surrogate
    message = one_line_error(data, "rules.md")
    assert "not valid UTF-16" in message and "save it as UTF-8" in message
    assert "binary" not in message


def test_binary_data_that_is_no_known_format_is_still_called_binary():
    with pytest.raises(ParseError, match="binary data, not text"):
        decode_text(bytes(range(256)) * 4)


def pdf_bytes() -> bytes:
    document = pymupdf.open()
    document.new_page().insert_text((72, 72), "1. Scope")
    return document.tobytes()


def docx_bytes() -> bytes:
    buffer = io.BytesIO()
    document = docx.Document()
    document.add_paragraph("1. Scope")
    document.save(buffer)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("content", "name", "expected"),
    [
        (
            markdown_document("CMP-SOP-933").encode(),
            "rules.pdf",
            "the file is Markdown text, not a PDF file: its extension .pdf does not match its content; "
            "rename it to .md",
        ),
        (markdown_document("CMP-SOP-933").encode(), "rules.docx", "the file is Markdown text, not a DOCX file"),
        (b"openapi: 3.1.0\ninfo:\n  title: Payments\n", "api.pdf", "is an OpenAPI document, not a PDF file"),
        (b'{"openapi": "3.1.0", "info": {}}', "api.docx", "rename it to .yaml or .json"),
        (b"Meeting notes, no header.\n", "notes.pdf", "the file is text, not a PDF file"),
        (
            markdown_document("CMP-SOP-933").encode(),
            "rules.yaml",
            "the file is Markdown text, not a YAML or JSON file: its extension .yaml does not match its content; "
            "rename it to .md",
        ),
        (markdown_document("CMP-SOP-933").encode(), "rules.json", "the file is Markdown text, not a YAML or JSON"),
        (markdown_document("CMP-SOP-933").encode(), "rules.html", "the file is Markdown text, not HTML"),
        (pdf_bytes(), "rules.md", "the file is a PDF, not Markdown text: its extension .md does not match"),
        (pdf_bytes(), "rules.html", "rename it to .pdf"),
        (docx_bytes(), "rules.pdf", "the file is a DOCX (Word) document, not a PDF file"),
        (docx_bytes(), "api.yaml", "rename it to .docx"),
        (html_page().encode(), "guide.md", "the file is HTML, not Markdown text: its extension .md"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600), "old.docx", "an old Office file (.doc, .xls or .ppt)"),
        (b"\x89PNG\r\n\x1a\n" + bytes(600), "scan.pdf", "a PNG image, not a PDF file"),
    ],
)
def test_a_file_whose_content_is_not_its_extension_names_its_real_type_and_the_extension(content, name, expected):
    assert expected in one_line_error(content, name)


def test_an_html_page_with_two_document_control_blocks_is_refused():
    page = html_page(extra=control(Classification="restricted"))
    message = one_line_error(page.encode(), "guide.html", HeaderError)
    assert "2 header blocks" in message and "one classification" in message


def test_a_markdown_file_repeating_its_front_matter_in_the_body_is_refused():
    first = markdown_document("CMP-SOP-934")
    front = first.split("\n---\n", 1)[0]
    second = front.replace("internal", "restricted") + "\n---\n"
    message = one_line_error((first.replace("\n---\n", "\n---\n\n" + second, 1)).encode(), "r.md", HeaderError)
    assert "two header blocks" in message
    html_in_body = markdown_document("CMP-SOP-934") + "\n" + control(Classification="public") + "\n"
    assert "two header blocks" in one_line_error(html_in_body.encode(), "r.md", HeaderError)


def test_a_header_block_shown_as_an_example_inside_a_code_fence_is_not_a_second_header():
    example = "```yaml\n---\ndoc_code: CMP-SOP-001\nclassification: public\n---\n```"
    text = markdown_document("CMP-SOP-935", sections={"1. Format": f"The header looks like this:\n\n{example}"})
    assert parse(text.encode(), "r.md").header.classification.value == "internal"


TWO_BLOCKS = (
    "two header blocks: {} and {} both hold header fields (doc code, classification, ...); a document has one "
    "header and one classification, so keep the one that is right and delete the other"
)
HEADER = list(FIELDS.items())
RESTRICTED = [(label, "restricted" if label == "Classification" else value) for label, value in FIELDS.items()]
LEVELS = [("Classification", "Who may read it"), ("restricted", "named readers"), ("internal", "all staff")]
FIELD_LIST = [
    ("Field", "Form", "Example"),
    ("Doc code", "DEP-TYP-NNN", "LEG-GDE-001"),
    ("Department", "a department slug", "legal"),
    ("Classification", "public to restricted", "restricted"),
]


def docx_document(*later_tables: list[tuple[str, ...]]) -> bytes:
    """A title, the header table, a section, then each of `later_tables` in a section of its own."""
    document = docx.Document()
    document.add_heading(FIELDS["Title"], level=0)
    for n, rows in enumerate([HEADER, *later_tables]):
        if n:
            document.add_heading(f"{n}. Part {n}", level=1)
            document.add_paragraph("Records are kept for seven years.")
        table = document.add_table(rows=0, cols=len(rows[0]))
        for row in rows:
            for cell, text in zip(table.add_row().cells, row, strict=True):
                cell.text = text
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def pdf_document(*pages: list[tuple[str, object]]) -> bytes:
    """Pages of ('line', text), ('heading', text), ('code', text) and ('table', rows: a ruled table)."""
    document = pymupdf.open()
    for items in pages:
        page, y = document.new_page(), 72.0
        for kind, content in items:
            if kind == "table":
                rows = content
                assert isinstance(rows, list)
                for r, row in enumerate(rows):
                    for c, text in enumerate(row):
                        box = pymupdf.Rect(72 + 150 * c, y + 20 * r, 72 + 150 * (c + 1), y + 20 * (r + 1))
                        page.draw_rect(box, color=(0, 0, 0), width=0.5)
                        page.insert_text((box.x0 + 4, box.y1 - 6), text, fontsize=10, fontname="helv")
                y += 20 * len(rows) + 24
                continue
            size, font = {"line": (11, "helv"), "heading": (14, "hebo"), "code": (10, "cour")}[kind]
            page.insert_text((72, y), str(content), fontsize=size, fontname=font)
            y += size * 1.6
    return document.tobytes()


def control_lines(rows: list[tuple[str, str]]) -> list[tuple[str, object]]:
    return [("line", "Document control"), *(("line", f"{label}: {value}") for label, value in rows)]


def first_page(header: list[tuple[str, object]]) -> list[tuple[str, object]]:
    return [("heading", FIELDS["Title"]), *header, ("heading", "1. Scope"), ("line", "Records are kept.")]


def second_page(*extra: tuple[str, object]) -> list[tuple[str, object]]:
    return [("heading", "2. Records"), ("line", "Records are kept for seven years."), *extra]


def test_a_docx_with_a_second_header_table_saying_restricted_is_refused_naming_both_tables():
    message = one_line_error(docx_document(LEVELS, RESTRICTED), "guide.docx", HeaderError)
    assert message == TWO_BLOCKS.format("table 1", "table 3")


LINES = "the 'Document control' lines"


@pytest.mark.parametrize(
    ("first", "second", "where"),
    [
        (control_lines(HEADER), control_lines(RESTRICTED), (LINES, LINES)),
        (control_lines(HEADER), [("table", RESTRICTED)], (LINES, "the table")),
        ([("table", HEADER)], [("table", RESTRICTED)], ("the header table", "the table")),
        (control_lines(HEADER), control_lines([("Classification", "restricted")]), (LINES, LINES)),
    ],
    ids=["lines-then-lines", "lines-then-table", "table-then-table", "lines-then-classification-alone"],
)
def test_a_pdf_with_a_second_header_block_saying_restricted_is_refused_naming_both_pages(first, second, where):
    data = pdf_document(first_page(first), second_page(*second))
    message = one_line_error(data, "guide.pdf", HeaderError)
    assert message == TWO_BLOCKS.format(f"{where[0]} on page 1", f"{where[1]} on page 2")


def test_one_header_block_and_later_tables_or_lines_that_merely_mention_header_fields_are_accepted():
    document = parse(docx_document(LEVELS, FIELD_LIST), "guide.docx")
    assert document.header.classification.value == "internal"
    tables = [block.rows for block in document.blocks if isinstance(block, Table)]
    assert tables == [tuple(LEVELS), tuple(FIELD_LIST)]

    example = [("code", "Document control"), ("code", "Classification: public")]  # a listing, in Courier
    mentions = [("heading", "Document control"), ("line", "The owner reviews the document each year.")]
    mentions += [("heading", "3. Document control"), ("line", "Classification: the owner sets it."), *example]
    page = second_page(("table", LEVELS), ("table", FIELD_LIST), *mentions)
    document = parse(pdf_document(first_page(control_lines(HEADER)), page), "guide.pdf")
    assert document.header.classification.value == "internal"
    assert [block.rows for block in document.blocks if isinstance(block, Table)] == [tuple(LEVELS), tuple(FIELD_LIST)]


@pytest.mark.parametrize("name", ["guide.docx", "guide.pdf"])
def test_the_ingestor_refuses_a_file_with_two_header_blocks_and_stores_nothing(name, database, counting_embedder):
    from ingest.pipeline import Ingestor

    if name.endswith(".docx"):
        data = docx_document(RESTRICTED)
    else:
        data = pdf_document(first_page(control_lines(HEADER)), second_page(*control_lines(RESTRICTED)))
    with Ingestor(database.ingest, counting_embedder, max_bytes=5_000_000) as ingestor:
        result = ingestor.ingest(data, name=name, source_uri=f"file:///inbox/{name}")
    assert result.outcome == "failed" and "two header blocks" in (result.reason or "")
    assert counting_embedder.calls == 0
    with psycopg.connect(database.ingest) as conn:
        assert conn.execute("SELECT count(*) FROM kb.documents").fetchone() == (0,)


def openapi_spec(control_json: str) -> bytes:
    return (
        '{"openapi": "3.0.3", "info": {"title": "T", "version": "1.0", "x-document-control": '
        + control_json
        + '}, "paths": {"/a": {"get": {"responses": {"200": {"description": "ok"}}}}}}'
    ).encode()


CONTROL_JSON = (
    '{"doc_code": "ENG-API-936", "status": "effective", "effective_date": "2026-01-01", "owner": "O", '
    '"department": "engineering", "classification": "internal", "regulatory_refs": []'
)


@pytest.mark.parametrize(
    ("content", "name"),
    [
        (
            markdown_document("CMP-SOP-936")
            .replace("classification: internal\n", "classification: internal\nclassification: public\n")
            .encode(),
            "r.md",
        ),
        (
            markdown_document("CMP-SOP-936")
            .replace("classification: internal\n", "classification: internal\nClassification: public\n")
            .encode(),
            "r.md",
        ),
        (
            html_page().replace("<dt>Owner</dt>", "<dt>Classification</dt><dd>public</dd><dt>Owner</dt>").encode(),
            "guide.html",
        ),
        (openapi_spec(CONTROL_JSON + ', "classification": "public"}'), "api.json"),
        (
            openapi_spec(CONTROL_JSON + '}, "x-document-control": ' + CONTROL_JSON.replace("internal", "public") + "}"),
            "api.json",
        ),
    ],
)
def test_a_header_field_given_twice_with_two_values_is_refused_naming_it(content, name):
    message = one_line_error(content, name, HeaderError)
    assert "given twice" in message


def test_a_text_file_that_mentions_the_pdf_signature_near_its_top_is_still_text():
    text = markdown_document("CMP-SOP-937", title="The %PDF- Signature")
    assert parse(text.encode(), "r.md").header.title == "The %PDF- Signature"


def test_an_excel_workbook_named_docx_is_called_an_excel_workbook():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as package:
        package.writestr("[Content_Types].xml", "<Types/>")
        package.writestr("xl/workbook.xml", "<workbook/>")
    assert "the file is an Excel workbook (.xlsx), not a DOCX file" in one_line_error(buffer.getvalue(), "r.docx")
