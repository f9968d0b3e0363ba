"""Markdown: YAML front matter for the header block, markdown-it's block tree for the body.

A block tree costs about 80 bytes of memory per byte of Markdown (6 MB peaked at 540 MB), so a long body is
parsed in parts of about PART_CHARS characters, each cut before a heading line that markdown-it itself
reads as a heading of the top level (body_parts), where no block (a fence, a list, a quote, an HTML block)
runs across the cut: the parts' blocks are the whole body's blocks.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager

import yaml
from markdown_it_pyrs import MarkdownIt, Node

from ingest.document import Block, HeaderError, Heading, Paragraph, ParsedDocument, ParseError, Table
from ingest.header import build_header
from ingest.parsers.budget import Deadline
from ingest.parsers.html import html_fragment_blocks
from ingest.parsers.text import decode_text, load_yaml, yaml_problem

# Only the block rules: blocks are read from their source spans, so inline markup (emphasis, links, entities)
# is never looked at, and parsing it was two fifths of markdown-it's time. Inline text stays one node per block.
_MD = MarkdownIt("zero").enable_many(
    ["blockquote", "code", "fence", "heading", "hr", "lheading", "list", "paragraph", "reference", "html_block"]
)
_MD.enable("table")


def split_front_matter(text: str) -> tuple[dict[str, object], str]:
    if not text.startswith("---"):
        raise HeaderError(
            "no header block: a Markdown document starts with YAML front matter between two '---' lines; "
            "see docs/header-block.md"
        )
    end = text.find("\n---", 3)
    if end == -1:
        raise HeaderError("header block: the front matter opened with '---' is never closed by a '---' line")
    try:
        raw = load_yaml(text[3:end])
    except yaml.YAMLError as exc:
        # The front matter's text starts on the file's first line, just after the opening '---'.
        raise HeaderError(
            f"header block: the front matter is not valid YAML {yaml_problem(exc)}; see docs/header-block.md"
        ) from None
    if not isinstance(raw, dict):
        raise HeaderError("header block: the front matter must be a mapping of field: value lines")
    body_start = text.find("\n", end + 4)
    return raw, text[body_start + 1 :] if body_start != -1 else ""


def parse_markdown(data: bytes, deadline: Deadline | None = None) -> ParsedDocument:
    raw, body = split_front_matter(decode_text(data))
    header = build_header(raw)
    blocks = markdown_blocks(body, deadline, refuse_second_header=True)
    return ParsedDocument(header=header, blocks=blocks, source_format="markdown")


# markdown-it-pyrs recurses once per nested block quote or list item on a line, and ~40,000 of them (a
# 100 KB line of "> - ") overflow its stack: the process dies. No document nests a thousand deep.
MAX_NESTING = 1000
_DEEP_LINE = re.compile(rf"^(?:[ \t]*(?:>|(?:[-*+]|\d{{1,9}}[.)])(?=[ \t]))){{{MAX_NESTING},}}", re.M)


def refuse_deep_nesting(body: str) -> None:
    deep = _DEEP_LINE.search(body)
    if deep is not None:
        line = body.count("\n", 0, deep.start()) + 1
        raise ParseError(
            f"body line {line} nests {MAX_NESTING:,} or more block quotes or list items in one another, past what "
            "the Markdown parser can read: flatten it"
        )


PART_CHARS = 1 << 18  # a tree of ~20 MB at a time
_ATX_HEADING = re.compile(r"#{1,6}(?:[ \t]|$)")


def body_parts(body: str, part_chars: int) -> Iterator[_Source]:
    """The body's parts, each with its tree (see the module's docstring). A part ends before a heading line
    only when markdown-it, given the part and that line, reads the line as a heading of the top level: then
    no block (a fence, a list, a quote, an HTML block) runs on across it."""
    lines = body.split("\n")  # only "\n": str.splitlines also breaks at characters Markdown does not
    lines = [line + "\n" for line in lines[:-1]] + [lines[-1]]
    start = size = 0
    next_try = part_chars
    blank_before = True
    for number, line in enumerate(lines):
        if size >= next_try and blank_before and _ATX_HEADING.match(line):
            source = _Source("".join(lines[start : number + 1]), start)
            last = source.nodes[-1] if source.nodes else None
            if (
                last is not None
                and last.name == "heading"
                and last.srcmap
                and last.srcmap[0] == len(source.raw) - len(line.encode())
            ):
                source.nodes = source.nodes[:-1]  # the heading starts the next part
                yield source
                start, size, next_try = number, 0, part_chars
            else:
                next_try = 2 * size  # a block runs on across this line: try further on, each try twice as far
        size += len(line)
        blank_before = not line.strip(" \t\r\n")  # Markdown's blank line: spaces and tabs only
    yield _Source("".join(lines[start:]), start)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The block tree is a million objects for 24 MB, all alive until the blocks are read: the cyclic garbage
    collector would walk them again and again as they are made (a fifth of the parse), and finds nothing."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


_HEADER_LINE = re.compile(r"^\s*(?:doc[ _-]?code|classification|department|effective[ _-]?date)\s*:", re.I | re.M)


# An image inlined as a data URI is a picture to a reader, not text: its base64 (megabytes of it) is elided.
_DATA_URI = re.compile(r"(data:[\w.+-]+/[\w.+-]+(?:;[\w.+-]+=[\w.+-]+)*;base64,)[A-Za-z0-9+/=]{16,}")


class _Source:
    """The body's block tree (markdown-it-pyrs: the markdown-it parser compiled, ~10 times markdown-it-py's
    speed) with its UTF-8 bytes, which the tree's source maps index."""

    def __init__(self, body: str, first_line: int = 0) -> None:
        self.raw = body.encode()
        self.nodes: list[Node] = list(_MD.tree(body).children)
        self.first_line = first_line  # of this part in the whole body, counted from 0

    def text(self, start: int, end: int) -> str:
        text = self.raw[start:end].decode(errors="replace")
        return _DATA_URI.sub(r"\1…", text) if "base64," in text else text

    def inline(self, node: Node) -> str:
        """A heading's, paragraph's or cell's inline Markdown as written (markers outside it excluded)."""
        spans = [child.srcmap for child in node.children if child.srcmap]
        if not spans:
            return ""
        return self.text(spans[0][0], spans[-1][1])

    def lines(self, node: Node) -> str:
        """The whole source lines a block spans, each right-trimmed (lists and quotes are kept as written)."""
        if not node.srcmap:
            return ""
        start, end = node.srcmap
        start = self.raw.rfind(b"\n", 0, start) + 1
        return "\n".join(line.rstrip() for line in self.text(start, end).split("\n")).strip()


def _refuse_second_header(source: _Source) -> None:
    """A second front-matter block in the body (it reads as a rule, then a '---'-underlined heading) or an
    HTML header block: two classifications for one document, and taking either one could under-protect it."""
    previous = None
    for node in source.nodes:
        second = (
            node.name == "lheading"
            and node.meta.get("marker") == "-"
            and previous is not None
            and previous.name == "hr"
            and len(_HEADER_LINE.findall(source.inline(node))) >= 2
        ) or (node.name == "html_block" and "document-control" in str(node.meta.get("content", "")))
        if second:
            line = source.first_line + source.raw.count(b"\n", 0, node.srcmap[0]) + 1 if node.srcmap else "?"
            raise HeaderError(
                f"two header blocks: the body repeats one (doc_code, classification, ...) near body line {line}; "
                "a document has one header and one classification, so delete the second one"
            )
        previous = node


def markdown_blocks(body: str, deadline: Deadline | None = None, *, refuse_second_header: bool = False) -> list[Block]:
    refuse_deep_nesting(body)
    blocks: list[Block] = []
    with _collector_paused():
        for source in body_parts(body, PART_CHARS):
            if refuse_second_header:
                _refuse_second_header(source)
            _read_blocks(source, blocks, deadline)
            del source  # its tree, before the next part's is built
    if any(isinstance(b, Paragraph) and not b.text for b in blocks):
        blocks = [b for b in blocks if not (isinstance(b, Paragraph) and not b.text)]
    return blocks


def _read_blocks(source: _Source, blocks: list[Block], deadline: Deadline | None) -> None:
    nodes = source.nodes
    for index, node in enumerate(nodes):
        if deadline is not None and not index % 256:  # the first check follows the tree's build
            where = f" from body line {source.first_line + 1}" if source.first_line else ""
            deadline.check("Markdown", f"block {index + 1} of {len(nodes)}{where}")
        name = node.name
        if name in ("heading", "lheading"):
            blocks.append(Heading(int(node.meta["level"]), source.inline(node).strip()))
        elif name == "paragraph":
            # Soft line breaks are the source's wrapping, not the author's structure.
            blocks.append(Paragraph(" ".join(source.inline(node).split())))
        elif name in ("bullet_list", "ordered_list", "blockquote"):
            blocks.append(Paragraph(source.lines(node)))
        elif name in ("fence", "code_block"):
            blocks.append(Paragraph(f"```\n{str(node.meta.get('content', '')).rstrip()}\n```"))
        elif name == "table":
            blocks.append(_table(source, node))
        elif name == "html_block":
            # Raw HTML: read as the HTML parser reads a page (a comment or an anchor gives no block; hidden
            # elements are marked, as in an HTML document). hr: no text.
            blocks.extend(html_fragment_blocks(str(node.meta.get("content", "")), deadline))


def _table(source: _Source, node: Node) -> Table:
    rows: list[tuple[str, ...]] = []
    for part in node.children:  # thead, tbody
        for row in part.children:
            rows.append(tuple(source.text(*span).strip() if (span := cell.srcmap) else "" for cell in row.children))
    return Table(tuple(rows))
