"""Heading chunks: section paths kept, ~600 tokens with 80 overlap, tables whole under 1,200 tokens."""

from __future__ import annotations

import itertools
import random

from tests.conftest import REPO
from tests.support.documents import markdown_document

from ingest.chunker import chunk_document
from ingest.document import Heading, Paragraph, ParsedDocument, Table
from ingest.parsers import parse_document
from kb_core.token_count import count_tokens, seam_tokens


def document_with(*blocks, title: str = "Test Procedure") -> ParsedDocument:  # type: ignore[no-untyped-def]
    header = parse_document(markdown_document(title=title).encode(), "x.md", max_bytes=10**6).header
    return ParsedDocument(header=header, blocks=[Heading(1, title), *blocks])


def test_section_paths_and_citation_anchors_follow_the_numbered_headings():
    path = "corpus/compliance/CMP-SOP-004.md"
    document = parse_document((REPO / path).read_bytes(), path, max_bytes=10**7)
    chunks = chunk_document(document)
    edd = [c for c in chunks if c.anchor == "4.2"]
    assert edd and edd[0].section_path == "4. Customer Risk Rating › 4.2 Enhanced Due Diligence"
    assert "$7,500" in " ".join(c.content for c in edd)
    assert all("Enhanced Due Diligence Procedure" not in c.section_path for c in chunks)  # the title is not a section


def test_a_long_section_is_split_near_600_tokens_with_80_tokens_of_overlap():
    sentences = [
        f"Rule {n} requires the analyst to record the decision and the reason for it in the case file."
        for n in range(120)
    ]
    paragraphs = [Paragraph(" ".join(sentences[i : i + 4])) for i in range(0, 120, 4)]
    chunks = chunk_document(document_with(Heading(2, "3. Long Section"), *paragraphs))
    assert len(chunks) >= 3
    assert all(c.section_path == "3. Long Section" and c.anchor == "3" for c in chunks)
    assert all(c.token_count <= 600 + 120 for c in chunks)
    for previous, following in itertools.pairwise(chunks):
        opening = following.content.split("\n\n")[0]
        assert previous.content.endswith(opening)  # the continuation repeats the previous chunk's tail
        assert 60 <= count_tokens(opening) <= 120


def test_a_table_under_1200_tokens_stays_whole_even_when_longer_than_a_chunk():
    rows = tuple((f"R{n:02d}", f"Threshold of ${n},000 for scenario {n} over a window of {n} days") for n in range(40))
    table = Table((("Rule", "Threshold"), *rows))
    chunks = chunk_document(document_with(Heading(2, "4. Thresholds"), Paragraph("Intro."), table))
    # The whole table's chunk (its row groups, indexed besides it, are the next test's subject).
    table_chunks = [c for c in chunks if "| Rule | Threshold |" in c.content and c.rows_of is None]
    assert len(table_chunks) == 1
    assert 600 < table_chunks[0].token_count < 1200
    assert all(f"R{n:02d}" in table_chunks[0].content for n in range(40))


def test_a_table_over_1200_tokens_is_split_by_rows_under_a_repeated_header_row():
    rows = tuple((f"R{n:03d}", f"Threshold of ${n},000 for scenario {n} over a window of {n} days") for n in range(150))
    everything = chunk_document(document_with(Heading(2, "4. Thresholds"), Table((("Rule", "Threshold"), *rows))))
    chunks = [c for c in everything if c.rows_of is None]  # the table's parts, without their row groups
    assert len(chunks) >= 3
    assert all(c.content.startswith("| Rule | Threshold |") for c in chunks)
    found = [line.split("|")[1].strip() for c in chunks for line in c.content.splitlines()[2:]]
    assert found == [f"R{n:03d}" for n in range(150)]  # every row once, in order


def test_a_table_of_many_rows_is_also_indexed_as_small_row_groups_citing_its_section():
    rows = tuple((f"MCC {n}", "allowed" if n % 2 else "blocked") for n in range(5000, 5015))
    table = Table((("Merchant category", "Status"), *rows))
    chunks = chunk_document(document_with(Heading(2, "5. Merchant Categories"), Paragraph("Intro."), table))
    whole = [c for c in chunks if c.rows_of is None]
    groups = [c for c in chunks if c.rows_of is not None]
    assert len(whole) == 1 and all(f"MCC {n}" in whole[0].content for n in range(5000, 5015))
    assert len(groups) == 5
    assert all(g.rows_of == whole[0].ordinal for g in groups)
    assert all(g.section_path == "5. Merchant Categories" and g.anchor == "5" for g in groups)
    assert all(g.content.startswith("| Merchant category | Status |") for g in groups)
    in_groups = [line.split("|")[1].strip() for g in groups for line in g.content.splitlines()[2:]]
    assert in_groups == [f"MCC {n}" for n in range(5000, 5015)]  # every row in exactly one group
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))


def test_a_short_table_gets_no_row_groups():
    table = Table((("Tier", "Limit"), ("1", "$500"), ("2", "$2,000"), ("3", "$10,000")))
    chunks = chunk_document(document_with(Heading(2, "2. Limits"), table))
    assert [c.rows_of for c in chunks] == [None]


def test_the_embedded_text_carries_the_contextual_prefix_and_the_stored_content_does_not():
    chunks = chunk_document(document_with(Heading(2, "4. Scope"), Heading(3, "4.2 Merchants"), Paragraph("Body.")))
    assert chunks[0].content == "Body."
    assert chunks[0].embedding_text("Test Procedure") == "Test Procedure — 4. Scope › 4.2 Merchants\n\nBody."


def test_token_counts_use_the_production_tokenizer():
    assert count_tokens("Enhanced due diligence") == 4  # cl100k_base, as text-embedding-3-large counts


def test_every_chunk_of_the_corpus_stores_the_token_count_a_fresh_count_gives():
    # The chunker adds up its pieces' counts instead of counting each chunk again (seam_tokens).
    for path in sorted((REPO / "corpus").rglob("*.md"))[:12]:
        for chunk in chunk_document(parse_document(path.read_bytes(), path.name, max_bytes=10**7)):
            assert chunk.token_count == count_tokens(chunk.content), (path.name, chunk.ordinal)


def test_the_tokens_a_blank_line_adds_between_two_texts_are_exact_whenever_they_are_claimed():
    rng = random.Random(20)
    alphabet = [*"ab Z09.,;:!?|`-_'\"()[]*#\n\t é\u0301—…$%&/\\<>\r", "'s", "```", " |", "1234", "ﬁ"]
    claimed = 0
    for _ in range(4000):
        before, after = ("".join(rng.choices(alphabet, k=rng.randint(1, 10))) for _ in range(2))
        seam = seam_tokens(before, after)
        if seam is not None:
            claimed += 1
            assert count_tokens(before) + seam + count_tokens(after) == count_tokens(f"{before}\n\n{after}")
    assert claimed > 1500
    # The usual seams are claimed: a sentence, a table and a code fence end; a word or a digit.
    assert all(seam_tokens(end, "Next") is not None for end in ("A sentence.", "| a |", "```", "word", "Rule 4"))
    # A long run without spaces is counted in slices, where the blank line joins nothing: not claimed.
    assert seam_tokens("QUJD" * 1500 + ".", "Next") is None
