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
- No chunk is longer than the embedder takes (`max_tokens`, with the title and section path it is embedded
  under): a table row, cell, code block or line longer than a chunk is cut, a row under the header row and
  its first cell, a code block inside its fences, an operation under its method, path and operationId.
- Tokens are counted with the production model's tokenizer (cl100k_base).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from ingest.document import Block, Heading, Paragraph, ParsedDocument, Table, Unit
from kb_core.token_count import EMBEDDING_INPUT_LIMIT, count_tokens, decode, encode, seam_tokens, starts_word

TARGET_TOKENS = 600
OVERLAP_TOKENS = 80
TABLE_LIMIT = 1200
ROW_GROUP_MIN_ROWS = 6
ROWS_PER_GROUP = 3
SEPARATOR = " › "
MAX_PATH_HEADING_CHARS = 200  # a longer heading is cut in the section path; its whole text opens the section

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
    title = _simple(document.header.title)
    headings = [b for b in document.blocks if isinstance(b, Heading) and not _is_title(b, title)]
    base = min((h.level for h in headings), default=1)
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    current: list[Block] = []

    def flush() -> None:
        if current:
            sections.append(Section(tuple(text for _, text in stack), tuple(current)))

    for block in document.blocks:
        if isinstance(block, Heading):
            if _is_title(block, title):
                continue
            flush()
            current = []
            level = max(1, block.level - base + 1)
            while stack and stack[-1][0] >= level:
                stack.pop()
            if len(block.text) > MAX_PATH_HEADING_CHARS:
                # The path is in every chunk's prefix: a heading of pages would crowd out the text itself.
                stack.append((level, block.text[:MAX_PATH_HEADING_CHARS].rstrip() + "…"))
                current.append(Paragraph(block.text))
                continue
            stack.append((level, block.text))
        else:
            current.append(block)
    flush()
    return sections


def _simple(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def _is_title(heading: Heading, simple_title: str) -> bool:
    return heading.level == 0 or _simple(heading.text) == simple_title


def chunk_document(
    document: ParsedDocument,
    *,
    target: int = TARGET_TOKENS,
    overlap: int = OVERLAP_TOKENS,
    table_limit: int = TABLE_LIMIT,
    max_tokens: int = EMBEDDING_INPUT_LIMIT,
) -> list[Chunk]:
    """`max_tokens`: the most the embedder takes in one input; every chunk's embedded text fits it."""
    chunks: list[Chunk] = []
    anchors = _Anchors()
    title_tokens = count_tokens(Chunk(0, "", "", "", 0).embedding_text(document.header.title)) + 2
    for section in split_sections(document):
        section_path = SEPARATOR.join(section.path)
        anchor = anchors.for_path(section.path)
        # What the prefix and the separators take (the title's counted once; 16 tokens of margin for where
        # the parts of the prefix and two pieces are joined).
        room = max(64, max_tokens - title_tokens - count_tokens(section_path) - 16)
        limit = min(table_limit, room)
        pieces = [p for block in section.blocks for p in _pieces(block, min(target, limit), limit)]
        for packed in _pack(pieces, min(target, limit), overlap):
            joined = _join(packed)
            known = _joined_tokens(packed)  # the pieces are counted already: most chunks need no second count
            for content in [joined] if known is not None and known <= room else _within(joined, room):
                tokens = known if known is not None and content is joined else count_tokens(content)
                whole = Chunk(len(chunks), section_path, anchor, content, tokens)
                chunks.append(whole)
            for group in (g for piece in packed for g in piece.row_groups):
                for part in _within(group, room):
                    chunks.append(Chunk(len(chunks), section_path, anchor, part, count_tokens(part), whole.ordinal))
    return chunks


def _within(text: str, room: int) -> list[str]:
    """The last guard of the embedder's limit: the pieces are already cut to fit, so this cuts nothing
    unless a piece was misjudged."""
    if len(text) <= room and text.isascii():  # an ASCII character is never more than one token
        return [text]
    ids = encode(text)
    if len(ids) <= room:
        return [text]
    return [decode(ids[start : start + room]) for start in range(0, len(ids), room)]


def _pieces(block: Block, target: int, table_limit: int) -> list[_Piece]:
    if isinstance(block, Table):
        return _table_pieces(block, target, table_limit)
    if isinstance(block, Unit):
        tokens = count_tokens(block.text)
        if tokens < table_limit:
            return [_Piece(block.text, tokens, True)]
        return _unit_pieces(block, target)
    if isinstance(block, Paragraph):
        if block.text.startswith("```") and block.text.endswith("```") and count_tokens(block.text) > target:
            return _code_pieces(block.text, target)
        return _text_pieces(block.text, target)
    return []


def _table_pieces(table: Table, target: int, table_limit: int) -> list[_Piece]:
    if not table.rows:
        return []
    whole = table.render()
    if len(whole.encode()) <= target // 2:  # the usual small table: no row or header can be too long
        tokens = count_tokens(whole)
        return [_Piece(whole, tokens, True, _row_groups(table, table.rows[1:], target, table_limit))]
    if not _fits(table.render(()), target // 2):
        # A header row of half a chunk leaves no room for rows under it: the table is read as text.
        return _text_pieces(table.render(), target)
    rows = tuple(part for row in table.rows[1:] for part in _fitting_rows(table, row, target))
    tokens = count_tokens(whole)
    if tokens < table_limit:
        return [_Piece(whole, tokens, True, _row_groups(table, rows, target, table_limit))]
    return [
        _Piece(
            table.render(group), count_tokens(table.render(group)), True, _row_groups(table, group, target, table_limit)
        )
        for group in _split_table(table, rows, target)
    ]


def _fitting_rows(table: Table, row: tuple[str, ...], target: int) -> list[tuple[str, ...]]:
    """The row itself, or, when it is longer than a chunk under the header row, its cells cut into parts
    that are: each part keeps the row's first cell (what the row is about) when that is short."""
    if _fits(table.render((row,)), target):
        return [row]
    width = max(len(r) for r in table.rows)
    row = (*row, *([""] * (width - len(row))))
    room = target - count_tokens(table.render(((),)))
    label = row[0] if count_tokens(row[0]) <= room // 4 else ""
    window = max(16, room - count_tokens(label) - 2 * width - 8)
    fragments: list[tuple[int, str]] = []
    for index, cell in enumerate(row):
        if index == 0 and label:
            continue
        fragments += [(index, part) for part in _windows(cell, window)]
    parts: list[tuple[str, ...]] = []
    current: dict[int, str] = {0: label} if label else {}

    def as_row(cells: dict[int, str]) -> tuple[str, ...]:
        return tuple(cells.get(i, "") for i in range(width))

    for index, text in fragments:
        trial = {**current, index: text}
        # A cell's next window always opens a new part.
        if index not in current and count_tokens(table.render((as_row(trial),))) <= target:
            current = trial
            continue
        if any(i != 0 or not label for i in current):
            parts.append(as_row(current))
        current = {0: label, index: text} if label else {index: text}
    if any(i != 0 or not label for i in current):
        parts.append(as_row(current))
    return parts


def _fits(text: str, limit: int) -> bool:
    """Whether `text` is at most `limit` tokens, counting only when its UTF-8 length does not already say so
    (a token is at least one byte): most rows and headers are far under a chunk."""
    return len(text.encode()) <= limit or count_tokens(text) <= limit


def _windows(text: str, window: int) -> list[str]:
    """Text cut into parts of at most `window` tokens, between words where there is a word boundary in the
    last half of the window (a base64 run is cut by tokens). One encoding of the text: linear in its size."""
    ids = encode(text)
    parts: list[str] = []
    start = 0
    while start < len(ids):
        end = min(start + window, len(ids))
        if end < len(ids):
            # A word boundary within the last 48 tokens (none in a base64 run: looking further is wasted).
            lowest = max(start + window // 2, end - 48)
            end = next((cut for cut in range(end, lowest, -1) if starts_word(ids[cut])), end)
        part = decode(ids[start:end]).strip()
        if part:
            parts.append(part)
        start = end
    return parts


def _unit_pieces(unit: Unit, target: int) -> list[_Piece]:
    """An operation longer than a chunk, by paragraphs; every part after the first (which opens with the
    operation's own first lines) under the unit's lead, so that each names its method, path and operationId."""
    lead = f"{unit.lead} (continued)" if unit.lead else ""
    room = target - count_tokens(lead) - 4
    if not lead or room < target // 2:  # no lead, or one of half a chunk: the unit is text like any other
        return [p for part in re.split(r"\n\s*\n", unit.text) for p in _text_pieces(part, target)]
    pieces = [
        _Piece(group, count_tokens(group), False)
        for part in re.split(r"\n\s*\n", unit.text)
        if part.strip()
        for group in _line_groups(part.strip("\n"), room)
    ]
    parts: list[_Piece] = []
    for packed in _pack(pieces, room, 0):
        text = _join(packed) if not parts else f"{lead}\n\n{_join(packed)}"
        parts.append(_Piece(text, count_tokens(text), True))
    return parts


def _code_pieces(text: str, target: int) -> list[_Piece]:
    """A code block longer than a chunk, by lines, each part inside its own fences."""
    body = text.removeprefix("```").removesuffix("```").strip("\n")
    fenced = [f"```\n{part}\n```" for part in _line_groups(body, target - 8)]
    return [_Piece(part, count_tokens(part), True) for part in fenced]


def _line_groups(text: str, room: int) -> list[str]:
    """Consecutive lines, as written (indentation kept), in groups of at most `room` tokens; a line longer
    than that is cut between words."""
    groups: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.split("\n"):
        for piece in _windows(line, room) if count_tokens(line) > room else [line]:
            n = count_tokens(piece) + 1
            if current and size + n > room:
                groups.append("\n".join(current))
                current, size = [], 0
            current.append(piece)
            size += n
    if current:
        groups.append("\n".join(current))
    return groups


def _text_pieces(text: str, target: int) -> list[_Piece]:
    text = text.strip()
    if not text:
        return []
    tokens = count_tokens(text)
    if tokens <= target:
        return [_Piece(text, tokens, False)]
    pieces = []
    for sentence in sentences(text):
        n = count_tokens(sentence)
        if n <= target:
            pieces.append(_Piece(sentence, n, False))
        else:  # a "sentence" longer than a chunk (a log dump, a long list line): cut between words
            pieces += [_Piece(part, count_tokens(part), False) for part in _windows(sentence, target)]
    return pieces


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _split_table(table: Table, rows: tuple[tuple[str, ...], ...], target: int) -> list[tuple[tuple[str, ...], ...]]:
    """Row groups under `target` tokens (each is rendered under a copy of the header row); every row already
    fits under the header row alone (_fitting_rows)."""
    parts: list[tuple[tuple[str, ...], ...]] = []
    group: list[tuple[str, ...]] = []
    for row in rows:
        candidate = table.render((*group, row))
        if group and count_tokens(candidate) > target:
            parts.append(tuple(group))
            group = []
        group.append(row)
    if group:
        parts.append(tuple(group))
    return parts


def _row_groups(table: Table, rows: tuple[tuple[str, ...], ...], target: int, table_limit: int) -> tuple[str, ...]:
    if len(rows) < ROW_GROUP_MIN_ROWS:
        return ()
    groups: list[str] = []
    for i in range(0, len(rows), ROWS_PER_GROUP):
        group = rows[i : i + ROWS_PER_GROUP]
        text = table.render(group)
        if count_tokens(text) < table_limit:
            groups.append(text)
        else:
            groups += [table.render(part) for part in _split_table(table, group, target)]
    return tuple(groups)


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
    for sentence in reversed(sentences(previous[-1].text)):
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


def _joined_tokens(pieces: list[_Piece]) -> int | None:
    """The exact token count of _join(pieces) from the pieces' own counts, or None where a seam between two
    pieces is not known without counting the whole."""
    total = pieces[0].tokens
    for before, after in itertools.pairwise(pieces):
        seam = seam_tokens(before.text, after.text)
        if seam is None:
            return None
        total += seam + after.tokens
    return total


class _Anchors:
    """Citation fragments: the section number of the deepest numbered heading ('4.2'), else a slug."""

    def __init__(self) -> None:
        self.by_path: dict[tuple[str, ...], str] = {}
        self.used: set[str] = set()
        self.next_suffix: dict[str, int] = {}  # where the search for a free '-n' resumes: linear, not quadratic

    def for_path(self, path: tuple[str, ...]) -> str:
        if path in self.by_path:
            return self.by_path[path]
        anchor = "top"
        if path:
            number = _NUMBERED.match(path[-1])
            anchor = number.group(1) if number else _slug(path[-1])
        candidate, n = anchor, self.next_suffix.get(anchor, 2)
        while candidate in self.used:
            candidate, n = f"{anchor}-{n}", n + 1
        self.next_suffix[anchor] = n
        self.used.add(candidate)
        self.by_path[path] = candidate
        return candidate


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "section"
