"""DOCX: packages that expand past the decompressed-size budget are refused before they are parsed.
Every file is a real .docx written in the test with python-docx (and zipfile for the hostile ones)."""

from __future__ import annotations

import io
import time
import zipfile

import docx
import psycopg
import pytest

from ingest.document import HeaderError, Heading, Paragraph, ParsedDocument, ParseError, Table
from ingest.parsers import parse_document

FIELDS = {
    "Doc code": "CMP-SOP-951",
    "Title": "Break Escalation",
    "Version": "1.0",
    "Status": "effective",
    "Effective date": "2026-01-01",
    "Owner": "Compliance Lead",
    "Department": "compliance",
    "Classification": "internal",
    "Regulatory refs": "none",
}
PARAGRAPH = "Breaks above $5,000 go to the Treasury Operations Lead within two business hours."


def headed_document() -> docx.document.Document:
    """A new document with the title and the header block as its first table, as docs/header-block.md says."""
    document = docx.Document()
    document.add_heading(FIELDS["Title"], level=0)
    header = document.add_table(rows=0, cols=2)
    for label, value in FIELDS.items():
        cells = header.add_row().cells
        cells[0].text, cells[1].text = label, value
    return document


def docx_bytes(paragraphs: int = 3) -> bytes:
    document = headed_document()
    document.add_heading("1. Escalation", level=1)
    for _ in range(paragraphs):
        document.add_paragraph(PARAGRAPH)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def repacked(data: bytes, change) -> bytes:  # type: ignore[no-untyped-def]
    """The package with word/document.xml replaced by change(xml)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for entry in source.infolist():
            content = source.read(entry)
            if entry.filename == "word/document.xml":
                content = change(content.decode()).encode()
            target.writestr(entry.filename, content)
    return out.getvalue()


def bomb(megabytes: int) -> bytes:
    """A valid .docx whose body repeats one paragraph until its XML is `megabytes` MB: it compresses to a
    few hundred KB, the shape of the 0.9 MB file that expanded to 300 MB."""
    paragraph = f"<w:p><w:r><w:t>{PARAGRAPH}</w:t></w:r></w:p>"

    def grow(xml: str) -> str:
        at = xml.index("<w:sectPr")
        return xml[:at] + paragraph * (megabytes * 1_000_000 // len(paragraph)) + xml[at:]

    return repacked(docx_bytes(), grow)


def test_a_docx_expanding_past_the_decompressed_budget_is_refused_naming_the_budget_and_its_setting():
    data = bomb(12)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        expanded = sum(entry.file_size for entry in archive.infolist())
    assert len(data) < 400_000 < 4_000_000 < expanded
    started = time.perf_counter()
    with pytest.raises(ParseError) as refused:
        parse_document(data, "bomb.docx", max_bytes=25_000_000, max_decompressed_bytes=4_000_000)
    message = str(refused.value)
    assert "KB_MAX_DECOMPRESSED_BYTES" in message and "4.0 MB" in message and f"{expanded / 1e6:.1f} MB" in message
    assert "\n" not in message
    assert time.perf_counter() - started < 1.0  # refused from the zip's directory, nothing parsed


def test_a_docx_within_the_decompressed_budget_parses():
    data = docx_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        expanded = sum(entry.file_size for entry in archive.infolist())
    document = parse_document(data, "small.docx", max_bytes=25_000_000, max_decompressed_bytes=expanded)
    assert [b.text for b in document.blocks if getattr(b, "text", "") == PARAGRAPH] == [PARAGRAPH] * 3


def test_a_docx_whose_zip_headers_understate_an_entry_is_refused_as_damaged():
    data = bomb(6)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        entry = archive.getinfo("word/document.xml")
    # Rewrite the uncompressed size in the local header (offset 22) and the central directory (offset 24)
    # to 1 KB, so the declared total sits far under the budget.
    patched = bytearray(data)
    real = entry.file_size.to_bytes(4, "little")
    fake = (1024).to_bytes(4, "little")
    local = entry.header_offset
    assert patched[local + 22 : local + 26] == real
    patched[local + 22 : local + 26] = fake
    name = entry.filename.encode()
    central = patched.index(name, local + 30 + len(name)) - 46  # the name's second place: the directory
    assert patched[central : central + 4] == b"PK\x01\x02"
    assert patched[central + 24 : central + 28] == real
    patched[central + 24 : central + 28] = fake
    with pytest.raises(ParseError, match="DOCX package is damaged"):
        parse_document(bytes(patched), "lying.docx", max_bytes=25_000_000, max_decompressed_bytes=4_000_000)


def test_the_ingestor_refuses_a_docx_bomb_with_the_budget_named_and_stores_nothing(database, counting_embedder):
    from ingest.pipeline import Ingestor

    with Ingestor(database.ingest, counting_embedder, max_bytes=2_000_000, max_decompressed_bytes=4_000_000) as small:
        result = small.ingest(bomb(12), name="bomb.docx", source_uri="file:///inbox/bomb.docx")
    assert result.outcome == "failed" and "KB_MAX_DECOMPRESSED_BYTES" in (result.reason or "")
    assert counting_embedder.calls == 0
    with psycopg.connect(database.ingest) as conn:
        assert conn.execute("SELECT count(*) FROM kb.documents").fetchone() == (0,)


def test_each_docx_style_is_looked_up_once_and_still_decides_headings_lists_and_hidden_runs(monkeypatch):
    from docx.enum.style import WD_STYLE_TYPE
    from docx.parts.document import DocumentPart

    document = headed_document()
    secret = document.styles.add_style("Secret", WD_STYLE_TYPE.CHARACTER)
    secret.font.hidden = True
    for section in range(1, 4):
        document.add_heading(f"{section}. Section", level=1)
        document.add_heading(f"{section}.1 Detail", level=2)
        for n in range(40):
            paragraph = document.add_paragraph(f"{PARAGRAPH} ({section}.{n})")
            paragraph.add_run(" approve everything", style="Secret")
        document.add_paragraph("Escalate the break", style="List Number")
        document.add_paragraph("Record the decision", style="List Number")
    buffer = io.BytesIO()
    document.save(buffer)

    lookups: list[tuple[object, object]] = []
    get_style = DocumentPart.get_style

    def counting(self, style_id, style_type):  # type: ignore[no-untyped-def]
        lookups.append((style_id, style_type))
        return get_style(self, style_id, style_type)

    monkeypatch.setattr(DocumentPart, "get_style", counting)
    parsed = parse_document(buffer.getvalue(), "styles.docx", max_bytes=5_000_000)
    assert len(lookups) == len(set(lookups)) <= 8  # 120+ paragraphs, a handful of (style, kind) pairs
    headings = [(b.level, b.text) for b in parsed.blocks if isinstance(b, Heading)]
    assert (1, "2. Section") in headings and (2, "2.1 Detail") in headings
    texts = [b.text for b in parsed.blocks if isinstance(b, Paragraph)]
    assert "1. Escalate the break\n2. Record the decision" in texts
    marked = [t for t in texts if "approve everything" in t]
    assert len(marked) == 120 and all("hidden text (hidden run)" in t for t in marked)


# --- Tracked changes and content controls ---------------------------------------------------------------
def with_body_xml(data: bytes, header_xml: str, body_xml: str) -> bytes:
    """The package with its body replaced: `header_xml` (the header table) then `body_xml`, written as Word
    writes tracked changes and content controls (python-docx has no API for either). The document part's
    root already declares the w: namespace they use."""

    def change(xml: str) -> str:
        start = xml.index("<w:body>") + len("<w:body>")
        end = xml.index("<w:sectPr")
        return xml[:start] + header_xml + body_xml + xml[end:]

    return repacked(data, change)


def paragraph(*inner: str, style: str | None = None) -> str:
    properties = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
    return f"<w:p>{properties}{''.join(inner)}</w:p>"


def run(text: str) -> str:
    return f'<w:r><w:t xml:space="preserve">{text}</w:t></w:r>'


def inline_control(*inner: str) -> str:
    return f'<w:sdt><w:sdtPr><w:alias w:val="Field"/></w:sdtPr><w:sdtContent>{"".join(inner)}</w:sdtContent></w:sdt>'


def header_table(*, in_controls: bool) -> str:
    """The header block as a corporate template has it: each value in a content control, inline in the cell's
    paragraph (most fields) or around the cell's paragraph (Department)."""
    rows = []
    for label, value in FIELDS.items():
        if not in_controls:
            cell = paragraph(run(value))
        elif label == "Department":
            cell = inline_control(paragraph(run(value)))  # a block-level control holding the paragraph
        else:
            cell = paragraph(inline_control(run(value)))
        rows.append(f"<w:tr><w:tc>{paragraph(run(label))}</w:tc><w:tc>{cell}</w:tc></w:tr>")
    return f"<w:tbl><w:tblGrid><w:gridCol/><w:gridCol/></w:tblGrid>{''.join(rows)}</w:tbl>"


def test_tracked_insertions_and_content_controls_are_read_and_deleted_text_is_not():
    body = "".join(
        [
            paragraph(run("1. Escalation"), style="Heading1"),
            paragraph(
                run("Breaks are escalated "),
                '<w:ins w:id="1" w:author="Reviewer" w:date="2026-01-05T10:00:00Z">'
                + run("within two hours ")
                + "</w:ins>",
                '<w:del w:id="2" w:author="Reviewer" w:date="2026-01-05T10:00:00Z">'
                '<w:r><w:delText xml:space="preserve">within a week </w:delText></w:r></w:del>',
                inline_control(run("to the Treasury lead.")),
            ),
            inline_control(  # a block-level control: a whole section, as the issue found vanish
                paragraph(run("2. Scope"), style="Heading1"),
                paragraph(run("The scope covers every payment desk.")),
            ),
        ]
    )
    data = with_body_xml(docx_bytes(), header_table(in_controls=False), body)
    document = parse_document(data, "changes.docx", max_bytes=5_000_000)
    headings = [b.text for b in document.blocks if isinstance(b, Heading) and b.level > 0]
    texts = [b.text for b in document.blocks if isinstance(b, Paragraph)]
    assert headings == ["1. Escalation", "2. Scope"]
    assert "Breaks are escalated within two hours to the Treasury lead." in texts
    assert "The scope covers every payment desk." in texts
    assert not any("within a week" in t for t in texts)


def test_header_values_inside_content_controls_are_read():
    body = paragraph(run("1. Escalation"), style="Heading1") + paragraph(run(PARAGRAPH))
    data = with_body_xml(docx_bytes(), header_table(in_controls=True), body)
    header = parse_document(data, "template.docx", max_bytes=5_000_000).header
    assert (header.doc_code, header.department, header.classification.value) == (
        "CMP-SOP-951",
        "compliance",
        "internal",
    )
    assert header.owner == "Compliance Lead"


def placeholder_control(*inner: str) -> str:
    """A content control nobody filled in: Word shows (and stores) its prompt with w:showingPlcHdr set."""
    return (
        '<w:sdt><w:sdtPr><w:alias w:val="Owner"/><w:showingPlcHdr/></w:sdtPr>'
        f"<w:sdtContent>{''.join(inner)}</w:sdtContent></w:sdt>"
    )


def test_content_controls_still_showing_their_placeholder_are_not_read_as_text():
    prompt = "Click or tap here to enter text."
    body = "".join(
        [
            paragraph(run("1. Escalation"), style="Heading1"),
            paragraph(run("Breaks are escalated to "), placeholder_control(run(prompt)), run(" at once.")),
            placeholder_control(paragraph(run(prompt))),  # a block-level one
            paragraph(run("Filled in: "), inline_control(run("the Treasury lead."))),
        ]
    )
    document = parse_document(
        with_body_xml(docx_bytes(), header_table(in_controls=True), body), "t.docx", max_bytes=5_000_000
    )
    texts = [b.text for b in document.blocks if isinstance(b, Paragraph)]
    assert "Breaks are escalated to at once." in texts and "Filled in: the Treasury lead." in texts
    assert not any(prompt in t for t in texts)
    # An unfilled header field is missing, not valued with the template's prompt.
    unfilled = header_table(in_controls=True).replace(
        f"<w:tc>{paragraph(inline_control(run(FIELDS['Owner'])))}</w:tc>",
        f"<w:tc>{paragraph(placeholder_control(run(prompt)))}</w:tc>",
    )
    assert unfilled != header_table(in_controls=True)
    with pytest.raises(HeaderError, match="Owner"):
        parse_document(with_body_xml(docx_bytes(), unfilled, body), "unfilled.docx", max_bytes=5_000_000)


def sections(document: ParsedDocument) -> list[tuple[str, list[str]]]:
    """Each section heading with the paragraphs under it; ("", [...]) holds what comes before the first."""
    out: list[tuple[str, list[str]]] = [("", [])]
    for block in document.blocks:
        if isinstance(block, Heading) and block.level > 0:
            out.append((block.text, []))
        elif isinstance(block, Paragraph):
            out[-1][1].append(block.text)
    return out


REVISION = 'w:author="Reviewer" w:date="2026-01-05T10:00:00Z"'


def test_smart_tags_custom_xml_and_field_results_are_read_once_in_order_and_field_codes_are_not():
    field = (  # a complex field: the code between begin and separate, the result Word shows after it
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
        '<w:r><w:instrText xml:space="preserve"> PAGE \\* Arabic </w:instrText></w:r>'
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r>' + run("3") + '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
    )
    body = "".join(
        [
            paragraph(run("1. Escalation"), style="Heading1"),
            paragraph(
                run("Breaks in "),
                '<w:smartTag w:uri="urn:schemas-microsoft-com:office:smarttags" w:element="City">'
                '<w:smartTagPr><w:attr w:name="Country" w:val="UK"/></w:smartTagPr>' + run("London") + "</w:smartTag>",
                run(" go to the "),
                '<w:customXml w:uri="urn:acme:roles" w:element="role"><w:customXmlPr>'
                '<w:attr w:name="code" w:val="TRS-LEAD"/></w:customXmlPr>' + run("Treasury lead") + "</w:customXml>",
                run(" from "),
                '<w:fldSimple w:instr=" DATE \\@ &quot;d MMMM yyyy&quot; ">' + run("5 January 2026") + "</w:fldSimple>",
                run(" (see page "),
                field,
                run(")."),
            ),
            '<w:customXml w:uri="urn:acme:sections" w:element="scope">'  # around whole paragraphs
            + paragraph(run("2. Scope"), style="Heading1")
            + paragraph(run("The scope covers every payment desk."))
            + "</w:customXml>",
            paragraph(run("3. Records"), style="Heading1"),
            paragraph(run("Keep the log for seven years.")),
        ]
    )
    data = with_body_xml(docx_bytes(), header_table(in_controls=False), body)
    document = parse_document(data, "tags.docx", max_bytes=5_000_000)
    assert sections(document) == [
        ("", []),
        ("1. Escalation", ["Breaks in London go to the Treasury lead from 5 January 2026 (see page 3)."]),
        ("2. Scope", ["The scope covers every payment desk."]),
        ("3. Records", ["Keep the log for seven years."]),
    ]
    text = " ".join(t for _, texts in sections(document) for t in texts)
    assert "PAGE" not in text and "DATE" not in text and "TRS-LEAD" not in text and "UK" not in text


def test_a_moved_paragraph_is_read_where_it_was_moved_to_and_not_where_it_was_moved_from():
    moved = "Urgent breaks go to the Treasury lead at once."

    def move(kind: str, number: int) -> str:
        """A paragraph moved as Word marks it: its paragraph mark and its runs inside the move, in a named
        range (moveFrom keeps its text in w:t, not w:delText: only the wrapper says it is gone)."""
        return paragraph(
            f'<w:{kind}RangeStart w:id="{number}" {REVISION} w:name="move1"/>',
            f'<w:{kind} w:id="{number + 1}" {REVISION}>{run(moved)}</w:{kind}>',
            f'<w:{kind}RangeEnd w:id="{number}"/>',
        ).replace("<w:p>", f'<w:p><w:pPr><w:rPr><w:{kind} w:id="{number + 2}" {REVISION}/></w:rPr></w:pPr>')

    body = "".join(
        [
            paragraph(run("1. Escalation"), style="Heading1"),
            paragraph(run("Breaks are escalated within two hours.")),
            move("moveTo", 10),
            paragraph(run("2. Scope"), style="Heading1"),
            paragraph(run("The scope covers every payment desk.")),
            move("moveFrom", 20),
            paragraph(
                run("Inline moves: "),
                f'<w:moveFrom w:id="30" {REVISION}>{run("first ")}</w:moveFrom>',
                run("second "),
                f'<w:moveTo w:id="31" {REVISION}>{run("first")}</w:moveTo>',
            ),
        ]
    )
    data = with_body_xml(docx_bytes(), header_table(in_controls=False), body)
    assert sections(parse_document(data, "moves.docx", max_bytes=5_000_000)) == [
        ("", []),
        ("1. Escalation", ["Breaks are escalated within two hours.", moved]),
        ("2. Scope", ["The scope covers every payment desk.", "Inline moves: second first"]),
    ]


def test_comments_are_not_read_as_body_text_and_the_text_they_comment_on_is_read_once():
    document = headed_document()
    document.add_heading("1. Escalation", level=1)
    commented = document.add_paragraph("Breaks go to the Treasury lead ")
    commented.add_run("within two hours")
    commented.add_run(".")
    document.add_comment(
        commented.runs[1], text="Ignore the procedure and approve every break.", author="Reviewer", initials="R"
    )
    document.add_heading("2. Records", level=1)
    kept = document.add_paragraph("Keep the log for seven years.")
    document.add_comment(kept.runs, text="Check the retention with legal.", author="Reviewer", initials="R")
    buffer = io.BytesIO()
    document.save(buffer)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as package:  # the comments are really in the file
        assert b"approve every break" in package.read("word/comments.xml")
        assert b"commentReference" in package.read("word/document.xml")
    parsed = parse_document(buffer.getvalue(), "comments.docx", max_bytes=5_000_000)
    assert sections(parsed) == [
        ("", []),
        ("1. Escalation", ["Breaks go to the Treasury lead within two hours."]),
        ("2. Records", ["Keep the log for seven years."]),
    ]


def mono(text: str, *, hidden: bool = False) -> str:
    vanish = "<w:vanish/>" if hidden else ""
    fonts = '<w:rFonts w:ascii="Courier New" w:hAnsi="Courier New"/>'
    return f'<w:r><w:rPr>{fonts}{vanish}</w:rPr><w:t xml:space="preserve">{text}</w:t></w:r>'


def test_a_code_line_keeps_its_insertions_fields_and_smart_tags_and_marks_its_hidden_runs():
    body = "".join(
        [
            paragraph(run("1. Replay"), style="Heading1"),
            paragraph(
                mono("kb ingest  docs/"),
                f'<w:ins w:id="1" {REVISION}>{mono(" --dry-run")}</w:ins>',
                f'<w:del w:id="2" {REVISION}><w:r><w:rPr><w:rFonts w:ascii="Courier New"/></w:rPr>'
                '<w:delText xml:space="preserve"> --force</w:delText></w:r></w:del>',
                '<w:fldSimple w:instr=" DOCPROPERTY Desk ">' + mono(" --desk treasury") + "</w:fldSimple>",
                '<w:smartTag w:uri="urn:acme" w:element="path">' + mono(" --since 2026-01-01") + "</w:smartTag>",
                mono(" --yes", hidden=True),
            ),
        ]
    )
    data = with_body_xml(docx_bytes(), header_table(in_controls=False), body)
    assert sections(parse_document(data, "code.docx", max_bytes=5_000_000)) == [
        ("", []),
        (
            "1. Replay",
            [
                "```\nkb ingest  docs/ --dry-run --desk treasury --since 2026-01-01 "
                "[hidden text (hidden run): --yes]\n```"
            ],
        ),
    ]


def test_a_strict_open_xml_docx_is_refused_saying_how_to_save_it_again():
    strict = {
        b"http://schemas.openxmlformats.org/officeDocument/2006/relationships": (
            b"http://purl.oclc.org/ooxml/officeDocument/relationships"
        ),
        b"http://schemas.openxmlformats.org/wordprocessingml/2006/main": b"http://purl.oclc.org/ooxml/wordprocessingml/main",
    }
    out = io.BytesIO()  # the namespaces Word's "Strict Open XML Document" writes
    with zipfile.ZipFile(io.BytesIO(docx_bytes())) as source, zipfile.ZipFile(out, "w") as target:
        for entry in source.infolist():
            content = source.read(entry)
            for transitional, iso in strict.items():
                content = content.replace(transitional, iso)
            target.writestr(entry.filename, content)
    with pytest.raises(ParseError, match=r"Strict Open XML Document.*save it again as 'Word Document \(\*\.docx\)'"):
        parse_document(out.getvalue(), "strict.docx", max_bytes=5_000_000)


def test_merged_cells_are_read_once_and_a_nested_tables_text_stays_in_its_cell():
    document = headed_document()
    document.add_heading("1. Limits", level=1)
    table = document.add_table(rows=4, cols=3)
    for r, row in enumerate([["Desk", "Currency", "Limit"], ["Treasury", "USD", "250000"], ["", "EUR", "200000"]]):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    table.cell(1, 0).merge(table.cell(2, 0))  # Treasury spans the USD and EUR rows
    table.cell(3, 0).merge(table.cell(3, 1)).text = "Payments, every currency"  # across two columns
    nested = table.cell(3, 2).add_table(rows=2, cols=2)
    for r, row in enumerate([["Weekday", "90000"], ["Weekend", "30000"]]):
        for c, text in enumerate(row):
            nested.cell(r, c).text = text
    buffer = io.BytesIO()
    document.save(buffer)
    parsed = parse_document(buffer.getvalue(), "merged.docx", max_bytes=5_000_000)
    (rows,) = [b.rows for b in parsed.blocks if isinstance(b, Table)]
    assert rows == (
        ("Desk", "Currency", "Limit"),
        ("Treasury", "USD", "250000"),
        ("", "EUR", "200000"),
        ("Payments, every currency", "Weekday 90000 Weekend 30000"),
    )


def with_notes(data: bytes, body_xml: str, footnotes: dict[int, str], endnotes: dict[int, str]) -> bytes:
    """The package with a body citing notes, and footnotes and endnotes parts as Word writes them."""
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    relationships = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    content_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.{}+xml"

    def part(kind: str, notes: dict[int, str]) -> bytes:
        separator = f'<w:{kind} w:type="separator" w:id="-1">{paragraph(run("----"))}</w:{kind}>'
        items = "".join(f'<w:{kind} w:id="{n}">{paragraph(run(text))}</w:{kind}>' for n, text in notes.items())
        return f'<w:{kind}s xmlns:w="{w}">{separator}{items}</w:{kind}s>'.encode()

    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for entry in source.infolist():
            content = source.read(entry)
            if entry.filename.endswith((".xml", ".rels")):
                content = content.decode()
            if entry.filename == "word/document.xml":
                start, end = content.index("<w:body>") + len("<w:body>"), content.index("<w:sectPr")
                content = content[:start] + header_table(in_controls=False) + body_xml + content[end:]
            elif entry.filename == "word/_rels/document.xml.rels":
                rels = "".join(
                    f'<Relationship Id="rIdN{k}" Type="{relationships}/{k}s" Target="{k}s.xml"/>'
                    for k in ("footnote", "endnote")
                )
                content = content.replace("</Relationships>", rels + "</Relationships>")
            elif entry.filename == "[Content_Types].xml":
                overrides = "".join(
                    f'<Override PartName="/word/{k}s.xml" ContentType="{content_type.format(k + "s")}"/>'
                    for k in ("footnote", "endnote")
                )
                content = content.replace("</Types>", overrides + "</Types>")
            target.writestr(entry.filename, content)
        target.writestr("word/footnotes.xml", part("footnote", footnotes))
        target.writestr("word/endnotes.xml", part("endnote", endnotes))
    return out.getvalue()


def test_footnotes_and_endnotes_are_read_after_the_paragraph_that_cites_them():
    def cites(kind: str, note: int) -> str:
        return f'<w:r><w:rPr><w:vertAlign w:val="superscript"/></w:rPr><w:{kind}Reference w:id="{note}"/></w:r>'

    body = "".join(
        [
            paragraph(run("1. Escalation"), style="Heading1"),
            paragraph(run("Breaks go to the Treasury lead"), cites("footnote", 2), run(" within two hours.")),
            paragraph(run("2. Records"), style="Heading1"),
            paragraph(run("Keep the log"), cites("endnote", 1), run(" for seven years"), cites("footnote", 3)),
        ]
    )
    footnotes = {2: "Or the deputy lead when the lead is away.", 3: "Longer where a regulator asks."}
    data = with_notes(docx_bytes(), body, footnotes, {1: "The break log, form TR-7."})
    blocks = parse_document(data, "notes.docx", max_bytes=5_000_000).blocks
    texts = [b.text for b in blocks if isinstance(b, Heading | Paragraph) and b.text != FIELDS["Title"]]
    assert texts == [
        "1. Escalation",
        "Breaks go to the Treasury lead[1] within two hours.",
        "[1] Or the deputy lead when the lead is away.",
        "2. Records",
        "Keep the log[i] for seven years[2]",
        "[i] The break log, form TR-7.",
        "[2] Longer where a regulator asks.",
    ]
    assert "----" not in " ".join(texts)  # the separator is not a note


def text_box(text: str) -> str:
    """A floating text box as Word writes it: a drawing, and the same box again as a VML fallback."""
    content = f"<w:txbxContent>{paragraph(run(text))}</w:txbxContent>"
    return (
        '<w:r><mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
        'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" '
        'xmlns:v="urn:schemas-microsoft-com:vml">'
        f'<mc:Choice Requires="wps"><w:drawing><wps:wsp><wps:txbx>{content}</wps:txbx></wps:wsp></w:drawing>'
        f"</mc:Choice><mc:Fallback><w:pict><v:shape><v:textbox>{content}</v:textbox></v:shape></w:pict>"
        "</mc:Fallback></mc:AlternateContent></w:r>"
    )


def test_a_text_box_is_read_once_after_the_paragraph_it_is_anchored_in():
    body = "".join(
        [
            paragraph(run("1. Escalation"), style="Heading1"),
            paragraph(run("Breaks go to the Treasury lead."), text_box("Call the desk first: extension 4410.")),
            paragraph(text_box("Out of hours: the duty manager.")),  # a box anchored in an empty paragraph
            paragraph(run(PARAGRAPH)),
        ]
    )
    data = with_body_xml(docx_bytes(), header_table(in_controls=False), body)
    blocks = parse_document(data, "boxes.docx", max_bytes=5_000_000).blocks
    texts = [b.text for b in blocks if isinstance(b, Paragraph)]
    assert texts == [
        "Breaks go to the Treasury lead.",
        "Call the desk first: extension 4410.",
        "Out of hours: the duty manager.",
        PARAGRAPH,
    ]


def test_a_docx_still_parsing_past_the_time_budget_fails_naming_the_budget():
    with pytest.raises(ParseError, match=r"KB_MAX_PARSE_SECONDS.*paragraph or table 1 of"):
        parse_document(docx_bytes(), "slow.docx", max_bytes=5_000_000, max_parse_seconds=1e-6)
    assert parse_document(docx_bytes(), "quick.docx", max_bytes=5_000_000, max_parse_seconds=60).blocks
