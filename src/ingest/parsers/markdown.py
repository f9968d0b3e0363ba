"""Markdown: YAML front matter for the header block, markdown-it-py's token stream for the body."""

from __future__ import annotations

import re

import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token

from ingest.document import Block, HeaderError, Heading, Paragraph, ParsedDocument, ParseError, Table
from ingest.header import build_header
from ingest.parsers.text import decode_text, load_yaml

_MD = MarkdownIt("commonmark").enable("table")


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
        raise HeaderError(f"header block: the front matter is not valid YAML ({exc.__class__.__name__})") from None
    if not isinstance(raw, dict):
        raise HeaderError("header block: the front matter must be a mapping of field: value lines")
    body_start = text.find("\n", end + 4)
    return raw, text[body_start + 1 :] if body_start != -1 else ""


def parse_markdown(data: bytes) -> ParsedDocument:
    raw, body = split_front_matter(decode_text(data))
    header = build_header(raw)
    tokens = _MD.parse(body)
    _refuse_second_header(tokens)
    return ParsedDocument(header=header, blocks=markdown_blocks(body, tokens), source_format="markdown")


_HEADER_LINE = re.compile(r"^\s*(?:doc[ _-]?code|classification|department|effective[ _-]?date)\s*:", re.I | re.M)


def _refuse_second_header(tokens: list[Token]) -> None:
    """A second front-matter block in the body (it reads as a rule, then a '---'-underlined heading) or an
    HTML header block: two classifications for one document, and taking either one could under-protect it."""
    for i, token in enumerate(tokens):
        second = (
            token.type == "heading_open"
            and token.markup == "-"
            and i > 0
            and tokens[i - 1].type == "hr"
            and len(_HEADER_LINE.findall(tokens[i + 1].content)) >= 2
        ) or (token.type == "html_block" and "document-control" in token.content)
        if second:
            line = (token.map[0] + 1) if token.map else "?"
            raise HeaderError(
                f"two header blocks: the body repeats one (doc_code, classification, ...) near body line {line}; "
                "a document has one header and one classification, so delete the second one"
            )


def markdown_blocks(body: str, tokens: list[Token] | None = None) -> list[Block]:
    tokens = _MD.parse(body) if tokens is None else tokens
    blocks: list[Block] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.type == "heading_open":
            blocks.append(Heading(int(token.tag[1]), tokens[i + 1].content.strip()))
            i += 3
        elif token.type == "paragraph_open" and token.level == 0:
            # Soft line breaks are the source's wrapping, not the author's structure.
            blocks.append(Paragraph(" ".join(tokens[i + 1].content.split())))
            i += 3
        elif token.type in ("bullet_list_open", "ordered_list_open", "blockquote_open"):
            end = _closing(tokens, i)
            blocks.append(Paragraph(_render_source(body, token)))
            i = end + 1
        elif token.type in ("fence", "code_block"):
            blocks.append(Paragraph(f"```\n{token.content.rstrip()}\n```"))
            i += 1
        elif token.type == "table_open":
            end = _closing(tokens, i)
            blocks.append(_table(tokens[i : end + 1]))
            i = end + 1
        elif token.type == "html_block":
            i += 1  # raw HTML in Markdown (comments, anchors) is not content
        else:
            i += 1
    if any(isinstance(b, Paragraph) and not b.text for b in blocks):
        blocks = [b for b in blocks if not (isinstance(b, Paragraph) and not b.text)]
    return blocks


def _closing(tokens: list[Token], start: int) -> int:
    depth = 0
    for j in range(start, len(tokens)):
        depth += tokens[j].nesting
        if depth == 0:
            return j
    raise ParseError("malformed Markdown: a block is never closed")


def _render_source(body: str, token: Token) -> str:
    """Lists and quotes are kept as written: their Markdown is already the readable form."""
    if token.map is None:
        return ""
    lines = body.splitlines()[token.map[0] : token.map[1]]
    return "\n".join(line.rstrip() for line in lines).strip()


def _table(tokens: list[Token]) -> Table:
    rows: list[tuple[str, ...]] = []
    current: list[str] = []
    for token in tokens:
        if token.type == "tr_open":
            current = []
        elif token.type == "inline":
            current.append(token.content.strip())
        elif token.type == "tr_close":
            rows.append(tuple(current))
    return Table(tuple(rows))
