"""A long Markdown body is parsed in parts (ingest.parsers.markdown): the blocks are the ones the whole body
gives, whatever runs on across a heading line (fences, lists, quotes, HTML blocks), and a body whose whole
block tree would not fit the parse memory budget now does."""

from __future__ import annotations

import pytest
from tests.conftest import REPO
from tests.support.documents import markdown_document

from ingest.document import ParseError
from ingest.parsers import markdown, parse_document
from ingest.parsers.text import decode_text

MiB = 1024 * 1024

# Heading lines that are not headings of the top level, or that follow what a naive cut would break.
RUNS_ON = {
    "a comment": "para\n\n<!--\n\n# hidden\n\n-->\n\n# real\n\ntext\n",
    "a fence": "```\n\n# in fence\n\n```\n\n# out\n\nx\n",
    "a longer fence": "~~~~\n\n# in\n\n~~~\n\n# still in\n\n~~~~\n\n# out\n",
    "a pre block": "<pre>\n\n# in pre\n\n</pre>\n\n# out\n",
    "a script": "<script>\nvar a;\n\n# x\n</script>\n\n# y\n",
    "a fence a list item opened": "- item\n\n  ```\n\n# x\n\n  ```\n\n# y\n",
    "a fence a quote opened": "> quote\n> ```\n\n# x\n\n```\n\n# y\n",
    "an indented fence": "   ```\n\n# x\n\n```\n\n# y\n",
    "a backtick info string": "``` a`b\n\n# x\n\n```\n\n# y\n",
    "a line separator": "text\u2028# not a line\n\n# real\n",
    "a non-breaking-space line": "para\n\u00a0\n# x\n\n# y\n",
    "an unclosed table tag": "<table>\n\n# x\n\n# y\n",
    "carriage returns": "\r\n# a\r\n\r\n# b\r\n\r\n```\r\n\r\n# c\r\n\r\n```\r\n\r\n# d\r\n",
    "tables": "| a | b |\n|---|---|\n| 1 | 2 |\n\n# h\n\n| c |\n|---|\n| 3 |\n",
}


def blocks_in_parts(body: str, part_chars: int, monkeypatch: pytest.MonkeyPatch) -> list:
    monkeypatch.setattr(markdown, "PART_CHARS", part_chars)
    return markdown.markdown_blocks(body)


@pytest.mark.parametrize("body", RUNS_ON.values(), ids=RUNS_ON.keys())
def test_a_body_cut_at_every_heading_it_can_gives_the_blocks_of_the_whole(body, monkeypatch):
    assert blocks_in_parts(body, 0, monkeypatch) == blocks_in_parts(body, 10**12, monkeypatch)


def test_every_corpus_document_cut_at_every_heading_gives_the_blocks_of_the_whole(monkeypatch):
    cut = 0
    for path in sorted((REPO / "corpus").rglob("*.md")):
        body = markdown.split_front_matter(decode_text(path.read_bytes()))[1]
        cut += len(list(markdown.body_parts(body, 0))) - 1
        assert blocks_in_parts(body, 0, monkeypatch) == blocks_in_parts(body, 10**12, monkeypatch), path.name
    assert cut > 500  # the corpus's documents were in fact cut


def test_a_heading_inside_a_fence_that_a_list_item_opened_does_not_start_a_part():
    body = RUNS_ON["a fence a list item opened"]
    parts = list(markdown.body_parts(body, 0))
    assert [p.first_line for p in parts] == [0, 4]  # at "# x" (the item and its fence end there), not "# y"
    assert markdown.markdown_blocks(body)[-1].text == "```\n\n# y\n```"


def test_a_body_whose_whole_block_tree_would_overrun_the_memory_budget_parses_within_it():
    section = "## {n}. Control {n}\n\nThe analyst records case {n}.\n\n- Check entry {n}\n- Confirm it\n\n> Note\n\n"
    data = (markdown_document() + "".join(section.format(n=n) for n in range(80_000))).encode()
    # Its whole tree (~80 bytes a byte, ~580 MB) is far past the budget; in parts it needs ~130-190 MB. The
    # margin is wide because the child's private memory also counts the pages this process writes meanwhile.
    assert len(data) > 7 * MiB
    in_child = parse_document(data, "big.md", max_bytes=10**8, max_parse_memory_bytes=384 * MiB)
    assert len(in_child.blocks) > 300_000
    assert in_child == parse_document(data, "big.md", max_bytes=10**8)


@pytest.mark.parametrize("line", ["> " * 50_000, "> - " * 20_000], ids=["quotes", "quotes and list items"])
def test_a_line_nesting_thousands_of_quotes_fails_naming_the_line_instead_of_killing_the_parser(line):
    data = (markdown_document() + "Intro.\n\n" + line + "x\n").encode()
    # In a child: the parser overflowing its stack would otherwise take the test run down with it.
    with pytest.raises(ParseError) as refused:
        parse_document(data, "deep.md", max_bytes=10**8, max_parse_memory_bytes=256 * MiB)
    assert "nests 1,000 or more block quotes or list items" in str(refused.value)
    body = markdown.split_front_matter(data.decode())[1]
    assert f"body line {body.split(chr(10)).index(line + 'x') + 1} " in str(refused.value)


def test_a_line_nesting_under_the_limit_parses():
    data = (markdown_document() + "Intro.\n\n" + "> " * 999 + "x\n").encode()
    assert parse_document(data, "deep.md", max_bytes=10**8).blocks[-1].text.endswith("x")
