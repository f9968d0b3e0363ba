"""Heading chunker: one section per heading, ~600-token chunks with 80-token overlap, tables kept whole.

- The section path is the chain of headings above a block (`4. Customer Risk Rating › 4.2 Enhanced Due
  Diligence`); the document's title heading is not part of it (the title is in every chunk's prefix).
- A section longer than the target is split at paragraph boundaries (then sentences, then tokens), and
  each continuation repeats the last ~80 tokens of the chunk before it.
- A table (or an OpenAPI operation) under the table limit stays in one chunk; a larger table is split by
  rows, each part under its own copy of the header row.
- A table of ROW_GROUP_MIN_ROWS rows or more is also indexed as row groups of ROWS_PER_GROUP rows, each
  under the header row, citing the same section: one vector for fifteen rows is an average that a question
  about one row does not find. Each row group names the chunk holding its whole table (`rows_of`), and search
  shows at most one of a table's chunks, so a result never repeats rows; the whole table stays retrievable.
- Tokens are counted with the production model's tokenizer (cl100k_base).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ingest.document import Block, Heading, Paragraph, ParsedDocument, Table, Unit
from kb_core.token_count import count_tokens, decode, encode

TARGET_TOKENS = 600
OVERLAP_TOKENS = 80
TABLE_LIMIT = 1200
ROW_GROUP_MIN_ROWS = 6
ROWS_PER_GROUP = 3
SEPARATOR = " › "

_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+(?=[A-Z0-9(\"'`*-])|\n+")
_NUMBERED = re.compile(r"^(\d+(?:\.\d+)*)\.?(?=\s|$)")


@dataclass(frozen=True)
class Chunk:
    ordinal: int
    section_path: str
    anchor: str
    content: str
    token_count: int
    rows_of: int | None = None  # a row group: the ordinal of the chunk holding its whole table

    def embedding_text(self, title: str) -> str:
        """What is embedded: the contextual prefix, then the content."""
        prefix = f"{title} — {self.section_path}" if self.section_path else title
        return f"{prefix}\n\n{self.content}"


@dataclass(frozen=True)
class Section:
    path: tuple[str, ...]
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class _Piece:
    text: str
    tokens: int
    whole: bool  # a table or a unit: never cut, never used as overlap
    row_groups: tuple[str, ...] = ()  # a table's rows, a few at a time under the header row


def split_sections(document: ParsedDocument) -> list[Section]:
    headings = [b for b in document.blocks if isinstance(b, Heading) and not _is_title(b, document.header.title)]
    base = min((h.level for h in headings), default=1)
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    current: list[Block] = []

    def flush() -> None:
        if current:
            sections.append(Section(tuple(text for _, text in stack), tuple(current)))

    for block in document.blocks:
        if isinstance(block, Heading):
            if _is_title(block, document.header.title):
                continue
            flush()
            current = []
            level = max(1, block.level - base + 1)
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, block.text))
        else:
            current.append(block)
    flush()
    return sections


def _is_title(heading: Heading, title: str) -> bool:
    def simple(text: str) -> str:
        return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()

    return heading.level == 0 or simple(heading.text) == simple(title)


def chunk_document(
    document: ParsedDocument,
    *,
    target: int = TARGET_TOKENS,
    overlap: int = OVERLAP_TOKENS,
    table_limit: int = TABLE_LIMIT,
) -> list[Chunk]:
    chunks: list[Chunk] = []
    anchors = _Anchors()
    for section in split_sections(document):
        section_path = SEPARATOR.join(section.path)
        anchor = anchors.for_path(section.path)
        pieces = [p for block in section.blocks for p in _pieces(block, target, table_limit)]
        for packed in _pack(pieces, target, overlap):
            content = _join(packed)
            whole = Chunk(len(chunks), section_path, anchor, content, count_tokens(content))
            chunks.append(whole)
            for group in (g for piece in packed for g in piece.row_groups):
                chunks.append(Chunk(len(chunks), section_path, anchor, group, count_tokens(group), whole.ordinal))
    return chunks


def _pieces(block: Block, target: int, table_limit: int) -> list[_Piece]:
    if isinstance(block, Table):
        whole = block.render()
        tokens = count_tokens(whole)
        if tokens < table_limit:
            return [_Piece(whole, tokens, True, _row_groups(block, block.rows[1:]))]
        return [
            _Piece(block.render(rows), count_tokens(block.render(rows)), True, _row_groups(block, rows))
            for rows in _split_table(block, target)
        ]
    if isinstance(block, Unit):
        tokens = count_tokens(block.text)
        if tokens < table_limit:
            return [_Piece(block.text, tokens, True)]
        return [p for part in re.split(r"\n\s*\n", block.text) for p in _text_pieces(part, target)]
    if isinstance(block, Paragraph):
        return _text_pieces(block.text, target)
    return []


def _text_pieces(text: str, target: int) -> list[_Piece]:
    text = text.strip()
    if not text:
        return []
    tokens = count_tokens(text)
    if tokens <= target:
        return [_Piece(text, tokens, False)]
    pieces = []
    for sentence in _sentences(text):
        n = count_tokens(sentence)
        if n <= target:
            pieces.append(_Piece(sentence, n, False))
        else:  # a "sentence" longer than a chunk (a log dump, a long list line): cut by tokens
            ids = encode(sentence)
            for start in range(0, len(ids), target):
                part = decode(ids[start : start + target])
                pieces.append(_Piece(part, count_tokens(part), False))
    return pieces


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _split_table(table: Table, target: int) -> list[tuple[tuple[str, ...], ...]]:
    """Row groups under `target` tokens (each is rendered under a copy of the header row)."""
    parts: list[tuple[tuple[str, ...], ...]] = []
    group: list[tuple[str, ...]] = []
    for row in table.rows[1:]:
        candidate = table.render((*group, row))
        if group and count_tokens(candidate) > target:
            parts.append(tuple(group))
            group = []
        group.append(row)
    if group:
        parts.append(tuple(group))
    return parts


def _row_groups(table: Table, rows: tuple[tuple[str, ...], ...]) -> tuple[str, ...]:
    if len(rows) < ROW_GROUP_MIN_ROWS:
        return ()
    return tuple(table.render(rows[i : i + ROWS_PER_GROUP]) for i in range(0, len(rows), ROWS_PER_GROUP))


def _pack(pieces: list[_Piece], target: int, overlap: int) -> list[list[_Piece]]:
    chunks: list[list[_Piece]] = []
    current: list[_Piece] = []
    size = 0
    for piece in pieces:
        if current and size + piece.tokens > target:
            chunks.append(current)
            current = _overlap(current, overlap)
            size = sum(p.tokens for p in current)
            if current and size + piece.tokens > max(target, piece.tokens):
                current, size = [], 0
        current.append(piece)
        size += piece.tokens
    if current:
        chunks.append(current)
    return chunks


def _overlap(previous: list[_Piece], overlap: int) -> list[_Piece]:
    """The last ~`overlap` tokens of running text (whole sentences), to open the next chunk."""
    if not previous or previous[-1].whole or overlap <= 0:
        return []
    tail: list[str] = []
    tokens = 0
    for sentence in reversed(_sentences(previous[-1].text)):
        n = count_tokens(sentence)
        if tail and tokens + n > overlap * 1.5:
            break
        tail.insert(0, sentence)
        tokens += n
        if tokens >= overlap:
            break
    if tokens > overlap * 1.5:  # one long sentence: keep its last `overlap` tokens
        text = decode(encode(" ".join(tail))[-overlap:])
        return [_Piece(text, count_tokens(text), False)]
    return [_Piece(" ".join(tail), tokens, False)] if tail else []


def _join(pieces: list[_Piece]) -> str:
    return "\n\n".join(p.text for p in pieces)


class _Anchors:
    """Citation fragments: the section number of the deepest numbered heading ('4.2'), else a slug."""

    def __init__(self) -> None:
        self.by_path: dict[tuple[str, ...], str] = {}
        self.used: set[str] = set()

    def for_path(self, path: tuple[str, ...]) -> str:
        if path in self.by_path:
            return self.by_path[path]
        anchor = "top"
        if path:
            number = _NUMBERED.match(path[-1])
            anchor = number.group(1) if number else _slug(path[-1])
        candidate, n = anchor, 2
        while candidate in self.used:
            candidate, n = f"{anchor}-{n}", n + 1
        self.used.add(candidate)
        self.by_path[path] = candidate
        return candidate


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "section"
