"""No oversized chunk: whatever unit a text comes from (a table row of 60k words, a huge code block, a line
with no break, an OpenAPI operation, a heading of pages), every chunk with the title and section path it is
embedded under fits the embedder's input limit, and nothing of the source is lost in the cutting."""

from __future__ import annotations

import re

from tests.support.documents import markdown_document

from ingest.chunker import TABLE_LIMIT, chunk_document
from ingest.document import Heading, Paragraph, ParsedDocument, Unit
from ingest.parsers import parse_document
from kb_core.embedders.openai_embedder import MAX_INPUT_TOKENS
from kb_core.token_count import count_tokens


def parsed(sections: dict[str, str], title: str = "Test Procedure") -> ParsedDocument:
    return parse_document(markdown_document(title=title, sections=sections).encode(), "x.md", max_bytes=10**8)


def embedded_sizes(document: ParsedDocument, **limits: int) -> list[int]:
    return [count_tokens(c.embedding_text(document.header.title)) for c in chunk_document(document, **limits)]


def test_a_table_row_of_60k_words_is_cut_into_parts_under_the_header_row_each_within_the_limit():
    words = [f"w{n}" for n in range(60_000)]
    table = f"| Key | Value | Note |\n| --- | --- | --- |\n| K1 | {' '.join(words)} | tail note |\n| K2 | small | x |\n"
    document = parsed({"1. Ledger": table, "2. After": "Later text."})
    chunks = chunk_document(document)
    assert max(embedded_sizes(document)) <= MAX_INPUT_TOKENS
    assert all(c.token_count <= TABLE_LIMIT for c in chunks)
    parts = [c for c in chunks if "| K1 |" in c.content]
    assert len(parts) > 100
    assert all(c.content.startswith("| Key | Value | Note |\n| --- | --- | --- |\n") for c in parts)
    assert all(c.section_path == "1. Ledger" and c.anchor == "1" for c in parts)
    found = [w for c in parts for w in re.findall(r"\bw\d+\b", c.content)]
    assert found == words  # every word once, in order, none cut in two
    assert "tail note" in " ".join(c.content for c in parts)
    assert any("| K2 | small | x |" in c.content for c in chunks)


def test_a_huge_code_block_is_cut_by_lines_and_every_part_is_fenced():
    lines = [f"ledger[{n}] = post(account={n}, amount={n * 7})" for n in range(4000)]
    document = parsed({"1. Script": "```\n" + "\n".join(lines) + "\n```"})
    chunks = chunk_document(document)
    assert len(chunks) > 10 and max(c.token_count for c in chunks) <= 600
    assert all(c.content.startswith("```\n") and c.content.endswith("\n```") for c in chunks)
    assert [line for c in chunks for line in c.content.split("\n")[1:-1]] == lines


def test_a_line_with_no_break_and_a_heading_of_pages_fit_and_lose_nothing():
    blob = "QUJD" * 40_000  # a base64 run: one "word" of 160k characters
    long_heading = "Scope " + " ".join(f"clause{n}" for n in range(3000))
    document = ParsedDocument(
        parsed({"1. A": "x"}).header,
        [
            Heading(2, "1. Data"),
            Paragraph(f"data:image/png;base64,{blob}"),
            Heading(2, long_heading),
            Paragraph("Body."),
        ],
    )
    chunks = chunk_document(document)
    assert max(embedded_sizes(document)) <= MAX_INPUT_TOKENS
    assert "".join(c.content for c in chunks if c.section_path == "1. Data").count("QUJD") >= 39_990
    under_heading = [c for c in chunks if c.section_path.startswith("Scope clause0")]
    assert all(len(c.section_path) <= 201 for c in under_heading)
    assert "clause2999" in " ".join(c.content for c in under_heading) and "Body." in under_heading[-1].content


def test_a_smaller_embedder_limit_is_met_including_the_title_and_section_path():
    text = " ".join(f"Rule {n} requires a second approver for refunds above the daily limit." for n in range(300))
    document = parsed({"1. Refunds": text, "2. Table": "| A | B |\n| --- | --- |\n| x | " + "y " * 3000 + "|"})
    assert max(embedded_sizes(document, max_tokens=300)) <= 300


def test_an_operation_too_long_for_one_chunk_names_its_method_path_and_operation_id_on_every_part():
    lead = "POST /v1/refunds · operationId: createRefund"
    fields = "\n".join(f"- field_{n} (string): what field {n} of the refund records." for n in range(600))
    unit = Unit(f"POST /v1/refunds — Create a refund\noperationId: createRefund\n\nRequest body:\n{fields}", lead=lead)
    document = ParsedDocument(
        parsed({"1. A": "x"}).header, [Heading(1, "Refunds"), Heading(2, "POST /v1/refunds"), unit]
    )
    chunks = chunk_document(document)
    assert len(chunks) >= 3 and max(c.token_count for c in chunks) <= TABLE_LIMIT
    assert chunks[0].content.startswith("POST /v1/refunds — Create a refund\noperationId: createRefund")
    assert all(c.content.startswith(f"{lead} (continued)\n\n") for c in chunks[1:])
    found = [line for c in chunks for line in c.content.splitlines() if line.startswith("- field_")]
    assert found == fields.splitlines()


class _SmallInputEmbedder:
    """The real local embedder, declaring a smaller input limit than the production model's and keeping every
    text it is asked to embed."""

    max_input_tokens = 200

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.texts: list[str] = []

    @property
    def space(self):  # type: ignore[no-untyped-def]
        return self.inner.space

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.texts += list(texts)
        return self.inner.embed(texts)

    def embed_query(self, text):  # type: ignore[no-untyped-def]
        return self.inner.embed_query(text)


def test_ingestion_fits_every_chunk_to_the_configured_embedders_input_limit(database, local_embedder):
    from ingest.pipeline import Ingestor

    long_section = " ".join(f"Clause {n} requires the reconciliation of ledger {n} before noon." for n in range(150))
    assert count_tokens(long_section) > 5 * _SmallInputEmbedder.max_input_tokens
    embedder = _SmallInputEmbedder(local_embedder)
    with Ingestor(database.ingest, embedder, max_bytes=2_000_000) as ingestor:
        result = ingestor.ingest(
            markdown_document(sections={"1. Ledger Rules": long_section}).encode(),
            name="x.md",
            source_uri="s3://b/x.md",
        )
    assert result.outcome == "ingested" and result.chunks > 5
    assert max(count_tokens(t) for t in embedder.texts) <= _SmallInputEmbedder.max_input_tokens
    found = [int(n) for t in embedder.texts for n in re.findall(r"Clause (\d+) ", t)]
    assert sorted(set(found)) == list(range(150))  # every clause kept (chunks overlap, so some twice)
