"""Markdown shapes that used to take quadratic time, checked for correctness on small inputs (their speed at
full size is measured by `python -m bench --parts parse_text`): many lists and quotes, repeated subsection
names, an inlined base64 image, many headings; and the body read through its byte offsets (non-ASCII text).
Their work is counted at n and 4n (whole-body walks, anchor candidates tried, tokenizer calls): a count that
grows about 16 times is the quadratic path back, whatever the machine's speed."""

from __future__ import annotations

from typing import Any

from tests.support.documents import markdown_document

from ingest import chunker
from ingest.chunker import chunk_document
from ingest.document import Heading, Paragraph, Table
from ingest.parsers import parse_document
from ingest.parsers.markdown import markdown_blocks
from kb_core import token_count
from kb_core.token_count import _encoding, count_tokens


def parse(sections: dict[str, str]):  # type: ignore[no-untyped-def]
    return parse_document(markdown_document(sections=sections).encode(), "x.md", max_bytes=10**8)


class _WatchedBody(str):
    """A Markdown body that records the name of each method called on it: every such call (split, splitlines,
    encode, find, ...) walks the whole body."""

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("__"):
            str.__getattribute__(self, "calls").append(name)
        return str.__getattribute__(self, name)


def watched(text: str) -> _WatchedBody:
    body = _WatchedBody(text)
    body.calls = []  # type: ignore[attr-defined]
    return body


def lists_and_quotes(count: int) -> str:
    return "".join(
        f"## {n}. Step {n}\n\nIntro {n}.\n\n- item {n}a\n  - nested {n}\n- item {n}b\n\n> quote {n}\n> continues\n\n"
        for n in range(1, count + 1)
    )


def test_each_of_many_lists_and_quotes_is_its_own_block_and_the_body_is_split_into_lines_once():
    """Each list or quote was read by splitting the whole body into lines again (body.splitlines() per block:
    quadratic, 24 MB took over 60 s); the body is split once, and each block reads its own byte span."""
    walks = {}
    for count in (100, 400):
        body = watched(lists_and_quotes(count))
        texts = [b.text for b in markdown_blocks(body) if isinstance(b, Paragraph)]
        walks[count] = str.__getattribute__(body, "calls")
        assert [t for t in texts if t.startswith("- ")] == [
            f"- item {n}a\n  - nested {n}\n- item {n}b" for n in range(1, count + 1)
        ]
        assert [t for t in texts if t.startswith("> ")] == [f"> quote {n}\n> continues" for n in range(1, count + 1)]
    assert len(walks[400]) == len(walks[100]) <= 2, {n: len(calls) for n, calls in walks.items()}


def test_repeated_subsection_names_get_distinct_anchors_in_order():
    sections = {"details-3": "A section whose own slug is details-3."}
    sections |= {f"{n}. Item {n}\n\n### Details": f"Text {n}." for n in range(1, 301)}
    anchors = [c.anchor for c in chunk_document(parse(sections))]
    assert anchors[0] == "details-3"
    details = anchors[1:]
    assert len(set(anchors)) == len(anchors) == 301
    assert details[:4] == ["details", "details-2", "details-4", "details-5"]
    assert details[-1] == "details-301"


def test_anchors_for_repeated_subsection_names_try_a_few_candidates_each(monkeypatch):
    """The k-th 'Details' tried 'details', 'details-2', ... 'details-k' (quadratic: 30k took over 60 s); the
    search for a free suffix resumes where the last one for that name stopped."""
    tried: list[str] = []

    class CountingSet(set[str]):
        def __contains__(self, anchor: object) -> bool:
            tried.append(str(anchor))
            return super().__contains__(anchor)

    class CountingAnchors(chunker._Anchors):
        def __init__(self) -> None:
            super().__init__()
            self.used = CountingSet()

    monkeypatch.setattr(chunker, "_Anchors", CountingAnchors)
    tries = {}
    for count in (100, 400):
        tried.clear()
        sections = {f"{n}. Item {n}\n\n### Details": f"Text {n}." for n in range(1, count + 1)}
        anchors = [c.anchor for c in chunk_document(parse(sections))]
        tries[count] = len(tried)
        assert anchors == ["details", *(f"details-{n}" for n in range(2, count + 1))]
    # About two a section (the name, then the next free suffix); quadratic would be ~16 times at 4 times n.
    assert tries[400] <= 2 * 400 and tries[400] <= 5 * tries[100], tries


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


def test_a_section_of_one_short_paragraph_costs_at_most_two_tokenizer_calls(monkeypatch):
    """100k headings took 31 s: each section encoded its title prefix, its paragraph, the chunk for the
    embedder's limit and the chunk again for its count. The title is counted once a document, a short ASCII
    chunk needs no encoding to fit, and a chunk of one piece keeps that piece's count."""
    calls: list[str] = []
    encoding = _encoding()

    class CountingEncoding:
        def __getattr__(self, name: str) -> Any:
            method = getattr(encoding, name)
            if not name.startswith("encode"):
                return method

            def counted(*args: Any, **kwargs: Any) -> Any:
                calls.append(name)
                return method(*args, **kwargs)

            return counted

    counting = CountingEncoding()
    monkeypatch.setattr(token_count, "_encoding", lambda: counting)
    encodings = {}
    for count in (250, 1000):
        document = parse({f"Heading {n}": f"Line {n}." for n in range(count)})
        calls.clear()
        chunks = chunk_document(document)
        encodings[count] = len(calls)
        assert [(c.anchor, c.content) for c in chunks] == [(f"heading-{n}", f"Line {n}.") for n in range(count)]
    assert encodings[1000] - encodings[250] <= 2 * 750, encodings


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
