"""DOCX: headings from Word's Heading styles, tables as tables, the header block as the first table (a later
table that would also pass for one is a second header block, and the file is refused)."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from typing import Any, cast

import docx
from docx.document import Document as DocxDocument
from docx.enum.style import WD_STYLE_TYPE
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.oxml import parse_xml
from docx.oxml.ns import qn
from docx.shared import Pt, RGBColor
from docx.styles.style import CharacterStyle
from docx.table import Table as DocxTable
from docx.table import _Cell
from docx.text.paragraph import Paragraph as DocxParagraph
from docx.text.run import Run

from ingest.document import EMPTY_FILE, Block, HeaderError, Heading, Paragraph, ParsedDocument, ParseError, Table
from ingest.header import FIELDS, build_header, field_key, two_header_blocks
from ingest.hidden import mark_hidden
from ingest.parsers.budget import Deadline

_HEADING_STYLE = re.compile(r"^Heading (\d)$")
_LIST_STYLE = re.compile(r"^List (Bullet|Number|Paragraph)")


def parse_docx(data: bytes, deadline: Deadline | None = None) -> ParsedDocument:
    if not data:
        raise ParseError(EMPTY_FILE)
    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise ParseError("not a DOCX file: a .docx is a zip archive and this is not one (is it an old .doc?)")
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # python-docx raises many kinds for a damaged package
        if _is_strict(data):
            raise ParseError(
                "the DOCX is saved as 'Strict Open XML Document', which cannot be read: open it in Word and "
                "save it again as 'Word Document (*.docx)'"
            ) from None
        raise ParseError(
            f"the DOCX package is damaged or incomplete ({exc.__class__.__name__}: {exc}): it was cut short or "
            "changed on the way; save or export it again from its editor"
        ) from None

    reader = _Reader(document)
    header_raw: dict[str, object] | None = None
    header_table = tables = 0  # which of the body's tables, counted from 1, holds the header block
    blocks: list[Block] = []
    number = 0  # position in the current numbered list
    headed = False  # a section heading read: the header table comes before it (a flag, not a scan per table)
    items = _body_items(document)
    deadline = deadline or Deadline(float("inf"))
    for position, item in enumerate(items):
        deadline.check("DOCX", f"paragraph or table {position + 1} of {len(items)}")
        blocks += [Paragraph(note) for note in reader.take_notes(document)]  # after the block citing them
        if isinstance(item, DocxTable):
            tables += 1
            rows = _table_rows(item, reader)
            if header_raw is None and not headed:
                candidate = _header_fields(rows)
                if candidate is not None:
                    header_raw, header_table = candidate, tables
                    continue
            elif header_raw is not None and _is_header_table(rows):
                raise two_header_blocks(f"table {header_table}", f"table {tables}")
            if rows:
                blocks.append(Table(tuple(rows)))
            continue
        boxes = [Paragraph(box) for box in _text_boxes(item, reader)]  # read after the paragraph they sit in
        visible = _paragraph_text(item, reader)
        text = " ".join(visible.split())
        if not text:
            blocks += boxes
            continue
        style = reader.name_of(item)
        heading = _HEADING_STYLE.match(style)
        if style == "Title":
            blocks.append(Heading(0, text))
        elif heading:
            blocks.append(Heading(int(heading.group(1)), text))
            headed = headed or int(heading.group(1)) > 0
        elif _LIST_STYLE.match(style):
            number = number + 1 if "Number" in style else 0
            _append_list_item(blocks, f"{number}. {text}" if number else f"- {text}")
        else:
            number = 0
            paragraph = _code_or_text(item, visible, text, style)
            previous = blocks[-1] if blocks else None
            if paragraph.startswith("```") and isinstance(previous, Paragraph) and previous.text.startswith("```"):
                blocks[-1] = Paragraph(previous.text[:-4] + paragraph[3:])  # one code block, many lines
            else:
                blocks.append(Paragraph(paragraph))
        blocks += boxes
    blocks += [Paragraph(note) for note in reader.take_notes(document)]
    if header_raw is None:
        raise HeaderError(
            "no header block: a DOCX document's first table, before its first heading, holds the header fields "
            f"({', '.join(FIELDS)}); see docs/header-block.md"
        )
    return ParsedDocument(header=build_header(header_raw), blocks=blocks, source_format="docx")


# Elements whose content a reader sees as if they were not there: content controls (w:sdt, the body in
# w:sdtContent), custom XML and smart tags, tracked insertions and moves, hyperlinks and simple fields (the
# field's shown result). Their siblings w:sdtPr, w:del and w:moveFrom hold no text a reader sees.
_TRANSPARENT = frozenset(
    qn(tag)
    for tag in (
        "w:sdt",
        "w:sdtContent",
        "w:customXml",
        "w:smartTag",
        "w:ins",
        "w:moveTo",
        "w:hyperlink",
        "w:fldSimple",
        "w:dir",
        "w:bdo",
    )
)


_SDT = qn("w:sdt")
_SHOWING_PLACEHOLDER = f"{qn('w:sdtPr')}/{qn('w:showingPlcHdr')}"


def _children(element: Any, *tags: str) -> Iterator[Any]:
    """The children of `element` with one of these tags, in document order, looking through the transparent
    wrappers (python-docx sees only direct children, so a content control's whole section vanished). A content
    control still showing its placeholder ("Click or tap here to enter text.") holds nothing anyone wrote: it
    is left out, so an unfilled header field is missing rather than valued with the template's prompt."""
    wanted = {qn(tag) for tag in tags}
    for child in element.iterchildren():
        if child.tag in wanted:
            yield child
        elif child.tag in _TRANSPARENT and not (child.tag == _SDT and child.find(_SHOWING_PLACEHOLDER) is not None):
            yield from _children(child, *tags)


def _body_items(document: DocxDocument) -> list[DocxParagraph | DocxTable]:
    """Paragraphs and tables in document order (python-docx lists them separately)."""
    return [
        DocxParagraph(element, document) if element.tag == qn("w:p") else DocxTable(element, document)
        for element in _children(document.element.body, "w:p", "w:tbl")
    ]


def _is_strict(data: bytes) -> bool:
    """ISO/IEC 29500 Strict names its parts' relationships in purl.oclc.org namespaces, which python-docx
    does not know (it failed with a bare KeyError)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return b"purl.oclc.org/ooxml/officeDocument/relationships" in archive.read("_rels/.rels")
    except (KeyError, zipfile.BadZipFile, OSError, ValueError):
        return False


class _Reader:
    """What the body needs from the rest of the package: styles by id, each looked up once (python-docx looks
    a style up on every access, and an unstyled paragraph's lookup scans every style for the default: ~2 ms
    each with Word's template, 20k paragraphs took 97 s), and the footnotes and endnotes the body cites."""

    def __init__(self, document: DocxDocument) -> None:
        self.part = document.part
        self.cache: dict[tuple[str | None, WD_STYLE_TYPE], CharacterStyle | None] = {}
        self.notes = {kind: _notes_part(document, kind) for kind in _NOTE_KINDS}
        self.labels: dict[tuple[str, str], str] = {}  # (kind, id) -> the mark shown, numbered as cited
        self.counts = dict.fromkeys(_NOTE_KINDS, 0)
        self.cited: list[tuple[str, list[Any]]] = []  # notes cited since the last take_notes()

    def _get(self, style_id: str | None, kind: WD_STYLE_TYPE) -> CharacterStyle | None:
        key = (style_id, kind)
        if key not in self.cache:
            self.cache[key] = cast(CharacterStyle | None, self.part.get_style(style_id, kind))
        return self.cache[key]

    def of_paragraph(self, paragraph: DocxParagraph) -> CharacterStyle | None:
        return self._get(paragraph._p.style, WD_STYLE_TYPE.PARAGRAPH)

    def of_run(self, run: Run) -> CharacterStyle | None:
        return self._get(run._r.style, WD_STYLE_TYPE.CHARACTER)

    def name_of(self, paragraph: DocxParagraph) -> str:
        style = self.of_paragraph(paragraph)
        return (style.name or "") if style is not None else ""

    def cite(self, kind: str, note_id: str) -> str:
        """The mark for a note reference, as Word numbers them (footnotes 1, 2, …; endnotes i, ii, …)."""
        key = (kind, note_id)
        if key not in self.labels:
            self.counts[kind] += 1
            count = self.counts[kind]
            self.labels[key] = f"[{count if kind == 'footnote' else _roman(count)}]"
            paragraphs = self.notes[kind].get(note_id)
            if paragraphs:
                self.cited.append((self.labels[key], paragraphs))
        return self.labels[key]

    def take_notes(self, document: DocxDocument) -> list[str]:
        """The text of each note cited since the last call, after its mark: kept with the citing section."""
        taken: list[str] = []
        position = 0
        while position < len(self.cited):  # a note citing another note appends to the list being read
            label, paragraphs = self.cited[position]
            position += 1
            text = " ".join(" ".join(_paragraph_text(DocxParagraph(p, document), self) for p in paragraphs).split())
            if text:
                taken.append(f"{label} {text}")
        self.cited.clear()
        return taken


_NOTE_KINDS = {"footnote": RT.FOOTNOTES, "endnote": RT.ENDNOTES}


def _notes_part(document: DocxDocument, kind: str) -> dict[str, list[Any]]:
    """The paragraphs of each note of the footnotes or endnotes part, by note id (separators left out)."""
    for rel in document.part.rels.values():
        if rel.reltype == _NOTE_KINDS[kind] and not rel.is_external:
            root = parse_xml(rel.target_part.blob)
            return {
                note.get(qn("w:id")): list(_children(note, "w:p"))
                for note in root.iterchildren(qn(f"w:{kind}"))
                if note.get(qn("w:type")) in (None, "normal")
            }
    return {}


def _roman(n: int) -> str:
    numerals = [(1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"), (50, "l"), (40, "xl")]
    numerals += [(10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")]
    out = ""
    for value, letters in numerals:
        count, n = divmod(n, value)
        out += letters * count
    return out


def _table_rows(table: DocxTable, reader: _Reader) -> list[tuple[str, ...]]:
    """Each row's cells as a reader sees them: a cell merged across columns once, a cell merged down rows in
    its first row only (python-docx repeats it in every row, finding it by a scan of the rows above each
    time), a nested table's text inside its cell, rows and cells inside content controls too."""
    rows = []
    for tr in _children(table._tbl, "w:tr"):
        cells = tuple("" if tc.vMerge == "continue" else _cell_text(tc, table, reader) for tc in _children(tr, "w:tc"))
        if any(cells):
            rows.append(cells)
    return rows


def _cell_text(tc: Any, table: DocxTable, reader: _Reader) -> str:
    cell = _Cell(tc, table)
    dark = _shaded(tc)
    parts: list[str] = []
    for element in _children(tc, "w:p", "w:tbl"):
        if element.tag == qn("w:p"):
            parts.append(_paragraph_text(DocxParagraph(element, cell), reader, dark))
        else:  # a nested table, row by row
            parts.extend(" ".join(row) for row in _table_rows(DocxTable(element, cell), reader))
    return " ".join(" ".join(parts).split())


_WHITE = RGBColor(0xFF, 0xFF, 0xFF)
_TINY = Pt(2)


def _shaded(element: object) -> bool:
    """A cell, paragraph or run with a fill that is not white (white text on it is visible)."""
    shading = element.find(f".//{qn('w:shd')}")  # type: ignore[attr-defined]
    fill = shading.get(qn("w:fill")) if shading is not None else None
    return fill is not None and fill.upper() not in ("AUTO", "FFFFFF")


def _hidden_run(run: Run, paragraph_style: CharacterStyle | None, reader: _Reader, on_dark: bool) -> str | None:
    """Why Word would not show a reader this run's text (on a white page), or None."""
    fonts = [run.font, *(s.font for s in (reader.of_run(run), paragraph_style) if s is not None)]
    if any(font.hidden for font in fonts) or run._r.find(f"{qn('w:rPr')}/{qn('w:specVanish')}") is not None:
        return "hidden run"
    color = next((f.color.rgb for f in fonts if f.color is not None and f.color.type is not None), None)
    if color == _WHITE and not on_dark and run.font.highlight_color is None and not _shaded(run._r):
        return "white text"
    size = next((f.size for f in fonts if f.size is not None), None)
    if size is not None and size < _TINY:
        return "tiny text"
    return None


def _paragraph_text(paragraph: DocxParagraph, reader: _Reader, on_dark: bool = False) -> str:
    """The paragraph's text, with each stretch of hidden runs in a hidden-text marker (ingest.hidden)."""
    parts: list[str] = []
    hidden: list[str] = []
    reason = None
    properties = paragraph._p.pPr
    on_dark = on_dark or (properties is not None and _shaded(properties))
    # Once per paragraph: finding a paragraph's missing properties scans all its children, every run's.
    style = reader.of_paragraph(paragraph)
    for element in _children(paragraph._p, "w:r"):  # inserted, in a content control, a link or a field too
        run = Run(element, paragraph)
        why = _hidden_run(run, style, reader, on_dark)
        if why != reason and hidden:
            parts.append(f" {mark_hidden(reason or '', ''.join(hidden))} ")
            hidden = []
        reason = why
        (hidden if why else parts).append(run.text + _note_marks(element, reader))
    if hidden:
        parts.append(f" {mark_hidden(reason or '', ''.join(hidden))} ")
    return "".join(parts)


_TEXT_BOX = qn("w:txbxContent")
_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"


def _text_boxes(paragraph: DocxParagraph, reader: _Reader) -> list[str]:
    """The text of each text box anchored in the paragraph. Word writes a box twice, as a drawing and as a
    VML fallback for old readers: the fallback is left out, and so is a box inside another box's text."""
    texts = []
    for box in paragraph._p.iter(_TEXT_BOX):
        outer = box.getparent()
        while outer is not None and outer is not paragraph._p and outer.tag not in (_FALLBACK, _TEXT_BOX):
            outer = outer.getparent()
        if outer is not paragraph._p:
            continue
        lines = (_paragraph_text(DocxParagraph(p, paragraph._parent), reader) for p in _children(box, "w:p"))
        text = " ".join(" ".join(lines).split())
        if text:
            texts.append(text)
    return texts


def _note_marks(run: Any, reader: _Reader) -> str:
    """The marks of the footnotes and endnotes a run cites (python-docx's run text leaves them out)."""
    marks = ""
    for kind in _NOTE_KINDS:
        for reference in run.iterchildren(qn(f"w:{kind}Reference")):
            marks += reader.cite(kind, reference.get(qn("w:id")))
    return marks


def _header_fields(rows: list[tuple[str, ...]]) -> dict[str, object] | None:
    """A two-column label/value table naming at least three header fields is the header block."""
    fields: dict[str, object] = {field_key(row[0]): row[1] for row in rows if len(row) >= 2}
    return fields if len(set(fields) & set(FIELDS)) >= 3 else None


def _is_header_table(rows: list[tuple[str, ...]]) -> bool:
    """A later table is a second header block when it is two columns of labels and values naming at least
    three header fields, as the first must be; a table of three or more columns (a list of the fields with
    their form and an example, a revision history) or one naming a field or two is an ordinary table."""
    return all(len(row) <= 2 for row in rows) and _header_fields(rows) is not None


def _append_list_item(blocks: list[Block], line: str) -> None:
    if blocks and isinstance(blocks[-1], Paragraph) and re.match(r"^(- |\d+\. )", blocks[-1].text):
        blocks[-1] = Paragraph(blocks[-1].text + "\n" + line)
    else:
        blocks.append(Paragraph(line))


def _code_or_text(paragraph: DocxParagraph, visible: str, text: str, style: str) -> str:
    """A code line keeps its spacing: the visible text as read (python-docx's paragraph.text and runs see only
    direct runs and links, so an insertion, field or smart tag in a command line was lost, and a hidden run
    was read unmarked)."""
    if style in ("Code", "HTML Preformatted", "Macro Text", "Source Code"):
        return f"```\n{visible.rstrip()}\n```"
    runs = (Run(element, paragraph) for element in _children(paragraph._p, "w:r"))
    fonts = {run.font.name for run in runs if run.text.strip()}
    if fonts and all(font and ("Courier" in font or "Mono" in font or "Consolas" in font) for font in fonts):
        return f"```\n{visible.strip()}\n```"
    return text
