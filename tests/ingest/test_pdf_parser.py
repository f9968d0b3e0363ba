"""PDF: running headers and footers go, and nothing else that sits at a page's top or bottom. Every file is
a real PDF written in the test with pymupdf, the library the parser reads it with."""

from __future__ import annotations

from typing import Any

import pymupdf
import pytest

from ingest.document import HeaderError, Heading, Paragraph, ParseError, Table
from ingest.parsers import parse_document, pdf

FIELDS = {
    "Doc code": "PAY-REF-961",
    "Title": "Payments Ledger",
    "Version": "1.0",
    "Status": "effective",
    "Effective date": "2026-01-01",
    "Owner": "Payments Operations Lead",
    "Department": "payments",
    "Classification": "internal",
    "Regulatory refs": "none",
}
PAGES = 6
ROWS = 8


def ledger_row(page: int, row: int) -> str:
    """Dates and amounts that do not move in step with the page number."""
    day, amount = (page * 7 + row) % 28 + 1, (page * 37 + row * 11) % 900 + 100
    return f"2026-03-{day:02d} Wire to vendor {page * ROWS + row} {amount}.00"


def _headed_page(document: Any, number: int) -> tuple[Any, list[tuple[str, float, str]]]:
    """A new page `number` (from 1) with the running header 'ACME Confidential — Page N', and the lines (text,
    size, font) to set below it: on page 1, the title and the header block."""
    page = document.new_page()
    writer = pymupdf.TextWriter(page.rect)  # a Unicode font, for the em dash
    writer.append((72, 30), f"ACME Confidential — Page {number}", fontsize=9)
    writer.write_text(page)
    lines: list[tuple[str, float, str]] = []
    if number == 1:
        lines += [(FIELDS["Title"], 20, "hebo"), ("Document control", 11, "helv")]
        lines += [(f"{label}: {value}", 11, "helv") for label, value in FIELDS.items()]
    return page, lines


def ledger_pdf(*, footer: bool) -> bytes:
    """Each page: the running header 'ACME Confidential — Page N', then (after page 1) an 'Article N' heading
    at the top, then ledger rows down to the page's last line, or to a page-number footer."""
    document = pymupdf.open()
    for number in range(PAGES):
        page, lines = _headed_page(document, number + 1)
        lines += [(f"Article {number + 1}", 14, "hebo"), ("Batch reference", 11, "helv")]
        lines.append((f"{4471093 + number}", 11, "helv"))  # a line of digits only, in the body
        lines += [(ledger_row(number, row), 11, "helv") for row in range(ROWS)]
        y = 60.0
        for text, size, font in lines:
            page.insert_text((72, y), text, fontsize=size, fontname=font)
            y += size * 1.6
        if footer:
            page.insert_text((290, 810), f"{number + 1}", fontsize=9, fontname="helv")
    return document.tobytes()


def texts(data: bytes) -> list[str]:
    document = parse_document(data, "ledger.pdf", max_bytes=5_000_000)
    out = []
    for block in document.blocks:
        if isinstance(block, Table):
            out += [" ".join(row) for row in block.rows]
        elif isinstance(block, Heading | Paragraph):
            out.append(block.text)
    return out


@pytest.mark.parametrize("footer", [False, True], ids=["rows-to-the-foot", "page-number-footer"])
def test_page_top_article_headings_last_ledger_rows_and_digit_lines_survive_while_the_running_lines_go(footer):
    blocks = texts(ledger_pdf(footer=footer))
    text = "\n".join(blocks)
    assert [f"Article {n}" for n in range(1, PAGES + 1)] == [b for b in blocks if b.startswith("Article")]
    for number in range(PAGES):
        assert ledger_row(number, ROWS - 1) in text, number  # the last row of every page
        assert f"Batch reference {4471093 + number}" in text
    assert "ACME Confidential" not in text
    if footer:  # each page number alone at the foot is a running line too
        assert not [b for b in blocks if b.strip().isdigit()]


def test_a_line_repeated_verbatim_atop_most_pages_is_dropped_but_a_last_line_whose_numbers_vary_is_kept():
    document = pymupdf.open()
    for number in range(4):
        page = document.new_page()
        page.insert_text((72, 36), "Internal use only", fontsize=9, fontname="helv")
        lines = [(FIELDS["Title"], 20, "hebo"), ("Document control", 11, "helv")] if number == 0 else []
        lines += [(f"{label}: {value}", 11, "helv") for label, value in FIELDS.items()] if number == 0 else []
        lines += [(f"{number + 1}. Section", 14, "hebo"), ("Wire cut-off is 15:00 on business days.", 11, "helv")]
        lines.append((f"Reviewed by desk {number * 3 + 2} of 12", 11, "helv"))  # the page's last line
        y = 72.0
        for text, size, font in lines:
            page.insert_text((72, y), text, fontsize=size, fontname=font)
            y += 20
    text = "\n".join(texts(document.tobytes()))
    assert "Internal use only" not in text
    assert all(f"Reviewed by desk {n * 3 + 2} of 12" in text for n in range(4))


def report_pdf(pages: int) -> bytes:
    """Each page: the running header 'ACME Confidential — Page N', a numbered heading, ten lines of prose and
    the footer 'Page N of M'."""
    document = pymupdf.open()
    for number in range(1, pages + 1):
        page, lines = _headed_page(document, number)
        lines.append((f"{number}. Transfers", 14, "hebo"))
        lines += [(f"Transfer {number}-{row} was reconciled by the payments desk.", 11, "helv") for row in range(10)]
        y = 80.0
        for text, size, font in lines:
            page.insert_text((72, y), text, fontsize=size, fontname=font)
            y += size * 1.6
        page.insert_text((260, 810), f"Page {number} of {pages}", fontsize=9, fontname="helv")
    return document.tobytes()


def test_running_line_removal_reads_each_line_a_fixed_number_of_times(monkeypatch):
    """Running lines were dropped with a list membership test per line (dataclass equality against every
    marginal line: 28 M comparisons for a 500-page ledger); lines are now grouped in one pass. The reads of
    the lines' fields during the removal are counted at n and 4n pages: linear is ~4 times, quadratic ~16."""
    state = {"on": False, "reads": 0}

    class WatchedLine(pdf._Line):
        def __getattribute__(self, name: str) -> object:
            if state["on"] and not name.startswith("__"):
                state["reads"] += 1
            return object.__getattribute__(self, name)

    drop_running_lines = pdf._drop_running_lines

    def counted(*args):  # type: ignore[no-untyped-def]
        state["on"] = True
        try:
            return drop_running_lines(*args)
        finally:
            state["on"] = False

    monkeypatch.setattr(pdf, "_Line", WatchedLine)
    monkeypatch.setattr(pdf, "_drop_running_lines", counted)
    reads = {}
    for pages in (20, 80):
        state["reads"] = 0
        blocks = texts(report_pdf(pages))
        reads[pages] = state["reads"]
        text = "\n".join(blocks)
        assert "ACME Confidential" not in text and f"of {pages}" not in text
        assert [b for b in blocks if b.endswith(". Transfers")] == [f"{n}. Transfers" for n in range(1, pages + 1)]
        assert all(f"Transfer {n}-9 was reconciled" in text for n in range(1, pages + 1))
    assert reads[80] <= 5 * reads[20], reads


def test_table_detection_runs_only_on_pages_whose_rules_could_form_a_table(monkeypatch):
    calls: list[int] = []
    find_tables = pymupdf.Page.find_tables

    def counting(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(self.number)
        return find_tables(self, *args, **kwargs)

    monkeypatch.setattr(pymupdf.Page, "find_tables", counting)
    document = pymupdf.open()
    page = document.new_page()
    lines = [(FIELDS["Title"], 20, "hebo"), ("Document control", 11, "helv")]
    lines += [(f"{label}: {value}", 11, "helv") for label, value in FIELDS.items()]
    lines += [("1. Limits", 14, "hebo"), ("The limits per desk are:", 11, "helv")]
    y = 72.0
    for text, size, font in lines:
        page.insert_text((72, y), text, fontsize=size, fontname=font)
        y += 20
    cells = [["Desk", "Limit"], ["Treasury", "250000"], ["Payments", "90000"]]
    for r, row in enumerate(cells):  # a ruled table: one stroked box per cell
        for c, text in enumerate(row):
            box = pymupdf.Rect(72 + 150 * c, y + 22 * r, 222 + 150 * c, y + 22 * (r + 1))
            page.draw_rect(box, color=(0, 0, 0), width=0.6)
            page.insert_text((box.x0 + 4, box.y1 - 7), text, fontsize=11, fontname="helv")
    page = document.new_page()  # underlines, a framed note, a shaded band and a round logo: no table
    page.draw_circle((520, 60), 18, color=(0, 0, 1))
    page.draw_rect(pymupdf.Rect(0, 90, 595, 110), fill=(0.9, 0.9, 0.9), color=None)
    page.insert_text((72, 150), "2. Exceptions", fontsize=14, fontname="hebo")
    for n in range(4):
        page.insert_text((72, 180 + 20 * n), f"Exception {n + 1} needs the Treasury lead.", fontsize=11)
        page.draw_line((72, 183 + 20 * n), (300, 183 + 20 * n))
    page.draw_rect(pymupdf.Rect(66, 260, 400, 300), color=(0, 0, 0))
    page.insert_text((72, 285), "Note: exceptions expire after 30 days.", fontsize=11)

    document = parse_document(document.tobytes(), "limits.pdf", max_bytes=5_000_000)
    assert calls == [0]
    tables = [b.rows for b in document.blocks if isinstance(b, Table)]
    assert tables == [tuple(tuple(row) for row in cells)]
    text = " ".join(b.text for b in document.blocks if isinstance(b, Paragraph))
    assert "Exception 4 needs the Treasury lead." in text and "expire after 30 days" in text


def test_a_truncated_pdf_is_refused_but_a_complete_one_that_needed_repair_is_read():
    data = ledger_pdf(footer=False)
    with pytest.raises(ParseError, match="cut short"):  # its first pages could still be read
        parse_document(data[: len(data) * 8 // 10], "cut.pdf", max_bytes=5_000_000)
    # A wrong cross-reference offset (repaired on open) and bytes after %%EOF: complete, so read in full.
    at = data.rindex(b"startxref\n") + len(b"startxref\n")
    damaged = data[:at] + b"12" + data[at:] + b"\x00" * 64
    assert pymupdf.open(stream=damaged).is_repaired
    assert ledger_row(PAGES - 1, ROWS - 1) in "\n".join(texts(damaged))


def ruled_table(page: pymupdf.Page, top: float, rows: list[list[str]], width: float = 200) -> float:
    """Draw a table of stroked cells with their text; return its bottom."""
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            box = pymupdf.Rect(72 + width * c, top + 20 * r, 72 + width * (c + 1), top + 20 * (r + 1))
            page.draw_rect(box, color=(0, 0, 0), width=0.5)
            page.insert_text((box.x0 + 4, box.y1 - 6), text, fontsize=10, fontname="helv")
    return top + 20 * len(rows)


SCHEDULE = [["Desk", "Limit"], ["Treasury", "250000"], ["Payments", "90000"], ["Lending", "40000"]]


def test_bold_numbered_headings_over_ruled_tables_with_little_prose_are_headings():
    document = pymupdf.open()
    page = document.new_page()
    y = 72.0
    for text, size, font in [
        (FIELDS["Title"], 20, "hebo"),
        ("Document control", 10, "helv"),
        *((f"{label}: {value}", 10, "helv") for label, value in FIELDS.items()),
    ]:
        page.insert_text((72, y), text, fontsize=size, fontname=font)
        y += size * 1.6
    for n in range(1, 13):  # more heading text than header lines, and no prose at all
        if y > 700:
            page, y = document.new_page(), 72.0
        page.insert_text((72, y + 14), f"{n}. Limits for desk category {n}", fontsize=12, fontname="hebo")
        y = ruled_table(page, y + 22, SCHEDULE) + 10
    parsed = parse_document(document.tobytes(), "schedule.pdf", max_bytes=5_000_000)
    headings = [b.text for b in parsed.blocks if isinstance(b, Heading) and b.text != FIELDS["Title"]]
    assert headings == [f"{n}. Limits for desk category {n}" for n in range(1, 13)]
    assert [b.rows for b in parsed.blocks if isinstance(b, Table)] == [tuple(map(tuple, SCHEDULE))] * 12


def test_a_pdf_whose_header_and_text_sit_in_tables_is_read():
    document = pymupdf.open()
    page = document.new_page()
    page.insert_text((72, 72), FIELDS["Title"], fontsize=20, fontname="hebo")
    y = ruled_table(page, 90, [[label, value] for label, value in FIELDS.items()]) + 20
    page.insert_text((72, y + 14), "1. Limits", fontsize=14, fontname="hebo")
    ruled_table(page, y + 22, SCHEDULE)
    parsed = parse_document(document.tobytes(), "tables.pdf", max_bytes=5_000_000)
    assert (parsed.header.doc_code, parsed.header.department) == ("PAY-REF-961", "payments")
    assert [b.rows for b in parsed.blocks if isinstance(b, Table)] == [tuple(map(tuple, SCHEDULE))]

    only_tables = pymupdf.open()
    ruled_table(only_tables.new_page(), 90, SCHEDULE)
    with pytest.raises(ParseError) as refused:
        parse_document(only_tables.tobytes(), "grid.pdf", max_bytes=5_000_000)
    assert "no text layer" not in str(refused.value)  # it has one: all of it in a table


def split_header_pdf(second_part: list[list[str]]) -> bytes:
    """A title, then a header table whose first five rows end page 1 and `second_part` opens page 2, then a
    numbered section."""
    rows = [[label, value] for label, value in FIELDS.items()]
    document = pymupdf.open()
    page = document.new_page()
    page.insert_text((72, 72), FIELDS["Title"], fontsize=20, fontname="hebo")
    ruled_table(page, page.rect.height - 72 - 20 * 5, rows[:5])
    page = document.new_page()
    y = ruled_table(page, 72, second_part) + 20
    page.insert_text((72, y + 14), "1. Limits", fontsize=14, fontname="hebo")
    page.insert_text((72, y + 40), "Each desk keeps to its limit every day.", fontsize=10, fontname="helv")
    return document.tobytes()


def test_a_header_table_split_by_a_page_break_is_read_as_one():
    rows = [[label, value] for label, value in FIELDS.items()]
    parsed = parse_document(split_header_pdf(rows[5:]), "split.pdf", max_bytes=5_000_000)
    assert (parsed.header.doc_code, parsed.header.owner) == ("PAY-REF-961", "Payments Operations Lead")
    assert (parsed.header.department, parsed.header.classification.value) == ("payments", "internal")
    assert not [b for b in parsed.blocks if isinstance(b, Table)]  # neither part is left in the body
    assert Paragraph("Each desk keeps to its limit every day.") in parsed.blocks
    # A table on the next page naming a field the first part has is a second header block, not the rest.
    again = [["Classification", "restricted"], *rows[5:]]
    with pytest.raises(HeaderError, match="two header blocks"):
        parse_document(split_header_pdf(again), "twice.pdf", max_bytes=5_000_000)


def test_a_heading_set_on_two_lines_is_one_heading_but_two_numbered_headings_stay_two():
    title = "Payments Ledger and Settlement Schedule"
    document = pymupdf.open()
    page = document.new_page()
    y = 72.0
    lines = [("Payments Ledger and", 20, "hebo", 24), ("Settlement Schedule", 20, "hebo", 32)]
    lines += [("Document control", 11, "helv", 18)]
    lines += [(f"{label}: {title if label == 'Title' else value}", 11, "helv", 18) for label, value in FIELDS.items()]
    lines += [("1. Scope", 14, "hebo", 17), ("2. Limits and the desks that", 14, "hebo", 17)]
    lines += [("hold them", 14, "hebo", 24), ("Each desk keeps to its limit every day.", 11, "helv", 18)]
    for text, size, font, advance in lines:
        page.insert_text((72, y), text, fontsize=size, fontname=font)
        y += advance
    parsed = parse_document(document.tobytes(), "titled.pdf", max_bytes=5_000_000)
    assert parsed.header.title == title
    assert [b.text for b in parsed.blocks if isinstance(b, Heading)] == [
        title,
        "1. Scope",
        "2. Limits and the desks that hold them",
    ]


LEFT = [
    "Breaks above the threshold are escalated to",
    "the Treasury Operations Lead within two",
    "business hours, with the ledger extract and",
    "the counterparty's confirmation attached.",
    "The lead decides within one further hour",
    "whether the break is written off or pursued.",
]
RIGHT = [
    "Breaks below the threshold stay with the desk",
    "that found them, which clears them by the end",
    "of the next business day and records how each",
    "one was cleared in the reconciliation log, so",
    "that the monthly review can sample them and",
    "report repeated causes to the risk committee.",
]


def two_column_pdf(left: list[str], right: list[str], right_x: float) -> bytes:
    document = pymupdf.open()
    page = document.new_page()
    y = 60.0
    for text, size, font in [
        (FIELDS["Title"], 20, "hebo"),
        ("Document control", 10, "helv"),
        *((f"{label}: {value}", 10, "helv") for label, value in FIELDS.items()),
    ]:
        page.insert_text((72, y), text, fontsize=size, fontname=font)
        y += size * 1.5
    page.insert_text(
        (72, y + 10), "1. Reconciliation breaks across both columns of this page", fontsize=14, fontname="hebo"
    )
    y += 40
    for n, (a, b) in enumerate(zip(left, right, strict=True)):  # the columns share one baseline grid
        page.insert_text((72, y + 15 * n), a, fontsize=10, fontname="helv")
        page.insert_text((right_x, y + 15 * n), b, fontsize=10, fontname="helv")
    return document.tobytes()


def test_a_page_set_in_two_columns_is_read_down_the_left_column_then_the_right():
    parsed = parse_document(two_column_pdf(LEFT, RIGHT, 320), "columns.pdf", max_bytes=5_000_000)
    texts = [b.text for b in parsed.blocks if isinstance(b, Paragraph)]
    assert texts == [" ".join(LEFT), " ".join(RIGHT)]


def test_terms_with_their_definitions_to_the_right_are_not_taken_for_two_columns():
    terms = ["Break", "Lead", "Desk", "Log", "Review", "Committee"]
    parsed = parse_document(two_column_pdf(terms, RIGHT, 200), "terms.pdf", max_bytes=5_000_000)
    text = " ".join(b.text for b in parsed.blocks if isinstance(b, Paragraph))
    assert text.startswith(f"{terms[0]} {RIGHT[0]} {terms[1]} {RIGHT[1]}")  # each term beside its definition


def test_a_pdf_still_parsing_past_the_time_budget_fails_naming_the_budget_and_the_page():
    with pytest.raises(ParseError) as refused:
        parse_document(ledger_pdf(footer=False), "slow.pdf", max_bytes=5_000_000, max_parse_seconds=1e-6)
    assert "KB_MAX_PARSE_SECONDS" in str(refused.value) and f"page 1 of {PAGES}" in str(refused.value)


def test_a_cell_merged_down_two_rows_of_a_ruled_table_keeps_all_its_words():
    document = pymupdf.open()
    page = document.new_page()
    lines = [(FIELDS["Title"], 20, "hebo"), ("Document control", 11, "helv")]
    lines += [(f"{label}: {value}", 11, "helv") for label, value in FIELDS.items()]
    lines += [("1. Limits", 14, "hebo"), ("The limits per desk follow.", 11, "helv")]
    for n, (text, size, font) in enumerate(lines):
        page.insert_text((72, 60 + 18 * n), text, fontsize=size, fontname=font)
    x, y = [72, 222, 372], [320, 340, 360, 380]
    for at in y:  # the rule between the last two rows stops short of the first column: a merged cell
        page.draw_line((x[1] if at == 360 else x[0], at), (x[2], at))
    for at in x:
        page.draw_line((at, y[0]), (at, y[-1]))
    for column, row, text in [(0, 0, "Desk"), (1, 0, "Limit"), (0, 1, "Treasury"), (1, 1, "250000"), (1, 2, "90000")]:
        page.insert_text((x[column] + 4, y[row] + 14), text, fontsize=10)
    page.insert_text((76, 372), "and FX", fontsize=10)  # the merged cell's second line, beside the last row
    parsed = parse_document(document.tobytes(), "merged.pdf", max_bytes=5_000_000)
    assert [b.rows for b in parsed.blocks if isinstance(b, Table)] == [
        (("Desk", "Limit"), ("Treasury and FX", "250000"), ("", "90000"))
    ]


def sized_pdf(body: list[tuple[str, float, str]]) -> bytes:
    """One page: the title and header block, then `body`'s (text, size, font) lines, each below the last."""
    document = pymupdf.open()
    page = document.new_page()
    lines = [(FIELDS["Title"], 20, "helv"), ("Document control", 11, "helv")]
    lines += [(f"{label}: {value}", 11, "helv") for label, value in FIELDS.items()]
    y = 60.0
    for text, size, font in [*lines, *body]:
        page.insert_text((72, y), text, fontsize=size, fontname=font)
        y += size * 1.6
    return document.tobytes()


SENTENCES = [
    "Each payment batch is reconciled against the bank statement before noon.",
    "A break above the threshold goes to the Treasury Operations Lead the same day.",
]


def test_headings_set_in_larger_regular_type_without_numbers_are_found_and_levelled_by_size():
    body = [("Reconciliation", 16, "helv"), (SENTENCES[0], 11, "helv"), ("Breaks out of hours", 13.5, "helv")]
    body += [(SENTENCES[1], 11, "helv"), ("Escalation", 16, "helv"), (SENTENCES[0], 11, "helv")]
    parsed = parse_document(sized_pdf(body), "regular.pdf", max_bytes=5_000_000)
    headings = [(b.level, b.text) for b in parsed.blocks if isinstance(b, Heading)]
    assert headings == [(1, FIELDS["Title"]), (2, "Reconciliation"), (3, "Breaks out of hours"), (2, "Escalation")]
    assert [b.text for b in parsed.blocks if isinstance(b, Paragraph)] == [SENTENCES[0], SENTENCES[1], SENTENCES[0]]


def test_slightly_larger_or_sentence_like_regular_lines_stay_body_text():
    body = [("Reconciliation", 16, "helv"), (SENTENCES[0], 11, "helv")]
    body += [("Breaks out of hours", 12, "helv"), (SENTENCES[1], 11, "helv")]  # a point larger: emphasis
    body += [("Every break is logged.", 15, "helv"), (SENTENCES[0], 11, "helv")]  # a sentence in large type
    parsed = parse_document(sized_pdf(body), "emphasis.pdf", max_bytes=5_000_000)
    assert [b.text for b in parsed.blocks if isinstance(b, Heading)] == [FIELDS["Title"], "Reconciliation"]
    text = " ".join(b.text for b in parsed.blocks if isinstance(b, Paragraph))
    assert "Breaks out of hours" in text and "Every break is logged." in text


def test_a_short_document_set_larger_than_its_header_block_keeps_its_text_as_body_text():
    body = [("Reconciliation", 16, "hebo"), ("Cut-off time noon", 13.5, "helv"), ("Owner desk Treasury", 13.5, "helv")]
    parsed = parse_document(sized_pdf(body), "short.pdf", max_bytes=5_000_000)
    assert [b.text for b in parsed.blocks if isinstance(b, Heading)] == [FIELDS["Title"], "Reconciliation"]
    assert [b.text for b in parsed.blocks if isinstance(b, Paragraph)] == ["Cut-off time noon Owner desk Treasury"]


def test_the_pdf_parser_loads_the_pdf_library_without_its_layout_and_markdown_add_ons_and_prints_nothing():
    # A process of its own: the add-ons (and onnxruntime with them) are what `import pymupdf` loads by itself.
    import subprocess
    import sys

    from tests.conftest import REPO

    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from ingest.parsers import parse_document\n"
        "path = Path('corpus/risk/RSK-STD-003.pdf')\n"
        "assert parse_document(path.read_bytes(), path.name, max_bytes=10**8).blocks\n"
        "print(sorted(m for m in ('onnxruntime', 'pymupdf4llm', 'networkx') if sys.modules.get(m)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO / "src")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "[]"
    assert done.stdout == ""  # no suggestion to install the layout analyser among a worker's output


PARAGRAPH_STEP, LINE_STEP = 26.0, 13.5  # baseline to baseline: between paragraphs, and between a paragraph's lines


def spaced_pdf(body: list[list[tuple[str, float, str]]], header_font: str = "helv") -> bytes:
    """One page: the title and header block (in `header_font`), then `body`'s paragraphs, each a list of
    (text, size, font) lines set one under the other, with a paragraph's spacing between them, as a word
    processor sets them."""
    document = pymupdf.open()
    page = document.new_page()
    page.insert_text((72, 60), FIELDS["Title"], fontsize=20, fontname="hebo")
    page.insert_text((72, 92), "Document control", fontsize=11, fontname=header_font)
    y = 92.0
    for label, value in FIELDS.items():
        y += LINE_STEP
        page.insert_text((72, y), f"{label}: {value}", fontsize=11, fontname=header_font)
    for paragraph in body:
        y += PARAGRAPH_STEP - LINE_STEP
        if y + LINE_STEP * len(paragraph) > 780:
            page, y = document.new_page(), 60.0
        for text, size, font in paragraph:
            y += LINE_STEP
            page.insert_text((72, y), text, fontsize=size, fontname=font)
    return document.tobytes()


def sections(data: bytes) -> list[tuple[tuple[str, ...], str]]:
    """Each section's path and its text, as the chunker cuts and cites it."""
    from ingest.chunker import split_sections

    document = parse_document(data, "bold.pdf", max_bytes=5_000_000)
    return [(s.path, " ".join(b.text for b in s.blocks if isinstance(b, Paragraph))) for s in split_sections(document)]


def test_headings_set_bold_at_the_body_size_without_numbers_open_their_sections():
    # A word processor's lower heading style or a house style: 11 pt bold over 11 pt text, nothing larger.
    body = [[("Daily reconciliation", 11, "hebo")], [(SENTENCES[0], 11, "helv")]]
    body += [[("Breaks out of hours", 11, "hebo")], [(SENTENCES[1], 11, "helv")]]
    body += [[("Evidence kept", 11, "hebo")], [(SENTENCES[0], 11, "helv"), ("and filed the same day.", 11, "helv")]]
    body += [[("Appendix A: Contacts", 11, "hebo")], [(SENTENCES[1], 11, "helv")]]
    body += [[("Important dates", 11, "hebo")], [(SENTENCES[0], 11, "helv")]]
    assert sections(spaced_pdf(body)) == [
        (("Daily reconciliation",), SENTENCES[0]),
        (("Breaks out of hours",), SENTENCES[1]),
        (("Evidence kept",), f"{SENTENCES[0]} and filed the same day."),
        (("Appendix A: Contacts",), SENTENCES[1]),
        (("Important dates",), SENTENCES[0]),
    ]


def test_a_header_block_set_bold_at_the_body_size_is_read_whole_beside_bold_body_size_headings():
    body = [[("Daily reconciliation", 11, "hebo")], [(SENTENCES[0], 11, "helv"), (SENTENCES[1], 11, "helv")]]
    body += [[("Breaks out of hours", 11, "hebo")], [(SENTENCES[1], 11, "helv"), (SENTENCES[0], 11, "helv")]]
    body += [[("Evidence kept", 11, "hebo")], [(SENTENCES[0], 11, "helv"), (SENTENCES[1], 11, "helv")]]
    parsed = parse_document(spaced_pdf(body, header_font="hebo"), "bold-header.pdf", max_bytes=5_000_000)
    assert parsed.header.owner == FIELDS["Owner"] and parsed.header.regulatory_refs == ()
    assert [b.text for b in parsed.blocks if isinstance(b, Heading)] == [
        FIELDS["Title"],
        "Daily reconciliation",
        "Breaks out of hours",
        "Evidence kept",
    ]


def test_a_bold_body_size_heading_wrapped_onto_two_lines_of_a_narrow_column_is_one_heading():
    first = "Escalation of breaks found out of hours by the"  # runs to the column's edge
    body = [[(first, 11, "hebo"), ("on-call analyst", 11, "hebo")]]
    body += [[("Each payment batch is reconciled against the", 11, "helv")]]
    body[-1].append(("bank statement before noon every business day.", 11, "helv"))
    body += [[("Daily checks", 11, "hebo")], [("A break above the threshold goes to the Treasury", 11, "helv")]]
    body[-1].append(("Operations Lead the same day.", 11, "helv"))
    assert pymupdf.get_text_length(first, "hebo", 11) > 0.9 * max(
        pymupdf.get_text_length(text, font, 11) for paragraph in body for text, _, font in paragraph
    )
    assert sections(spaced_pdf(body)) == [
        (
            (f"{first} on-call analyst",),
            "Each payment batch is reconciled against the bank statement before noon every business day.",
        ),
        (("Daily checks",), "A break above the threshold goes to the Treasury Operations Lead the same day."),
    ]


def test_larger_headings_keep_their_levels_above_the_bold_body_size_ones():
    body = [[("Reconciliation", 14, "hebo")], [("Daily checks", 11, "hebo")], [(SENTENCES[0], 11, "helv")]]
    body += [[("Breaks out of hours", 11, "hebo")], [(SENTENCES[1], 11, "helv")]]
    body += [[("Escalation", 14, "hebo")], [(SENTENCES[1], 11, "helv")]]
    body += [[("Who is called", 11, "hebo")], [(SENTENCES[0], 11, "helv")]]
    data = spaced_pdf(body)
    parsed = parse_document(data, "levels.pdf", max_bytes=5_000_000)
    assert [(b.level, b.text) for b in parsed.blocks if isinstance(b, Heading)] == [
        (1, FIELDS["Title"]),
        (2, "Reconciliation"),
        (3, "Daily checks"),
        (3, "Breaks out of hours"),
        (2, "Escalation"),
        (3, "Who is called"),
    ]
    assert [path for path, _ in sections(data)] == [
        ("Reconciliation", "Daily checks"),
        ("Reconciliation", "Breaks out of hours"),
        ("Escalation",),
        ("Escalation", "Who is called"),
    ]


def test_bold_run_in_labels_list_items_and_lines_opening_or_inside_a_paragraph_stay_text():
    lead = "Breaks above the agreed threshold are escalated to the Treasury Operations"  # bold, a full line
    assert pymupdf.get_text_length(lead, "hebo", 11) > 0.9 * pymupdf.get_text_length(SENTENCES[1], "helv", 11)
    body = [[("1. Reconciliation", 14, "hebo")], [(SENTENCES[0], 11, "helv")]]
    body += [[("Note", 11, "hebo"), ("Holidays move the cut-off to the next business day.", 11, "helv")]]
    body += [[("Warning", 11, "hebo")], [("Unreconciled batches are never released.", 11, "helv")]]
    body += [[("Owner:", 11, "hebo"), ("Treasury Operations Lead", 11, "helv")]]
    body += [[("Note: breaks are logged", 11, "hebo")], [("Every break gets a ticket.", 11, "helv")]]
    body += [[("Cut-off: noon on business days", 11, "hebo")], [("Later batches wait.", 11, "helv")]]
    body += [[("Limit: 250,000 per batch", 11, "hebo")], [("Larger batches are split.", 11, "helv")]]
    body += [[("Warning: Friday batches", 11, "hebo")], [("Friday batches settle on Monday.", 11, "helv")]]
    body += [[(lead, 11, "hebo"), ("Lead on duty, who decides on the release.", 11, "helv")]]  # wraps on
    near_full = "Breaks above the agreed threshold are escalated to the Treasury desk"  # ends in the last tenth
    body += [[(near_full, 11, "hebo"), ("Or it is held until the break is explained.", 11, "helv")]]
    body += [[("Owner: Treasury Operations Lead", 11, "hebo")], [("The owner reviews the log weekly.", 11, "helv")]]
    body += [[("Breaks below the threshold", 11, "hebo"), ("are closed by the analyst.", 11, "helv")]]
    held = [("A batch is held", 11, "helv"), ("while its breaks are open", 11, "hebo")]  # bold inside a paragraph
    body += [[*held, ("Holds are logged.", 11, "helv")]]
    body += [[("Unreconciled batches stay held", 11, "hebo"), ("Treasury signs off each release", 11, "hebo")]]
    body += [[("Every release is logged.", 11, "helv")]]
    body += [[("• Same-day release", 11, "hebo"), ("Batches released before noon settle today.", 11, "helv")]]
    body += [[("Release rules", 11, "hebo")], [(SENTENCES[n % 2], 11, "helv") for n in range(8)]]  # a heading
    parsed = parse_document(spaced_pdf(body), "labels.pdf", max_bytes=5_000_000)
    headings = [FIELDS["Title"], "1. Reconciliation", "Release rules"]
    assert [b.text for b in parsed.blocks if isinstance(b, Heading)] == headings
    text = " ".join(b.text for b in parsed.blocks if isinstance(b, Paragraph))
    for kept in ("Note Holidays", "Warning", "Owner: Treasury", "Note: breaks are logged", f"{lead} Lead on duty"):
        assert kept in text, kept
    assert "Cut-off: noon on business days" in text and "Limit: 250,000 per batch" in text
    assert "Warning: Friday batches" in text and f"{near_full} Or it is held" in text
    assert "Owner: Treasury Operations Lead" in text
    assert "Breaks below the threshold are closed" in text and "is held while its breaks are open" in text
    assert "Unreconciled batches stay held Treasury signs off each release" in text
    assert "- Same-day release Batches released" in text  # a bold list item


def test_bold_cells_of_an_unruled_table_and_bold_terms_beside_their_definitions_stay_text():
    body = [[("1. Reconciliation", 14, "hebo")], [(SENTENCES[0], 11, "helv")], [(SENTENCES[1], 11, "helv")]]
    document = pymupdf.open(stream=spaced_pdf(body), filetype="pdf")
    page = document[0]
    for x, cell in zip((72, 200, 330), ("Desk", "Limit", "Approver"), strict=True):  # an unruled table
        page.insert_text((x, 400), cell, fontsize=11, fontname="hebo")
    for x, cell in zip((72, 200, 330), ("Treasury", "250000", "Head of Treasury"), strict=True):
        page.insert_text((x, 414), cell, fontsize=11, fontname="helv")
    terms = [("Cut-off", "15:00 on business days"), ("Threshold", "USD 10,000")]
    for y, (term, meaning) in zip((450, 464), terms, strict=True):
        page.insert_text((72, y), term, fontsize=11, fontname="hebo")  # terms with their definitions beside them
        page.insert_text((200, y), meaning, fontsize=11, fontname="helv")
    parsed = parse_document(document.tobytes(), "cells.pdf", max_bytes=5_000_000)
    assert [b.text for b in parsed.blocks if isinstance(b, Heading)] == [FIELDS["Title"], "1. Reconciliation"]
    text = " ".join(b.text for b in parsed.blocks if isinstance(b, Paragraph))
    assert "Desk Limit Approver Treasury 250000 Head of Treasury" in text
    assert "Cut-off 15:00 on business days" in text and "Threshold USD 10,000" in text


def test_a_bold_first_line_of_ragged_text_that_wrapped_before_a_long_word_stays_text():
    lead = "Breaks above the agreed threshold are escalated to the"  # ends a sixth short of the column's edge
    body = [[("1. Reconciliation", 14, "hebo")], [(SENTENCES[0], 11, "helv")]]
    body += [[(lead, 11, "hebo"), ("Reconciliation Operations Lead on duty, who logs them.", 11, "helv")]]
    edge = pymupdf.get_text_length(SENTENCES[0], "helv", 11)
    assert pymupdf.get_text_length(lead, "hebo", 11) < 0.85 * edge
    parsed = parse_document(spaced_pdf(body), "ragged.pdf", max_bytes=5_000_000)
    assert [b.text for b in parsed.blocks if isinstance(b, Heading)] == [FIELDS["Title"], "1. Reconciliation"]
    assert f"{lead} Reconciliation Operations Lead" in " ".join(b.text for b in parsed.blocks)


def test_a_document_set_in_bold_throughout_does_not_become_all_headings():
    # Its prose in bold, with a regular-weight line after some short bold ones: weight tells nothing here.
    checked = ("Checked by the Treasury desk.", 11, "helv")
    body = [[("1. Reconciliation", 14, "hebo")], [("Daily checks", 11, "hebo")], [checked]]
    body += [[(SENTENCES[0], 11, "hebo")]]
    body += [[("Breaks out of hours", 11, "hebo")], [checked], [(SENTENCES[1], 11, "hebo")]]
    body += [[(SENTENCES[0], 11, "hebo")], [(SENTENCES[1], 11, "hebo")], [("Evidence kept", 11, "hebo")], [checked]]
    parsed = parse_document(spaced_pdf(body, header_font="hebo"), "all-bold.pdf", max_bytes=5_000_000)
    assert [b.text for b in parsed.blocks if isinstance(b, Heading)] == [FIELDS["Title"], "1. Reconciliation"]
    assert parsed.header.doc_code == FIELDS["Doc code"]
    paragraphs = [b.text for b in parsed.blocks if isinstance(b, Paragraph)]
    assert {"Daily checks", "Breaks out of hours", "Evidence kept"} <= set(paragraphs)
