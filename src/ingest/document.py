"""The one shape every format is normalised to before chunking: a header and a flat list of blocks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

from kb_core.roles import Classification

DocStatus = str  # 'effective' | 'superseded' | 'draft'


class ParseError(Exception):
    """The file cannot be read as a document; the message says why and what to do."""


# A file of nothing (or of only whitespace) is most often a copy or an upload that was cut short.
EMPTY_FILE = (
    "the file is empty: if the document has content, copy or upload it again (a copy or an upload may have been "
    "cut short)"
)


class HeaderError(ParseError):
    """The header block is missing or a field is invalid; the message names the field."""


@dataclass(frozen=True)
class Header:
    doc_code: str
    title: str
    version: str
    status: DocStatus
    effective_date: date
    owner: str
    department: str
    classification: Classification
    regulatory_refs: tuple[str, ...] = ()

    @property
    def version_key(self) -> tuple[int, ...]:
        return tuple(int(part) for part in self.version.split("."))


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Paragraph:
    """Running text: a paragraph, a list, a code block, or a block quote, as readable Markdown."""

    text: str


@dataclass(frozen=True)
class Table:
    """Rows of cell texts; the first row is the header row."""

    rows: tuple[tuple[str, ...], ...]

    def render(self, rows: tuple[tuple[str, ...], ...] | None = None) -> str:
        """A Markdown pipe table of the header row and `rows` (default: all rows)."""
        body = self.rows[1:] if rows is None else rows
        width = max(len(r) for r in self.rows)

        def line(cells: tuple[str, ...]) -> str:
            padded = [*cells, *([""] * (width - len(cells)))]
            return "| " + " | ".join(_cell(c) for c in padded) + " |"

        return "\n".join([line(self.rows[0]), "|" + " --- |" * width, *(line(r) for r in body)])


@dataclass(frozen=True)
class Unit:
    """Text that belongs together and is kept whole up to the table limit (an OpenAPI operation).

    When it is too long for one chunk, each part opens with `lead` (an operation's method, path and
    operationId), so that no part loses what it belongs to."""

    text: str
    lead: str = ""


Block = Heading | Paragraph | Table | Unit


@dataclass
class ParsedDocument:
    header: Header
    blocks: list[Block] = field(default_factory=list)
    source_format: str = "markdown"


def _cell(text: str) -> str:
    # str.split() and re's \s both break on str.isspace(): this is re.sub(r"\s+", " ", text).strip(), cheaper.
    return " ".join(text.split()).replace("|", "\\|")


def normalise_space(text: str) -> str:
    """Collapse runs of spaces and tabs, trim each line, drop empty lines at both ends."""
    lines = [re.sub(r"[ \t\u00a0]+", " ", line).strip() for line in text.splitlines()]
    return "\n".join(lines).strip()
