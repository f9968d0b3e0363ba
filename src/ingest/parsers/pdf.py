"""PDF (pymupdf): text lines with their fonts, tables from `find_tables()`, headings from the fonts.

- Headings are lines set bold in a font larger than the body text (tables' text counted in the body), or
  set in a regular font at least a fifth larger than the body's when they read as headings (short, with a
  letter, not ending a sentence), as word processors' heading styles and titles often are, or set bold at
  the body's own size when they read as headings and stand on their own (not a label, list item, table
  cell or bold line inside or opening a paragraph; not in a document mostly set in bold); their levels
  follow the sizes, bold body-size ones below all others; a heading set on two lines is one.
- Tables are found only on pages whose rules cross like a table's, and read from the page's words, each
  in the cell holding its centre, because `Table.extract()` can drop the spaces between words; a table
  continued on the next page under a repeated header is joined.
- A page set in two columns is read down each column in turn.
- The header block is the `Document control` line and the `Label: value` lines after it, or a ruled
  two-column table of labels and values before the first numbered heading (the rest of it on the next page,
  when a page break splits it, joins it). A second one anywhere (another `Document control` line followed by
  a header field, or another such table) refuses the file.
- Lines at the top or bottom of most pages that repeat verbatim, or with only the page number changing,
  are running headers and footers, and are dropped.
- A cut-off file is refused, and a parse-time budget is checked page by page.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ingest.document import EMPTY_FILE, Block, HeaderError, Heading, Paragraph, ParsedDocument, ParseError, Table
from ingest.header import FIELDS, build_header, field_key, two_header_blocks
from ingest.hidden import mark_hidden
from ingest.parsers.budget import Deadline
from ingest.parsers.pdf_library import pymupdf

_TEXT_FLAGS = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_LIGATURES & ~pymupdf.TEXT_PRESERVE_IMAGES
_BULLET = re.compile(r"^([•▪◦‣∙·●\-–]|\d+[.)])\s+")
_LABEL = re.compile(r"^([A-Za-z][A-Za-z ]{1,30}):\s*(.*)$")
_NUMBER = re.compile(r"[0-9]+")
_COLON = re.compile(r"^([^:]{1,40}):\s*(.*)$")  # a label and its value, or a heading's prefix and its title
_MARGIN = 54.0  # points at the top and bottom of a page where running headers and footers live
_LARGER = 1.2  # a regular-weight line this many times the body's size can be a heading (1.1 is mere emphasis)
_HEADING_WORDS = 12
# A bold line of one of these alone, or of one with a colon and what follows, is a label of the text after it
# (an admonition), not a heading over a section; 'Important dates' or 'Notes' may be headings.
_RUN_IN_LABELS = frozenset({"note", "nb", "n.b", "warning", "caution", "important", "tip", "attention"})


@dataclass
class _Line:
    page: int
    top: float
    bottom: float
    left: float
    text: str
    size: float
    bold: bool
    mono: bool
    right: float = 0.0
    order: tuple[int, int, int, float] = (0, 0, 0, 0.0)  # (page, band, column, top): the reading order


@dataclass
class _TableAt:
    page: int
    top: float
    rows: list[tuple[str, ...]]
    order: tuple[int, int, int, float] = (0, 0, 0, 0.0)


def parse_pdf(data: bytes, deadline: Deadline | None = None) -> ParsedDocument:
    if not data:
        raise ParseError(EMPTY_FILE)
    try:
        document = pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:  # pymupdf raises FileDataError, RuntimeError, ValueError for damaged files
        raise ParseError(f"not a readable PDF ({exc.__class__.__name__}: {exc})") from None
    with document:
        if document.needs_pass:
            raise ParseError("the PDF is encrypted: remove its password before ingesting it")
        if document.page_count == 0:
            raise ParseError("the PDF has no pages")
        if document.is_repaired and b"%%EOF" not in data[-1024:]:
            # pymupdf rebuilds a cut-off file from the objects it still holds: its first pages would be
            # ingested as the whole document. A complete file that needed repair still ends with %%EOF.
            raise ParseError(
                "the PDF is damaged: it is cut short (it does not end with %%EOF and had to be repaired to "
                "open), so only part of it could be read: download or export it again"
            )
        lines, tables, in_tables = _read(document, deadline or Deadline(float("inf")))
        repaired = document.is_repaired
    if not lines and not tables and repaired:
        raise ParseError(
            "the PDF is damaged (truncated or corrupt: it had to be repaired to open) and no text "
            "could be read from it: export it again"
        )
    if not lines and not tables:
        raise ParseError("the PDF has no text layer (a scanned image?): run it through OCR first")
    body = _body_size(lines, in_tables)
    lines = _drop_running_lines(lines, body)
    heading_rank = _heading_test(lines, body, in_tables)
    raw, lines, tables = _header_block(lines, tables, heading_rank)
    header = build_header(raw)
    return ParsedDocument(header=header, blocks=_blocks(lines, tables, heading_rank), source_format="pdf")


def _read(document: pymupdf.Document, deadline: Deadline) -> tuple[list[_Line], list[_TableAt], Counter[float]]:
    """The lines outside tables, the tables, and how many characters of each font size the tables hold."""
    lines: list[_Line] = []
    tables: list[_TableAt] = []
    in_tables: Counter[float] = Counter()
    for number in range(document.page_count):
        deadline.check("PDF", f"page {number + 1} of {document.page_count}")
        page = document[number]
        try:
            # Line-based detection finds ruled tables; pymupdf's layout model (the default) finds the same
            # ones here at five times the time. It costs up to ~1 s a page, so it runs only on a page whose
            # drawings have the rules of at least two rows or columns of cells.
            found = page.find_tables(use_layout=False).tables if _may_hold_table(page.get_cdrawings()) else []
        except Exception:  # table detection is best effort; the text is still read
            found = []
        boxes = [pymupdf.Rect(t.bbox) for t in found]
        words = page.get_text("words") if found else []
        page_lines: list[_Line] = []
        page_tables: list[tuple[_TableAt, pymupdf.Rect]] = []
        for table, box in zip(found, boxes, strict=True):
            rows = _table_rows(table, words)
            if rows:
                page_tables.append((_TableAt(number, box.y0, rows), box))
        for block in page.get_text("dict", flags=_TEXT_FLAGS)["blocks"]:
            for line in block.get("lines", []):
                box = pymupdf.Rect(line["bbox"])
                middle = pymupdf.Point((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2)
                spans = [s for s in line["spans"] if s["text"].strip()]
                if not spans:
                    continue
                if any(middle in b for b in boxes):
                    for span in spans:
                        in_tables[round(span["size"], 1)] += len(span["text"].strip())
                    continue
                text = _line_text(line["spans"])
                size = max(s["size"] for s in spans)
                bold = all(s["flags"] & pymupdf.TEXT_FONT_BOLD or "Bold" in s["font"] for s in spans)
                mono = all(s["flags"] & pymupdf.TEXT_FONT_MONOSPACED or "Courier" in s["font"] for s in spans)
                page_lines.append(_Line(number, box.y0, box.y1, box.x0, text, round(size, 1), bold, mono, box.x1))
        key = _reading_key(page_lines)
        for ln in page_lines:
            ln.order = (number, *key(ln.left, ln.right, ln.top))
        for table_at, box in page_tables:
            table_at.order = (number, *key(box.x0, box.x1, box.y0))
            tables.append(table_at)
        lines += page_lines
    lines.sort(key=lambda ln: ln.order)
    return lines, tables, in_tables


def _reading_key(lines: list[_Line]) -> Callable[[float, float, float], tuple[int, int, float]]:
    """Where a thing at (left, right, top) comes in the page's reading order: (band, column, top). On a page
    set in two columns, lines and tables crossing the gutter (a title, a wide table) start a band, and each
    band is read down its left column, then down its right one; sorting by height alone interleaved the
    two columns line by line. Other pages are read top to bottom."""
    gutter = _gutter(lines)
    if gutter is None:
        return lambda left, right, top: (0, 0, round(top, 1))
    spanning = sorted(ln.top for ln in lines if ln.left < gutter < ln.right)

    def key(left: float, right: float, top: float) -> tuple[int, int, float]:
        band = bisect.bisect_right(spanning, top + 0.01)
        return band, 0 if left < gutter else 1, round(top, 1)

    return key


def _gutter(lines: list[_Line]) -> float | None:
    """The x of the gap between two columns of text, or None. A gap is an x in the middle third of the text
    that few lines cross, with five or more lines on each side, where the left side's lines beside the
    right side's mostly run up to it (as a column's lines do; short terms with their definitions to the
    right do not)."""
    if len(lines) < 10:
        return None
    lefts = sorted(ln.left for ln in lines)
    rights = sorted(ln.right for ln in lines)
    start, width = lefts[0], rights[-1] - lefts[0]
    best: tuple[int, float] | None = None
    for step in range(34, 67, 2):
        x = start + width * step / 100
        left_of = bisect.bisect_right(rights, x)
        right_of = len(lefts) - bisect.bisect_left(lefts, x)
        crossing = len(lines) - left_of - right_of
        if left_of >= 5 and right_of >= 5 and crossing <= len(lines) / 10 and (best is None or crossing < best[0]):
            best = (crossing, x)
    if best is None:
        return None
    gutter = best[1]
    beside = [ln for ln in lines if ln.left >= gutter]
    high, low = min(ln.top for ln in beside), max(ln.bottom for ln in beside)
    column = [ln for ln in lines if ln.right <= gutter and high <= ln.top <= low]  # beside the right side
    if not column:
        return None
    reach = gutter - min(ln.left for ln in column)
    full = sum(1 for ln in column if gutter - ln.right < reach * 0.25)
    return gutter if full >= len(column) / 2 else None


def _may_hold_table(drawings: list[dict]) -> bool:
    """Whether a page's vector drawings could rule a table of two or more cells: a rule (a line, or a box's
    side) crossed by three or more rules of the other direction. Underlines, framed notes, shaded bands,
    curves and logos do not, and the table finder (up to ~1 s a page) is spared them."""
    across: dict[int, tuple[float, float]] = {}  # horizontal rules by y: the x extent of those at that y
    down: dict[int, tuple[float, float]] = {}  # vertical rules by x: their y extent

    def add(rules: dict[int, tuple[float, float]], at: float, start: float, end: float) -> None:
        known = rules.get(round(at))
        rules[round(at)] = (start, end) if known is None else (min(known[0], start), max(known[1], end))

    for path in drawings:
        for item in path.get("items", ()):
            if item[0] == "l":
                corners = (item[1], item[2])
            elif item[0] == "re":
                corners = (item[1][:2], item[1][2:])
            elif item[0] == "qu":
                corners = item[1]
            else:
                continue  # curves
            x0, x1 = min(c[0] for c in corners), max(c[0] for c in corners)
            y0, y1 = min(c[1] for c in corners), max(c[1] for c in corners)
            if y1 - y0 < 3 <= x1 - x0:
                add(across, (y0 + y1) / 2, x0, x1)
            elif x1 - x0 < 3 <= y1 - y0:
                add(down, (x0 + x1) / 2, y0, y1)
            elif x1 - x0 >= 3 and y1 - y0 >= 3:  # a box: its four sides
                for y in (y0, y1):
                    add(across, y, x0, x1)
                for x in (x0, x1):
                    add(down, x, y0, y1)
    if len(across) * len(down) > 40_000:
        return True  # a dense drawing: the table finder judges it (the pairs below would cost more)
    crossings: dict[int, int] = {}  # vertical rule -> horizontal rules crossing it
    for y, (x0, x1) in across.items():
        crossing = [x for x, (y0, y1) in down.items() if x0 - 1 <= x <= x1 + 1 and y0 - 1 <= y <= y1 + 1]
        if len(crossing) >= 3:
            return True
        for x in crossing:
            crossings[x] = crossings.get(x, 0) + 1
    return max(crossings.values(), default=0) >= 3


def _hidden_span(span: dict) -> str | None:
    """Why a reader would not see a span (on a white page), or None. pymupdf clips text outside the page
    itself, and gives text in invisible render mode (3) an alpha of 0."""
    if span.get("alpha", 255) == 0:
        return "invisible render mode"
    if span["color"] == 0xFFFFFF:
        return "white text"
    if span["size"] < 1.5:
        return "tiny text"
    return None


def _line_text(spans: list[dict]) -> str:
    """A line's text, with each run of hidden spans in a hidden-text marker (ingest.hidden)."""
    parts: list[str] = []
    hidden: list[str] = []
    reason = None
    for span in spans:
        why = _hidden_span(span) if span["text"].strip() else reason
        if why != reason and hidden:
            parts.append(f" {mark_hidden(reason or '', ''.join(hidden))} ")
            hidden = []
        reason = why
        (hidden if why else parts).append(span["text"])
    if hidden:
        parts.append(f" {mark_hidden(reason or '', ''.join(hidden))} ")
    return "".join(parts).strip()


def _table_rows(table: object, words: list[tuple]) -> list[tuple[str, ...]]:
    """Cell texts from the page's words, each word placed in the cell holding its centre: one pass over the
    words, however large the grid (reading each cell's text with its own clipped get_text() re-reads the
    page per cell: 53 s for a 58 x 40 grid), and unlike Table.extract() it keeps the spaces between words."""
    rows: list[tuple[str, ...]] = []
    header = getattr(table, "header", None)
    if header is not None and getattr(header, "external", False):
        names = tuple(" ".join((name or "").split()) for name in header.names)
        if sum(1 for name in names if name) >= 2:  # one filled cell: a heading or caption above the table
            rows.append(names)
    grid = [list(row.cells) for row in table.rows]  # type: ignore[attr-defined]
    texts: list[list[list[str]]] = [[[] for _ in row] for row in grid]
    find = _cell_finder(grid)
    for x0, y0, x1, y1, word, *_ in words:  # in reading order
        found = find((x0 + x1) / 2, (y0 + y1) / 2)
        if found is not None:
            texts[found[0]][found[1]].append(word)
    for row_texts in texts:
        cells = tuple(" ".join(words_in_cell) for words_in_cell in row_texts)
        if any(cells):
            rows.append(cells)
    return rows


def _cell_finder(grid: list[list[Any]]) -> Callable[[float, float], tuple[int, int] | None]:
    """(row, column) of the cell holding a point, found by bisection on the rows' tops and the cells' left
    edges: testing every cell of a 60 x 40 grid for each word of its page took 10+ s. Rows are tried from the
    one starting just above the point upward, while a row above still reaches down to it (a cell merged
    down several rows)."""
    bands = []  # (top, bottom, row, [(left, right, top, bottom, column)] by left edge)
    for r, row in enumerate(grid):
        cells = sorted((c[0], c[2], c[1], c[3], i) for i, c in enumerate(row) if c is not None)
        if cells:
            bands.append((min(c[2] for c in cells), max(c[3] for c in cells), r, cells))
    bands.sort(key=lambda band: band[0])
    tops = [band[0] for band in bands]
    reach: list[float] = []  # the lowest bottom of any row from the first to this one
    for band in bands:
        reach.append(max(reach[-1], band[1]) if reach else band[1])
    lefts = [[cell[0] for cell in band[3]] for band in bands]

    def find(x: float, y: float) -> tuple[int, int] | None:
        at = bisect.bisect_right(tops, y) - 1
        while at >= 0 and reach[at] >= y:
            cells = bands[at][3]
            i = bisect.bisect_right(lefts[at], x) - 1
            if i >= 0 and cells[i][1] >= x and cells[i][2] <= y <= cells[i][3]:
                return bands[at][2], cells[i][4]
            at -= 1
        return None

    return find


def _drop_running_lines(lines: list[_Line], body: float) -> list[_Line]:
    """Drop running headers and footers: a line at the top or bottom of at least half the pages that repeats
    verbatim, or with only a page number changing. Lines are grouped by their text with numbers masked, in
    one pass; a group is running only if each of its numbers is the same on every page or follows the page
    (page + a fixed offset). So the last row of each ledger page, 'Article N' headings at page tops and
    digit lines in the body are kept, where masking digits alone deleted them."""
    pages = max((line.page for line in lines), default=0) + 1
    if pages < 3:
        return lines
    bottoms: dict[int, float] = {}
    for line in lines:
        bottoms[line.page] = max(bottoms.get(line.page, 0.0), line.bottom)
    groups: dict[str, list[int]] = defaultdict(list)
    for i, line in enumerate(lines):
        if line.top < _MARGIN or line.bottom > bottoms[line.page] - 2:
            groups[_NUMBER.sub("#", " ".join(line.text.lower().split()))].append(i)
    heading_size = body + 0.5
    drop: set[int] = set()
    for members in groups.values():
        group = [lines[i] for i in members]
        if len({line.page for line in group}) >= pages / 2 and _repeats_by_page(group, heading_size):
            drop.update(members)
    return [line for i, line in enumerate(lines) if i not in drop]


def _repeats_by_page(group: list[_Line], heading_size: float) -> bool:
    """Every number in the group's lines is constant, or is the page's number plus a fixed offset (a printed
    page number). A heading numbered like its page ('Article 4' atop page 4) is not a page number."""
    numbers = [_NUMBER.findall(line.text) for line in group]
    if any(len(row) != len(numbers[0]) for row in numbers):
        return False
    follows_page = False
    for column in zip(*numbers, strict=True):
        if len(set(column)) == 1:
            continue
        if any(len(n) > 6 for n in column) or len({int(n) - ln.page for n, ln in zip(column, group, strict=True)}) > 1:
            return False
        follows_page = True
    return not (follows_page and any(line.bold and line.size > heading_size for line in group))


def _header_block(
    lines: list[_Line], tables: list[_TableAt], heading_rank: Callable[[_Line], float | None]
) -> tuple[dict[str, object], list[_Line], list[_TableAt]]:
    """The header fields, and the lines and tables without them. The header block is the 'Document control'
    line and the 'Label: value' lines after it or, as in a DOCX, a two-column table of labels and values
    before the first numbered heading."""
    start = next((i for i, ln in enumerate(lines) if _is_control_line(ln)), None)
    if start is None:
        numbered = (ln for ln in lines if heading_rank(ln) is not None and ln.text[:1].isdigit())
        first_heading = next(((ln.page, ln.top) for ln in numbered), (1, 0.0))  # else: the first page
        for table in tables:
            if (table.page, table.top) > first_heading:
                break
            fields = _table_fields(table.rows)
            if len(set(fields) & set(FIELDS)) >= 3:
                rest = _rest_of_header_table(table, fields, tables, lines, heading_rank)
                if rest is not None:
                    fields |= _table_fields(rest.rows)
                others = [t for t in tables if t is not table and t is not rest]
                _refuse_second_header(f"the header table on page {table.page + 1}", lines, 0, others, heading_rank)
                return fields, lines, others
        raise HeaderError(
            "no header block: a PDF's first page has a 'Document control' line followed by 'Label: value' lines "
            f"({', '.join(FIELDS)}), or a two-column table of them; see docs/header-block.md"
        )
    raw, end = _control_fields(lines, start, heading_rank)
    first = f"the 'Document control' lines on page {lines[start].page + 1}"
    _refuse_second_header(first, lines, end, tables, heading_rank)
    return raw, lines[:start] + lines[end:], tables


def _rest_of_header_table(
    table: _TableAt,
    fields: dict[str, object],
    tables: list[_TableAt],
    lines: list[_Line],
    heading_rank: Callable[[_Line], float | None],
) -> _TableAt | None:
    """The rest of a header table that a page break split: the next table, on the next page with no heading
    before it, of two columns whose every row is a header field the first part lacks. A table naming a
    field again is a second header block, refused as such."""
    later = [t for t in tables if (t.page, t.top) > (table.page, table.top)]
    if not later:
        return None
    rest = min(later, key=lambda t: (t.page, t.top))
    if rest.page != table.page + 1 or any(len(row) != 2 for row in rest.rows):
        return None
    names = [field_key(row[0]) for row in rest.rows]
    if any(name not in FIELDS or name in fields for name in names) or len(set(names)) != len(names):
        return None
    between = (line for line in lines if (table.page, table.top) < (line.page, line.top) < (rest.page, rest.top))
    return None if any(heading_rank(line) is not None for line in between) else rest


def _is_control_line(line: _Line) -> bool:
    return line.text.strip().lower() == "document control"


def _control_fields(
    lines: list[_Line], start: int, heading_rank: Callable[[_Line], float | None]
) -> tuple[dict[str, object], int]:
    """The header fields of the 'Label: value' lines after the 'Document control' line at `start`, and the
    index of the first line after them."""
    raw: dict[str, object] = {}
    last = None
    end = start + 1
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if heading_rank(line) is not None:
            break
        match = _LABEL.match(line.text)
        if match and field_key(match.group(1)) in FIELDS:
            last = field_key(match.group(1))
            raw[last] = match.group(2).strip()
        elif last is not None and line.page == lines[i - 1].page and line.top - lines[i - 1].bottom < line.size:
            raw[last] = f"{raw[last]} {line.text}".strip()  # a value wrapped onto the next line
        else:
            break
        end = i + 1
    return raw, end


def _table_fields(rows: list[tuple[str, ...]]) -> dict[str, object]:
    return {field_key(row[0]): row[1] for row in rows if len(row) == 2}


def _refuse_second_header(
    first: str, lines: list[_Line], after: int, tables: list[_TableAt], heading_rank: Callable[[_Line], float | None]
) -> None:
    """Refuse a second header block, as HTML's second <dl class="document-control"> is: a 'Document control'
    line (not one in a code listing) followed by at least one header field's 'Label: value' line, or a ruled
    table of two columns naming at least three header fields (the first's test; a table of more columns, such
    as a list of the fields with their form, is an ordinary table). A heading 'Document control' over prose,
    or a table naming a field or two, is not one."""
    for i in range(after, len(lines)):
        if _is_control_line(lines[i]) and not lines[i].mono and _control_fields(lines, i, heading_rank)[0]:
            raise two_header_blocks(first, f"the 'Document control' lines on page {lines[i].page + 1}")
    for table in tables:
        fields = _table_fields(table.rows)
        if all(len(row) <= 2 for row in table.rows) and len(set(fields) & set(FIELDS)) >= 3:
            raise two_header_blocks(first, f"the table on page {table.page + 1}")


def _body_size(lines: list[_Line], in_tables: Counter[float]) -> float:
    """The font size of most of the text, tables' text included: a document of ruled tables under bold
    numbered headings has little prose, and the headings' own size would otherwise pass for the body's."""
    sizes = in_tables.copy()
    for line in lines:
        sizes[line.size] += len(line.text)
    return sizes.most_common(1)[0][0]


def _heading_test(lines: list[_Line], body: float, in_tables: Counter[float]) -> Callable[[_Line], float | None]:
    """The size a heading line ranks by, or None for a line that is not a heading. A heading is set bold in a
    font larger than the body's, or in a regular font at least `_LARGER` times the body's when it reads as a
    heading (a short line with a letter, not ending a sentence), or bold at the body's own size when it reads
    as a heading and stands on its own (`_bold_body_headings`); those rank at the body's size, below every
    larger heading. A regular-weight size counts only while its text stays a small part of the body's (a lead
    paragraph set large is not a run of headings) and some line of it is followed by smaller text, as a
    heading is by what it heads (a short document's text set larger than its header block is not all
    headings)."""
    large: Counter[float] = Counter()
    leads: set[float] = set()
    for line, after in zip(lines, [*lines[1:], None], strict=True):  # in reading order
        if not line.bold and line.size >= body * _LARGER:
            large[line.size] += len(line.text)
            if after is not None and after.size < line.size - 0.5:
                leads.add(line.size)
    in_body = sum(len(line.text) for line in lines if line.size == body)
    sizes = {size for size, characters in large.items() if size in leads and characters <= max(in_body, 1) / 4}

    def is_larger_heading(line: _Line) -> bool:
        if line.size <= body + 0.5:
            return False
        return line.bold or (line.size in sizes and _reads_as_heading(line.text))

    bold_body = _bold_body_headings(lines, body, in_tables, is_larger_heading)

    def heading_rank(line: _Line) -> float | None:
        if is_larger_heading(line):
            return line.size
        return body if id(line) in bold_body else None

    return heading_rank


def _at_body_size(size: float, body: float) -> bool:
    return abs(size - body) <= 0.5


def _bold_body_headings(
    lines: list[_Line], body: float, in_tables: Counter[float], is_larger_heading: Callable[[_Line], bool]
) -> set[int]:
    """The ids of the lines that are headings set bold at the body's own size, as word processors' lower
    heading styles and house styles for contracts and policies often are. Such a line (or two, the first
    running out of room) reads as a heading, is no label ('Note', 'Owner: Treasury', 'Cut-off: noon',
    'Document control') nor list item, and stands on its own: the line before it ends its paragraph (a gap,
    a sentence's end, a heading, another page or column), the line after it is regular-weight text that
    does not continue it (a bold first line of a wrapping paragraph runs out of room, `_wraps`, or is
    continued in lower case), and no line sits beside it (a bold table header outside a ruled table). None
    when bold body-size text is over a third of the body's: a document set in bold throughout has no
    headings by weight."""
    # The header block's lines are metadata, not body text: set in bold, they would tip a short document over.
    at_body = [ln for ln in lines if _at_body_size(ln.size, body) and not ln.mono and not _is_header_line(ln)]
    bold = sum(len(line.text) for line in at_body if line.bold)
    in_cells = sum(n for size, n in in_tables.items() if _at_body_size(size, body))
    total = sum(len(line.text) for line in at_body) + in_cells
    if not bold or bold * 3 > total:
        return set()
    rows: Counter[tuple[int, int, int, int]] = Counter()  # lines per (page, band, column, rounded top)
    edges: dict[tuple[int, int, int], float] = {}  # the right edge of each column of text
    for line in lines:
        rows[(*line.order[:3], round(line.top))] += 1
        edges[line.order[:3]] = max(edges.get(line.order[:3], 0.0), line.right)

    def beside_another(line: _Line) -> bool:
        page, band, column, _ = line.order
        return any(rows[(page, band, column, round(line.top) + d)] > (d == 0) for d in (-1, 0, 1))

    def bold_at_body(line: _Line) -> bool:
        return line.bold and not line.mono and _at_body_size(line.size, body)

    def follows_closely(line: _Line, after: _Line) -> bool:  # the next line of the same paragraph
        return after.order[:3] == line.order[:3] and after.top - line.bottom <= after.size * 0.6

    found: set[int] = set()
    for i, line in enumerate(lines):
        if not bold_at_body(line):
            continue
        run = [line]  # a heading too long for its column wraps onto a second bold line
        second = lines[i + 1] if i + 1 < len(lines) else None
        if second is not None and bold_at_body(second) and follows_closely(line, second):
            run += [second] if _wraps(line, second, edges[line.order[:3]]) else []
        text = " ".join(ln.text for ln in run)
        if not _reads_as_heading(text) or _is_header_line(line) or _is_run_in_label(text):
            continue
        if _BULLET.match(text) and not text[:1].isdigit():
            continue  # a bold bullet item; '1. Purpose' may be a numbered heading
        before = lines[i - 1] if i else None
        after = lines[i + len(run)] if i + len(run) < len(lines) else None
        if after is None or after.bold or after.mono or not _at_body_size(after.size, body):
            continue
        if any(beside_another(ln) for ln in run):
            continue
        if before is not None and not (
            before.order[:3] != line.order[:3]
            or line.top - before.bottom > line.size * 0.6
            or before.text.rstrip().endswith((".", ":", "!", "?"))
            or is_larger_heading(before)
        ):
            continue  # the end of a paragraph set in bold, or a bold line inside one
        last = run[-1]
        if after.text[:1].islower() or (follows_closely(last, after) and _wraps(last, after, edges[last.order[:3]])):
            continue  # the bold start of a paragraph that wraps on
        found.update(id(ln) for ln in run)
    return found


def _is_header_line(line: _Line) -> bool:
    """The 'Document control' line or a header field's 'Label: value' line."""
    match = _LABEL.match(line.text)
    return _is_control_line(line) or (match is not None and field_key(match.group(1)) in FIELDS)


def _is_run_in_label(text: str) -> bool:
    """An admonition's label ('Note', 'Warning: Friday batches'), or a 'Label: value' line whose value starts
    in lower case or with a digit ('Cut-off: noon on business days', 'Limit: 250,000'); 'Appendix A:
    Contacts' and 'Step 2: Release the batch' read as headings."""
    match = _COLON.match(text)
    if match is None:
        return text.strip().lower().rstrip(".") in _RUN_IN_LABELS
    value = match.group(2)
    return match.group(1).strip().lower().rstrip(".") in _RUN_IN_LABELS or value[:1].islower() or value[:1].isdigit()


def _wraps(line: _Line, after: _Line, edge: float) -> bool:
    """Whether `line` ends where its column ran out of room rather than where its text ended: it reaches the
    last tenth of the column, or the first word of the line after it (at that line's width per character)
    would not have fitted after it, as in ragged-right text that wrapped before a long word."""
    if line.right >= edge - (edge - line.left) * 0.1:
        return True
    per_character = (after.right - after.left) / max(len(after.text), 1)
    return line.right + per_character * (len(after.text.split()[0]) + 1) > edge


def _reads_as_heading(text: str) -> bool:
    text = text.strip()
    return (
        0 < len(text.split()) <= _HEADING_WORDS
        and any(c.isalpha() for c in text)
        and not text.endswith((".", ",", ";", ":", "!", "?"))
    )


def _blocks(lines: list[_Line], tables: list[_TableAt], heading_rank: Callable[[_Line], float | None]) -> list[Block]:
    ranks = {id(ln): rank for ln in lines if (rank := heading_rank(ln)) is not None}
    level_of = {rank: i + 1 for i, rank in enumerate(sorted(set(ranks.values()), reverse=True))}
    items: list[tuple[tuple[int, int, int, float], object]] = [(ln.order, ln) for ln in lines]
    items += [(t.order, t) for t in tables]
    items.sort(key=lambda item: item[0])

    blocks: list[Block] = []
    paragraph: list[_Line] = []

    def flush() -> None:
        if paragraph:
            blocks.append(Paragraph(_join(paragraph)))
            paragraph.clear()

    last: _Line | None = None  # the heading line just read
    for _, item in items:
        if isinstance(item, _TableAt):
            last = None
            flush()
            previous = blocks[-1] if blocks else None
            if isinstance(previous, Table) and previous.rows[0] == item.rows[0] and len(item.rows) > 1:
                blocks[-1] = Table(previous.rows + tuple(item.rows[1:]))  # continued under a repeated header
            else:
                blocks.append(Table(tuple(item.rows)))
            continue
        assert isinstance(item, _Line)
        rank = ranks.get(id(item))
        if rank is not None:
            flush()
            previous = blocks[-1] if blocks else None
            if isinstance(previous, Heading) and last is not None and _continues_heading(last, item):
                blocks[-1] = Heading(previous.level, f"{previous.text} {item.text}")  # a heading set on two lines
            else:
                blocks.append(Heading(level_of[rank], item.text))
            last = item
            continue
        last = None
        if paragraph and _starts_new_paragraph(paragraph, item):
            flush()
        paragraph.append(item)
    flush()
    return blocks


_SECTION_NUMBER = re.compile(r"^(\d+(\.\d+)*[.)]?|[A-Z][.)]|Article|Section|Chapter|Part|Annex|Appendix)\s", re.I)


def _continues_heading(previous: _Line, line: _Line) -> bool:
    """The next line of a heading too long for one line: same size, right below, not numbered itself."""
    return (
        line.size == previous.size
        and line.page == previous.page
        and previous.top < line.top
        and line.top - previous.bottom < line.size * 0.5
        and not _SECTION_NUMBER.match(line.text)
    )


def _starts_new_paragraph(paragraph: list[_Line], line: _Line) -> bool:
    previous = paragraph[-1]
    if previous.mono != line.mono:
        return True
    if _BULLET.match(line.text) and not line.mono:
        return True
    if line.page != previous.page or line.top < previous.top - line.size:  # the next page, or the next column
        return previous.text.rstrip().endswith((".", ":", "!", "?"))
    if _BULLET.match(paragraph[0].text) and line.left < paragraph[0].left - 1:
        return True  # text back at the margin after a list item's hanging indent
    return line.top - previous.bottom > line.size * 0.6


def _join(lines: list[_Line]) -> str:
    if lines[0].mono:
        return "```\n" + "\n".join(ln.text for ln in lines) + "\n```"
    text = ""
    for line in lines:
        piece = _BULLET.sub(lambda m: "- " if not m.group(1)[0].isdigit() else f"{m.group(1)} ", line.text)
        if not text:
            text = piece
        elif text.endswith("-") and not text.endswith(" -"):
            text += piece  # a word broken at the end of a line
        else:
            text += " " + piece
    return text
