"""Parse a file of any supported format into a ParsedDocument, or fail with a reason a person can act on."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import PurePosixPath

from ingest.document import Block, HeaderError, Heading, Paragraph, ParsedDocument, ParseError, Table, Unit
from ingest.hidden import has_invisible_characters, reveal_invisible_characters
from ingest.parsers.budget import PARSE_LIMIT_SETTING, Deadline, OutOfMemory, check_package_size
from ingest.parsers.sniff import check_content_matches
from kb_core.file_limits import DEFAULT_MAX_DECOMPRESSED_BYTES, DEFAULT_MAX_PARSE_SECONDS, over_size_limit

FORMATS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
    ".yaml": "openapi",
    ".yml": "openapi",
    ".json": "openapi",
}


class UnsupportedFormat(ParseError):
    pass


def detect_format(name: str) -> str:
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in FORMATS:
        known = ", ".join(sorted(FORMATS))
        raise UnsupportedFormat(f"unsupported file type {suffix or '(no extension)'!r}: the formats are {known}")
    return FORMATS[suffix]


def parse_document(
    data: bytes,
    name: str,
    *,
    max_bytes: int,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    max_parse_seconds: float = DEFAULT_MAX_PARSE_SECONDS,
    max_parse_memory_bytes: int | None = None,
    parse_limit_setting: str = PARSE_LIMIT_SETTING,
) -> ParsedDocument:
    """`max_parse_memory_bytes`: parse in a child of the parse server that may take this much more memory (the
    file fails naming KB_MAX_PARSE_MEMORY_BYTES past it); None parses in this process. `parse_limit_setting`:
    what set `max_parse_seconds`, as a time-out names it."""
    deadline = Deadline(max_parse_seconds, parse_limit_setting)
    kind = detect_format(name)
    if len(data) > max_bytes:
        raise ParseError(over_size_limit(len(data), max_bytes))
    check_content_matches(kind, data, name)
    if kind == "docx":
        check_package_size(data, max_decompressed_bytes, "DOCX")
    if max_parse_memory_bytes:
        from ingest.parsers.parse_server import parse_in_server

        return parse_in_server(
            data,
            name,
            max_memory_bytes=max_parse_memory_bytes,
            max_parse_seconds=max_parse_seconds,
            max_bytes=max_bytes,
            max_decompressed_bytes=max_decompressed_bytes,
            parse_limit_setting=parse_limit_setting,
        )
    try:
        document = _parse(kind, data, name, deadline)
    except ParseError:
        raise
    except MemoryError:
        raise OutOfMemory(f"the {kind} file needs more memory to parse than this process has") from None
    except RecursionError:
        raise ParseError(f"the {kind} file is nested too deeply to read") from None
    except Exception as exc:  # a parser library choking on damaged input: the file fails, not the run
        raise ParseError(f"could not read the {kind} file ({exc.__class__.__name__}: {exc})") from None
    if not any(isinstance(b, Heading) and b.level > 0 and b.text != document.header.title for b in document.blocks):
        raise ParseError(
            "the document has no section headings: its chunks are cut and cited by section, so give it "
            "numbered headings (for example '## 1. Purpose', <h2>, or Word's Heading 1 style)"
        )
    if not any(isinstance(b, Table) or (isinstance(b, Paragraph | Unit) and b.text.strip()) for b in document.blocks):
        # With no chunk to store, ingestion used to fail outside ParseError (numpy could not stack no vectors).
        raise ParseError("the document has section headings but no text under them: there is nothing to index")
    return _without_nul(document)


def _without_nul(document: ParsedDocument) -> ParsedDocument:
    """NUL characters (a JSON \\u0000 or YAML \\0 escape, a PDF's text layer) become U+FFFD, as CommonMark
    does for Markdown: PostgreSQL text cannot hold them, so the file would otherwise fail in the database.
    Invisible characters go too, and invisible tag-character text is marked as hidden (ingest.hidden)."""

    def clean(text: str) -> str:
        return reveal_invisible_characters(text.replace("\x00", "\ufffd"))

    header = document.header
    everything = "\n".join(_texts(document))  # one look at all the text: most documents have nothing to clean
    if "\x00" not in everything and not has_invisible_characters(everything):
        return document
    document.header = replace(
        header,
        title=clean(header.title),
        owner=clean(header.owner),
        regulatory_refs=tuple(clean(ref) for ref in header.regulatory_refs),
    )
    document.blocks = [_cleaned(b, clean) for b in document.blocks]
    return document


def _texts(document: ParsedDocument) -> Iterator[str]:
    header = document.header
    yield from (header.title, header.owner, *header.regulatory_refs)
    for block in document.blocks:
        if isinstance(block, Table):
            yield from (cell for row in block.rows for cell in row)
        else:
            yield block.text
            if isinstance(block, Unit):
                yield block.lead


def _cleaned(block: Block, clean: Callable[[str], str]) -> Block:
    if isinstance(block, Table):
        return Table(tuple(tuple(clean(cell) for cell in row) for row in block.rows))
    if isinstance(block, Unit):
        return replace(block, text=clean(block.text), lead=clean(block.lead))
    text = clean(block.text)
    return block if text == block.text else replace(block, text=text)  # most blocks: no copy


def _parse(kind: str, data: bytes, name: str, deadline: Deadline) -> ParsedDocument:
    if kind == "markdown":
        from ingest.parsers.markdown import parse_markdown

        return parse_markdown(data, deadline)
    if kind == "html":
        from ingest.parsers.html import parse_html

        return parse_html(data, deadline)
    if kind == "docx":
        from ingest.parsers.docx import parse_docx

        return parse_docx(data, deadline)
    if kind == "pdf":
        from ingest.parsers.pdf import parse_pdf

        return parse_pdf(data, deadline)
    from ingest.parsers.openapi import parse_openapi

    return parse_openapi(data, is_json=name.lower().endswith(".json"), deadline=deadline)


__all__ = ["FORMATS", "HeaderError", "ParseError", "UnsupportedFormat", "detect_format", "parse_document"]
