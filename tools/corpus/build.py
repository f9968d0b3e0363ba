#!/usr/bin/env python3
"""Build the corpus's PDF and DOCX files from their Markdown sources, then write corpus/MANIFEST.csv.

    python tools/corpus/build.py                 # every tools/corpus/sources/*.{pdf,docx}.md, then the manifest
    python tools/corpus/build.py --only CMP-SOP-006
    python tools/corpus/build.py --check         # exit 1, naming the files, if committed output is stale
    python tools/corpus/build.py --sources DIR --out DIR   # build elsewhere (the tests do)

A source is `<DOC-CODE>[_v<version>].pdf.md` or `.docx.md`: YAML front matter with the header-block fields
(docs/header-block.md), then Markdown; its `# Title` line is not repeated (the title comes from the front
matter). Output: `<out>/<department>/<DOC-CODE>[_v<version>].pdf|docx`, out defaulting to corpus/.

What a parser sees (checked with PyMuPDF 2.0 / python-docx 1.2; tests/corpus/test_build_script.py):
* PDF text is drawn with TextWriter in MuPDF's built-in Helvetica, Helvetica-Bold, Helvetica-Oblique,
  Helvetica-BoldOblique and Courier (embedded subsets with ToUnicode); glyphs they lack fall back to MuPDF's
  Noto fonts. Not the Story/HTML engine: it always ligates ("first" extracts as U+FB01 "rst", and PyMuPDF
  keeps ligatures by default); here every character is its own glyph.
* Sizes: title 20pt bold; `##` 15pt bold; `###` 12.5pt bold; `####` 11pt bold; body, list and table text
  10pt; code 9pt Courier. get_text("dict") span flags: bold 20, regular 4, italic 6, Courier 12. A heading is
  "bold and size > 10" (bold words and table header cells are 10pt bold). "Document control" and each
  `Label: value` line are 10pt regular lines. doc.get_toc() lists every heading (level 1 = `##`). List
  markers ("•", "1.") extract on the same line as their item's text.
* Tables are ruled grids (0.6pt borders, grey header row) that page.find_tables() finds with its defaults
  (layout model on). Rows never split; a table crossing a page repeats its header row there, so it is found
  as one table per page. Table.to_markdown() and get_text("text", clip=cell) give exact cell text (spaces
  around bold/code kept: at a style change the space is left to MuPDF, which makes it a span of its own).
  find_tables().extract() quirk (PyMuPDF 2.0, any PDF): spaces and low punctuation (, . -) have glyph tops
  far below the letters' and get clustered as a line of their own, so spaces vanish and words closer than
  3pt merge (10pt Helvetica's space is 2.78pt: words here are set 0.8pt further apart, which keeps them
  apart), while "$5,000" still comes out as "$5000", newline, ",". A larger y_tolerance does not help: it
  interleaves the lines of wrapped cells.
* DOCX: `Title` paragraph; control table (its first row is one merged "Document control" cell, which
  python-docx returns twice in row.cells); `Heading 1`-`Heading 3` for `##`-`####`; `List Bullet[ 2]`,
  `List Number[ 2]` (each numbered list restarts); `Table Grid` tables with a bold first row; fenced code as
  one paragraph per line in style `Code` (Courier New 9pt). Core properties and zip timestamps are fixed.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import html
import io
import json
import re
import shutil
import sys
import tempfile
import zipfile
from datetime import datetime
from pathlib import Path

import docx
import pymupdf
import yaml
from docx.oxml import parse_xml
from docx.oxml.ns import nsdecls
from docx.shared import Pt
from markdown_it import MarkdownIt

REPO = Path(__file__).resolve().parents[2]
FIELDS = {"doc_code": "Doc code", "title": "Title", "version": "Version", "status": "Status"}  # key: label
FIELDS.update(effective_date="Effective date", owner="Owner", department="Department")
FIELDS.update(classification="Classification", regulatory_refs="Regulatory refs")
DEPARTMENTS = dict(compliance="CMP", risk="RSK", payments="PAY", lending="LND", support="CSP")  # doc-code prefix
DEPARTMENTS.update(security="SEC", engineering="ENG", finance="FIN", legal="LEG")
FORMATS = {".md": "markdown", ".pdf": "pdf", ".docx": "docx", ".html": "html", ".htm": "html"}
FORMATS.update({".yaml": "openapi", ".yml": "openapi", ".json": "openapi"})
SOURCE_NAME = re.compile(r"^([A-Z]{3}-[A-Z]{3}-\d{3})(?:_v(\d+(?:\.\d+)*))?\.(pdf|docx)\.md$")
MANIFEST_COLUMNS = ["path", "doc_code", "title", "department", "format", "classification", "version", "status"]


class HeaderError(Exception):
    pass


# ---------------------------------------------------------------- header blocks
def check_header(raw: dict, where: str) -> dict:
    """The nine fields as strings (refs as a list); fails naming the file and the first bad field."""
    meta = {}
    for key, label in FIELDS.items():
        value = raw.get(key)
        if key == "regulatory_refs" and key in raw:  # may be empty; a string is read as `a; b`
            items = value if isinstance(value, list) else str(value or "").split(";")
            meta[key] = [str(v).strip() for v in items if str(v).strip()]
        elif value is None or not str(value).strip():
            raise HeaderError(f"{where}: header field '{key}' ({label}) is missing or empty")
        else:
            meta[key] = str(value).strip()
    valid = {
        "status": meta["status"] in ("effective", "superseded", "draft"),
        "classification": meta["classification"] in ("public", "internal", "confidential", "restricted"),
        "department": meta["department"] in DEPARTMENTS,
        "doc_code": re.fullmatch(r"[A-Z]{3}-(POL|SOP|RBK|API|STD|GDE|REF|VND)-\d{3}", meta["doc_code"])
        and meta["doc_code"][:3] == DEPARTMENTS.get(meta["department"]),
        "version": re.fullmatch(r"\d+(\.\d+)*", meta["version"]),
        "effective_date": re.fullmatch(r"\d{4}-\d\d-\d\d", meta["effective_date"]),
    }
    for key, ok in valid.items():
        if not ok:
            raise HeaderError(f"{where}: header field '{key}' is invalid: {meta[key]!r} (docs/header-block.md)")
    return meta


def split_front_matter(text: str, where: str) -> tuple[dict, str]:
    # BaseLoader keeps every scalar a string: version 3.10 stays "3.10", dates stay ISO text.
    m = re.match(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)", text, re.S)
    raw = yaml.load(m.group(1), Loader=yaml.BaseLoader) if m else None
    if not isinstance(raw, dict):
        raise HeaderError(f"{where}: no YAML front matter (header block) at the top of the file")
    return raw, text[m.end() :]


def html_control_pairs(text: str) -> dict:
    """dt/dd pairs of the first <dl class="document-control">, tags stripped, whitespace collapsed."""
    dl = re.search(r'<dl\b[^>]*class="[^"]*\bdocument-control\b[^"]*"[^>]*>(.*?)</dl>', text, re.S | re.I)
    pairs = re.findall(r"<dt\b[^>]*>(.*?)</dt>\s*<dd\b[^>]*>(.*?)</dd>", dl.group(1) if dl else "", re.S | re.I)
    return {plain(k): plain(v) for k, v in pairs}


def plain(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def read_header(path: Path, sources: Path) -> dict:
    where, fmt = str(path), FORMATS[path.suffix.lower()]
    if fmt in ("pdf", "docx"):  # a binary's header block is rendered from its source
        source = sources / (path.name + ".md")
        if not source.exists():
            raise HeaderError(f"{where}: no source {source} to read its header block from")
        return check_header(split_front_matter(source.read_text(encoding="utf-8"), str(source))[0], where)
    text = path.read_text(encoding="utf-8")
    if fmt == "markdown":
        return check_header(split_front_matter(text, where)[0], where)
    if fmt == "html":
        by_label = {label.lower(): key for key, label in FIELDS.items()}
        pairs = {by_label.get(k.lower()): v for k, v in html_control_pairs(text).items()}
        if not pairs:
            raise HeaderError(f'{where}: no <dl class="document-control"> header block')
        return check_header(pairs, where)
    spec = json.loads(text) if path.suffix.lower() == ".json" else yaml.load(text, Loader=yaml.BaseLoader)
    info = (spec or {}).get("info") or {}
    if not isinstance(info.get("x-document-control"), dict):
        raise HeaderError(f"{where}: header block info.x-document-control is missing")
    control = {**info["x-document-control"], "title": info.get("title"), "version": info.get("version")}
    return check_header(control, where)


# ---------------------------------------------------------------- Markdown -> blocks, shared by both renderers
def inline_runs(token) -> list[tuple[str, bool, bool, bool]]:
    """(text, bold, italic, code) runs of an inline token; links keep their text only."""
    runs, bold, italic = [], 0, 0
    for t in token.children or []:
        if t.type in ("text", "code_inline", "image", "softbreak", "hardbreak"):
            text = {"softbreak": " ", "hardbreak": "\n"}.get(t.type, t.content)
            runs.append((text, bold > 0, italic > 0, t.type == "code_inline"))
        bold += {"strong_open": 1, "strong_close": -1}.get(t.type, 0)
        italic += {"em_open": 1, "em_close": -1}.get(t.type, 0)
    return runs


def parse_blocks(body: str) -> list[tuple]:
    """('heading', level 2-4, text) | ('para', runs, item) | ('code', text) | ('table', rows, n_header).
    item is None outside lists, else dict(depth, ordered, number, list_id, first) of the list item."""
    tokens = MarkdownIt("commonmark").enable("table").parse(body)
    blocks, lists, i = [], [], 0  # lists: a stack of [ordered, number, id, at item start]
    while i < len(tokens):
        t = tokens[i]
        if t.type == "heading_open":
            text = "".join(r[0] for r in inline_runs(tokens[i + 1])).strip()
            if t.tag != "h1" or blocks:  # the body's leading `# Title` is rendered from the front matter
                blocks.append(("heading", min(max(int(t.tag[1]), 2), 4), text))
        elif t.type == "paragraph_open":
            item = None
            if lists:
                ordered, number, list_id, first = lists[-1]
                item = dict(depth=len(lists) - 1, ordered=ordered, number=number, list_id=list_id, first=first)
                lists[-1][3] = False
            blocks.append(("para", inline_runs(tokens[i + 1]), item))
        elif t.type in ("bullet_list_open", "ordered_list_open"):
            lists.append([t.type == "ordered_list_open", int(t.attrGet("start") or 1), i, False])
        elif t.type in ("list_item_open", "list_item_close"):
            lists[-1][3] = t.type == "list_item_open"
            lists[-1][1] += t.type == "list_item_close"
        elif t.type in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
        elif t.type in ("fence", "code_block"):
            blocks.append(("code", t.content.rstrip("\n").expandtabs(4), len(lists)))
        elif t.type == "table_open":
            rows, header = [], 0
            while tokens[i].type != "table_close":
                i += 1
                if tokens[i].type == "tr_open":
                    rows.append([])
                elif tokens[i].type in ("th_open", "td_open"):
                    rows[-1].append(inline_runs(tokens[i + 1]))
                    header = header or (tokens[i].type == "th_open" and len(rows) == 1)
            blocks.append(("table", rows, int(header)))
        i += 1
    return blocks


# ---------------------------------------------------------------- DOCX
def docx_runs(paragraph, runs, bold_all=False):
    for text, bold, italic, code in runs:
        run = paragraph.add_run(text)
        run.bold, run.italic = (bold or bold_all) or None, italic or None
        if code:
            run.font.name = "Courier New"


def restart_numbering(document, style: str, start: int) -> int:
    """A new w:num over the style's list definition, so that each numbered list restarts."""
    numbering = document.part.numbering_part.element
    style_num = document.styles[style].element.pPr.numPr.numId.val
    abstract = numbering.xpath(f'./w:num[@w:numId="{style_num}"]/w:abstractNumId/@w:val')[0]
    num_id = max(int(n) for n in numbering.xpath("./w:num/@w:numId")) + 1
    override = f'<w:lvlOverride w:ilvl="0"><w:startOverride w:val="{start}"/></w:lvlOverride>'
    numbering.append(
        parse_xml(f'<w:num {nsdecls("w")} w:numId="{num_id}"><w:abstractNumId w:val="{abstract}"/>{override}</w:num>')
    )
    return num_id


def build_docx(meta: dict, blocks: list) -> bytes:
    document = docx.Document()
    code = document.styles.add_style("Code", 1)  # 1: a paragraph style
    code.base_style, code.font.name, code.font.size = document.styles["No Spacing"], "Courier New", Pt(9)
    document.add_paragraph(meta["title"], style="Title")
    table = document.add_table(rows=1 + len(FIELDS), cols=2)
    table.style = "Table Grid"
    table.rows[0].cells[0].merge(table.rows[0].cells[1]).paragraphs[0].add_run("Document control").bold = True
    for row, (key, label) in zip(table.rows[1:], FIELDS.items(), strict=True):
        row.cells[0].paragraphs[0].add_run(label).bold = True
        row.cells[1].text = "; ".join(meta[key]) if key == "regulatory_refs" else meta[key]
    num_ids: dict[int, int] = {}
    for kind, *rest in blocks:
        if kind == "heading":
            document.add_paragraph(rest[1], style=f"Heading {rest[0] - 1}")
        elif kind == "para" and rest[1] is None:
            docx_runs(document.add_paragraph(), rest[0])
        elif kind == "para":
            runs, item = rest
            style = ("List Number" if item["ordered"] else "List Bullet") + (" 2" if item["depth"] else "")
            paragraph = document.add_paragraph(style=style if item["first"] else None)
            if not item["first"]:  # a later paragraph of the same item: indented, no marker
                paragraph.paragraph_format.left_indent = Pt(18 * (item["depth"] + 1))
            elif item["ordered"] and item["depth"] == 0:
                if item["list_id"] not in num_ids:
                    num_ids[item["list_id"]] = restart_numbering(document, style, item["number"])
                num_pr = paragraph._p.get_or_add_pPr().get_or_add_numPr()
                num_pr.get_or_add_numId().val = num_ids[item["list_id"]]
            docx_runs(paragraph, runs)
        elif kind == "code":
            for line in rest[0].split("\n"):
                document.add_paragraph(line, style="Code").paragraph_format.left_indent = Pt(18 * rest[1])
        elif kind == "table":
            rows, n_header = rest
            grid = document.add_table(rows=len(rows), cols=max(len(r) for r in rows))
            grid.style = "Table Grid"
            for r, cells in enumerate(rows):
                for c, runs in enumerate(cells):
                    docx_runs(grid.rows[r].cells[c].paragraphs[0], runs, bold_all=r < n_header)
    props, when = document.core_properties, datetime.fromisoformat(meta["effective_date"] + "T00:00:00+00:00")
    props.title, props.subject, props.author = meta["title"], meta["doc_code"], meta["owner"]
    props.identifier, props.version, props.category = meta["doc_code"], meta["version"], meta["department"]
    props.keywords, props.comments = "; ".join(meta["regulatory_refs"]), ""
    props.last_modified_by, props.revision = "tools/corpus/build.py", 1
    props.created = props.modified = props.last_printed = when  # never the clock
    buf = io.BytesIO()
    document.save(buf)
    return fixed_zip(buf.getvalue())


def fixed_zip(data: bytes) -> bytes:
    """The same zip with fixed timestamps and modes, in python-docx's (deterministic) entry order."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            entry = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            entry.compress_type, entry.external_attr = zipfile.ZIP_DEFLATED, 0o644 << 16
            dst.writestr(entry, src.read(info.filename))
    return out.getvalue()


# ---------------------------------------------------------------- PDF
PAGE_W, PAGE_H, MARGIN, BODY, CODE, TITLE = 612, 792, 60, 10, 9, 20  # US Letter, points
HEADING_SIZES = {2: 15, 3: 12.5, 4: 11}
WORD_GAP = 0.8  # extra points between words: keeps find_tables().extract() from gluing them (see top)
CELL_PAD, INDENT = 4, 16
BASE14 = {(0, 0): "helv", (1, 0): "hebo", (0, 1): "heit", (1, 1): "hebi"}


class PdfWriter:
    """A small flowing layout: wrapped rich-text lines, list indents, ruled tables, page breaks."""

    def __init__(self):
        self.doc, self.toc, self.page = pymupdf.open(), [], None
        styles = [(b, i, c) for b in (0, 1) for i in (0, 1) for c in (0, 1)]
        self.fonts = {(b, i, c): pymupdf.Font("cour" if c else BASE14[b, i]) for b, i, c in styles}
        self.new_page()

    def new_page(self):
        self.finish_page()
        self.page = self.doc.new_page(width=PAGE_W, height=PAGE_H)
        self.writer, self.y = pymupdf.TextWriter(self.page.rect), MARGIN

    def finish_page(self):
        if self.page is not None:
            self.writer.write_text(self.page)

    def need(self, height: float):
        if self.y + height > PAGE_H - MARGIN and self.y > MARGIN:
            self.new_page()

    def words(self, runs, bold_all=False) -> list:
        """Words as lists of (text, font) pieces: `**a**b` is one word in two fonts; "\n" forces a break."""
        words, word = [], []
        for text, bold, italic, code in runs:
            font = self.fonts[int(bold or bold_all), int(italic), int(code)]
            for piece in re.split(r"(\s+)", text):
                if piece.strip():
                    word.append((piece, font))
                elif piece:
                    words += ([word] if word else []) + (["\n"] if "\n" in piece else [])
                    word = []
        return [*words, word] if word else words

    def wrap(self, runs, width: float, size: float, bold_all=False) -> list[list]:
        """Greedy line breaking into lines of words; a word wider than the line is cut."""
        lines, line, x = [], [], 0.0
        for word in self.words(runs, bold_all):
            if word == "\n":
                lines, line, x = [*lines, line], [], 0.0
                continue
            w = sum(f.text_length(t, size) for t, f in word)
            gap = word[0][1].text_length(" ", size) + WORD_GAP
            if line and x + gap + w > width:
                lines, line, x = [*lines, line], [], 0.0
            while w > width and len(word) == 1 and len(word[0][0]) > 1:
                (text, font), cut = word[0], max(1, int(len(word[0][0]) * width / w) - 1)
                lines, line, x = [*lines, [*line, [(text[:cut], font)]]], [], 0.0
                word, w = [(text[cut:], font)], font.text_length(text[cut:], size)
            x, line = x + (gap if line else 0) + w, [*line, word]
        return [*lines, line] if line or not lines else lines

    def draw_line(self, line, x: float, baseline: float, size: float):
        for n, word in enumerate(line):
            for k, (text, font) in enumerate(word):
                gap = k == len(word) - 1 and n < len(line) - 1
                # A real space glyph only inside a style run: at a style change MuPDF synthesizes the space
                # as a span of its own, which Table.to_markdown() keeps (it strips spans' trailing spaces).
                glyph = gap and line[n + 1][0][1] is font
                _, end = self.writer.append((x, baseline), text + " " * glyph, font=font, fontsize=size)
                x = end.x + (WORD_GAP + (0 if glyph else font.text_length(" ", size))) * gap

    def text(self, runs, size=BODY, indent=0.0, label=None, space_after=5.0):
        lead = size * 1.35
        for n, line in enumerate(self.wrap(runs, PAGE_W - 2 * MARGIN - indent, size)):
            self.need(lead)
            if label and n == 0:  # right-aligned close to the text: extraction keeps "1. text" on one line
                font = self.fonts[0, 0, 0]
                x = MARGIN + indent - 4 - font.text_length(label, size)
                self.writer.append((x, self.y + size), label, font=font, fontsize=size)
            self.draw_line(line, MARGIN + indent, self.y + size, size)
            self.y += lead
        self.y += space_after

    def heading(self, level: int, title: str):
        size = HEADING_SIZES[level]
        self.y += size * 0.8
        self.need(size * 1.35 + 3 * BODY * 1.35)  # keep a heading with the start of its section
        self.toc.append((level, title, self.page.number + 1))
        self.text([(title, True, False, False)], size=size, space_after=4)

    def code(self, text: str, depth: int):
        font, lead, indent = self.fonts[0, 0, 1], CODE * 1.3, 12 + INDENT * depth
        per_line = int((PAGE_W - 2 * MARGIN - indent) / font.text_length("M", CODE))
        for raw in text.split("\n"):
            for start in range(0, max(len(raw), 1), per_line):  # long lines wrap by characters
                self.need(lead)
                piece = raw[start : start + per_line]
                self.writer.append((MARGIN + indent, self.y + CODE), piece, font=font, fontsize=CODE)
                self.y += lead
        self.y += 6

    def column_widths(self, rows, n_header: int) -> list[float]:
        """Widths proportional to each column's one-line width; when too wide, shrunk but never below
        the column's longest word, nor below its header on one line (wrapped headers confuse parsers)."""

        def measure(runs, bold) -> tuple[float, float]:  # (width on one line, widest word)
            words = [sum(f.text_length(t, BODY) for t, f in w) for w in self.words(runs, bold) if w != "\n"]
            return sum(words) + 3.6 * len(words), max(words, default=0)

        total, pad = PAGE_W - 2 * MARGIN, 2 * CELL_PAD + 1
        cols = list(zip(*[[measure(c, r < n_header) for c in row] for r, row in enumerate(rows)], strict=True))
        natural = [max(w for w, _ in col) + pad for col in cols]
        least = [
            max(max(x for _, x in col), min(col[0][0] if n_header else 0, total / len(cols))) + pad for col in cols
        ]
        if sum(natural) > total:
            slack, spare = [n - m for n, m in zip(natural, least, strict=True)], max(total - sum(least), 0)
            natural = [m + spare * s / (sum(slack) or 1) for m, s in zip(least, slack, strict=True)]
        return [n * total / sum(natural) for n in natural]  # always the full measure

    def table(self, rows, n_header: int):
        lead, cols = BODY * 1.35, max(len(r) for r in rows)
        rows = [r + [[]] * (cols - len(r)) for r in rows]
        widths = self.column_widths(rows, n_header)
        laid = [
            [self.wrap(cell, w - 2 * CELL_PAD, BODY, r < n_header) for cell, w in zip(row, widths, strict=True)]
            for r, row in enumerate(rows)
        ]
        heights = [max(len(lines) for lines in row) * lead + 2 * CELL_PAD for row in laid]

        def draw_row(r: int):
            x, fill = MARGIN, (0.9, 0.9, 0.9) if r < n_header else None
            for lines, w in zip(laid[r], widths, strict=True):
                cell = pymupdf.Rect(x, self.y, x + w, self.y + heights[r])
                self.page.draw_rect(cell, color=(0, 0, 0), fill=fill, width=0.6)
                for n, line in enumerate(lines):
                    self.draw_line(line, x + CELL_PAD, self.y + CELL_PAD + n * lead + BODY * 0.95, BODY)
                x += w
            self.y += heights[r]

        self.need(sum(heights[: n_header + 1]))
        for r in range(len(rows)):
            if r >= n_header and self.y + heights[r] > PAGE_H - MARGIN:
                self.new_page()  # rows never split; the header row is repeated on the new page
                for h in range(n_header):
                    draw_row(h)
            draw_row(r)
        self.y += 8


def build_pdf(meta: dict, blocks: list) -> bytes:
    pdf = PdfWriter()
    pdf.text([(meta["title"], True, False, False)], size=TITLE, space_after=10)
    pdf.text([("Document control", False, False, False)], space_after=2)  # not bold: no heading
    for key, label in FIELDS.items():
        value = "; ".join(meta[key]) if key == "regulatory_refs" else meta[key]
        pdf.text([(f"{label}: {value}", False, False, False)], space_after=0)
    pdf.y += 8
    in_list = False
    for kind, *rest in blocks:
        item = rest[1] if kind == "para" else None
        pdf.y += 4 if in_list and not item else 0  # list items sit close; open a gap after the list
        in_list = item is not None
        if kind == "heading":
            pdf.heading(*rest)
        elif kind == "para" and item is None:
            pdf.text(rest[0])
        elif kind == "para":
            label = (f"{item['number']}." if item["ordered"] else "\u2022") if item["first"] else None
            pdf.text(rest[0], indent=INDENT * (item["depth"] + 1), label=label, space_after=2)
        elif kind == "code":
            pdf.code(*rest)
        elif kind == "table":
            pdf.table(*rest)
    pdf.finish_page()
    toc: list[list] = []
    for level, title, page in pdf.toc:  # set_toc refuses level jumps (## then ####): clamp them
        toc.append([min(level - 1, toc[-1][0] + 1 if toc else 1), title, page])
    pdf.doc.set_toc(toc)
    stamp = "D:" + meta["effective_date"].replace("-", "") + "000000Z"  # never the clock
    keywords = "; ".join(meta["regulatory_refs"])
    info = dict(title=meta["title"], author=meta["owner"], subject=meta["doc_code"], keywords=keywords)
    info.update(creator="tools/corpus/build.py", producer="PyMuPDF", creationDate=stamp, modDate=stamp)
    pdf.doc.set_metadata(info)
    pdf.doc.subset_fonts()
    return pdf.doc.tobytes(garbage=4, deflate=True, no_new_id=True)


# ---------------------------------------------------------------- driver
def build_sources(sources: Path, out: Path, only: str | None) -> tuple[list[Path], list[str]]:
    built, errors = [], []
    for source in sorted(p for p in sources.glob("*.md") if not p.name.startswith((".", "_"))):
        m = SOURCE_NAME.match(source.name)
        if not m or (only and m.group(1) != only):
            if not m and source.name.lower() != "readme.md":
                errors.append(f"{source}: name is not <DOC-CODE>[_v<version>].pdf.md or .docx.md")
            continue
        try:
            raw, body = split_front_matter(source.read_text(encoding="utf-8"), str(source))
            meta = check_header(raw, str(source))
            if meta["doc_code"] != m.group(1) or m.group(2) not in (None, meta["version"]):
                raise HeaderError(f"{source}: name does not match its doc_code and version")
            data = (build_pdf if m.group(3) == "pdf" else build_docx)(meta, parse_blocks(body))
            target = out / meta["department"] / source.name.removesuffix(".md")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            built.append(target)
        except Exception as exc:  # one bad source must not hide the others
            errors.append(str(exc) if isinstance(exc, HeaderError) else f"{source}: {type(exc).__name__}: {exc}")
    return built, errors


def manifest(corpus: Path, sources: Path) -> tuple[str, list[str]]:
    """CSV text of every document under corpus (paths as corpus/...), sorted by path; and the errors."""
    rows, errors = [], []
    for path in sorted(corpus.rglob("*")):
        rel = path.relative_to(corpus)
        skipped = any(part.startswith((".", "_")) for part in rel.parts) or rel.as_posix() == "MANIFEST.csv"
        if skipped or not path.is_file() or path.suffix.lower() not in FORMATS:
            continue
        try:
            meta = read_header(path, sources)
            expected = f"{meta['department']}/{meta['doc_code']}"
            if rel.with_suffix("").as_posix() not in (expected, f"{expected}_v{meta['version']}"):
                raise HeaderError(f"{path}: its header block says it belongs at {expected}[_v{meta['version']}]")
        except (HeaderError, ValueError, yaml.YAMLError) as exc:
            errors.append(str(exc) if isinstance(exc, HeaderError) else f"{path}: {exc}")
            continue
        meta.update(path=f"corpus/{rel.as_posix()}", format=FORMATS[path.suffix.lower()])
        rows.append([meta[c] for c in MANIFEST_COLUMNS] + [hashlib.sha256(path.read_bytes()).hexdigest()])
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([[*MANIFEST_COLUMNS, "sha256"], *sorted(rows)])
    return buf.getvalue(), errors


def check(sources: Path, corpus: Path) -> list[str]:
    """Rebuild a copy of the corpus; list every committed binary or manifest that differs from it."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "corpus"
        shutil.copytree(corpus, copy) if corpus.exists() else copy.mkdir()
        built, problems = build_sources(sources, copy, None)
        text, errors = manifest(copy, sources)
        (copy / "MANIFEST.csv").write_text(text, encoding="utf-8")
        for fresh in [*built, copy / "MANIFEST.csv"]:
            committed = corpus / fresh.relative_to(copy)
            if not committed.exists():
                problems.append(f"{committed}: missing (run tools/corpus/build.py)")
            elif committed.read_bytes() != fresh.read_bytes():
                problems.append(f"{committed}: differs from what the sources produce")
    return problems + errors


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sources", type=Path, default=REPO / "tools/corpus/sources")
    parser.add_argument("--out", type=Path, default=REPO / "corpus", help="the corpus root to write into")
    parser.add_argument("--check", action="store_true", help="verify the committed files instead of writing")
    parser.add_argument("--only", metavar="CODE", help="build only this doc code's sources")
    args = parser.parse_args(argv)
    if args.check:
        problems = check(args.sources, args.out)
        print("\n".join(problems) or "corpus is up to date", file=sys.stderr if problems else sys.stdout)
        return 1 if problems else 0
    args.out.mkdir(parents=True, exist_ok=True)
    built, errors = build_sources(args.sources, args.out, args.only)
    print("".join(f"built {path}\n" for path in built), end="")
    text, header_errors = manifest(args.out, args.sources)
    if errors or header_errors:
        print("\n".join(["FAILED:", *errors, *header_errors, "MANIFEST.csv not written"]), file=sys.stderr)
        return 1
    (args.out / "MANIFEST.csv").write_text(text, encoding="utf-8")
    print(f"wrote {args.out / 'MANIFEST.csv'} ({text.count(chr(10)) - 1} documents)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
