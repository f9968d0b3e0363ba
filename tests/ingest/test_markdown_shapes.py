"""Markdown shapes that used to take quadratic time, checked for correctness on small inputs (their speed at
full size is measured by `python -m bench --parts parse_text`): many lists and quotes, repeated subsection
names, an inlined base64 image, many headings; and the body read through its byte offsets (non-ASCII text)."""

from __future__ import annotations

from tests.support.documents import markdown_document

from ingest.chunker import chunk_document
from ingest.document import Heading, Paragraph, Table
from ingest.parsers import parse_document
from kb_core.token_count import _encoding, count_tokens


def parse(sections: dict[str, str]):  # type: ignore[no-untyped-def]
    return parse_document(markdown_document(sections=sections).encode(), "x.md", max_bytes=10**8)


def test_each_of_many_lists_and_quotes_is_its_own_block_kept_as_written():
    sections = {
        f"{n}. Step {n}": f"Intro {n}.\n\n- item {n}a\n  - nested {n}\n- item {n}b\n\n> quote {n}\n> continues"
        for n in range(1, 201)
    }
    blocks = [b for b in parse(sections).blocks if isinstance(b, Paragraph)]
    lists = [b.text for b in blocks if b.text.startswith("- ")]
    quotes = [b.text for b in blocks if b.text.startswith("> ")]
    assert lists == [f"- item {n}a\n  - nested {n}\n- item {n}b" for n in range(1, 201)]
    assert quotes == [f"> quote {n}\n> continues" for n in range(1, 201)]


def test_repeated_subsection_names_get_distinct_anchors_in_order():
    sections = {"details-3": "A section whose own slug is details-3."}
    sections |= {f"{n}. Item {n}\n\n### Details": f"Text {n}." for n in range(1, 301)}
    anchors = [c.anchor for c in chunk_document(parse(sections))]
    assert anchors[0] == "details-3"
    details = anchors[1:]
    assert len(set(anchors)) == len(anchors) == 301
    assert details[:4] == ["details", "details-2", "details-4", "details-5"]
    assert details[-1] == "details-301"


def test_an_image_inlined_as_base64_is_elided_and_the_text_around_it_kept():
    blob = "iVBORw0KGgo" * 20_000
    document = parse(
        {
            "1. Logo": f"Our logo ![logo](data:image/png;base64,{blob}) is blue.\n\n| a | b |\n| --- | --- |\n"
            f"| ![x](data:image/gif;base64,{blob}) | c |"
        }
    )
    text = " ".join(c.content for c in chunk_document(document))
    assert "Our logo ![logo](data:image/png;base64,…) is blue." in text
    assert "| ![x](data:image/gif;base64,…) | c |" in text
    assert "iVBORw0KGgo" not in text


def test_a_thousand_headings_are_a_thousand_sections():
    document = parse({f"{n}. Heading {n}": f"Line {n}." for n in range(1, 1001)})
    chunks = chunk_document(document)
    assert [(c.anchor, c.content) for c in chunks] == [(str(n), f"Line {n}.") for n in range(1, 1001)]


def test_non_ascii_headings_paragraphs_tables_and_code_are_read_through_their_byte_offsets():
    body = (
        "Über die Prüfung — ✓ naïve café\nzweite Zeile\n\nSetext Überschrift\n---\n\n| Größe | Wert |\n| --- | --- |\n"
        "| Ä \\| Ö | 5 € |\n\n```\nprint('ü')\n```"
    )
    blocks = parse({"1. Prüfung ✓": body}).blocks
    assert Heading(2, "1. Prüfung ✓") in blocks and Heading(2, "Setext Überschrift") in blocks
    assert Paragraph("Über die Prüfung — ✓ naïve café zweite Zeile") in blocks
    assert Table((("Größe", "Wert"), ("Ä \\| Ö", "5 €"))) in blocks
    assert Paragraph("```\nprint('ü')\n```") in blocks


def test_a_long_run_without_spaces_is_counted_within_a_token_per_thousand_characters_of_exact():
    run = "QUJDRA" * 2_000  # 12,000 characters, one "word"
    exact = len(_encoding().encode(run, disallowed_special=()))
    assert abs(count_tokens(run) - exact) <= len(run) // 1000
