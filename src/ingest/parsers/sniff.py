"""What a file really is, from its first bytes, so that a file whose extension lies fails with that said.

Without this, a text file named .pdf reached the PDF library (which opens plain text) and failed with
"no header block", and a PDF named .md failed as "binary, not text".
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from ingest.document import ParseError
from ingest.parsers.text import encoding_of

# kind -> how a person names it, and the extension it should have
_NAMES = {
    "pdf": ("a PDF file", ".pdf"),
    "docx": ("a DOCX file", ".docx"),
    "html": ("HTML", ".html"),
    "markdown": ("Markdown text", ".md"),
    "openapi": ("a YAML or JSON file", ".yaml or .json"),
}
_OTHER_BINARIES = (
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Office file (.doc, .xls or .ppt)", "re-save it as .docx or PDF"),
    (b"\x89PNG", "a PNG image", "export the document as PDF with its text layer"),
    (b"\xff\xd8\xff", "a JPEG image", "export the document as PDF with its text layer"),
    (b"GIF8", "a GIF image", "export the document as PDF with its text layer"),
    (b"\x1f\x8b", "a gzip archive", "decompress it first"),
    (b"{\\rtf", "an RTF document", "re-save it as .docx"),
)


def real_kind(data: bytes) -> tuple[str, str | None, str]:
    """(kind or '', the extension it should have or None, a person's name for it) from the content."""
    head = data[:1024]
    # A PDF starts with %PDF- (readers allow junk before it within 1 KB; then it also ends with %%EOF, which
    # a text file that merely mentions "%PDF-" near its top does not).
    if head.lstrip(b" \t\r\n\xef\xbb\xbf").startswith(b"%PDF-") or (b"%PDF-" in head and b"%%EOF" in data[-2048:]):
        return "pdf", ".pdf", "a PDF"
    if head.startswith(b"PK\x03\x04"):
        # A package names its parts in the zip's local headers: Word keeps them under word/.
        if b"word/" in data[:65536]:
            return "docx", ".docx", "a DOCX (Word) document"
        if b"xl/" in data[:65536]:
            return "", None, "an Excel workbook (.xlsx)"
        if b"ppt/" in data[:65536]:
            return "", None, "a PowerPoint presentation (.pptx)"
        if b"[Content_Types].xml" in data[:4096]:  # an Office package without its parts: a damaged .docx
            return "docx", ".docx", "a DOCX (Word) document"
        return "", None, "a ZIP archive"
    for magic, name, _ in _OTHER_BINARIES:
        if head.startswith(magic):
            return "", None, name
    text = _text_head(head)
    if text is None:
        return "", None, "binary data"
    start = text.lstrip("\ufeff \t\r\n").lower()
    if start.startswith(("<!doctype html", "<html", "<head", "<body")):
        return "html", ".html", _NAMES["html"][0]
    # Named only to word the error for a file under a binary type's extension: every text kind is accepted
    # as "text" by the text parsers, which tell the formats apart themselves.
    if _OPENAPI_START.match(start):
        return "text", ".yaml or .json", "an OpenAPI document"
    if start.startswith(("---", "# ")):
        return "text", ".md", _NAMES["markdown"][0]
    return "text", None, "text"


_OPENAPI_START = re.compile(r'(?:---\s*)?(?:\{\s*)?"?openapi"?\s*:')


# Front matter closed by a second `---` at the start of a line, then a Markdown heading. Never a valid YAML or
# JSON API description (a second `---` there starts a second document, which the OpenAPI parser refuses), nor
# an HTML page: so a Markdown document under .yaml, .json or .html is named, not parsed as what it is not (and
# not passed as "unchanged" when its bytes were stored from the .md).
_FRONT_MATTER_THEN_HEADING = re.compile(r"---[ \t]*\r?\n(?:.*\n)*?---[ \t]*\r?\n(?:.*\n)*?#{1,6}[ \t]+\S")


def _markdown_with_front_matter(data: bytes) -> bool:
    text = _text_head(data[:65536])
    return text is not None and _FRONT_MATTER_THEN_HEADING.match(text.lstrip("\ufeff \t\r\n")) is not None


def _text_head(head: bytes) -> str | None:
    encoding = encoding_of(head)
    if encoding is None:
        return None
    return head.decode(encoding, errors="ignore")


def check_content_matches(kind: str, data: bytes, name: str) -> None:
    """Raise one line naming the real type and the extension when the content is not what the name says."""
    if not data.strip():
        return  # the parsers say "the file is empty"
    actual, extension, described = real_kind(data)
    if actual == "text" and kind in ("html", "openapi") and _markdown_with_front_matter(data):
        actual, extension, described = "markdown", ".md", _NAMES["markdown"][0]
    if actual == kind or (actual == "text" and kind in ("markdown", "html", "openapi")):
        return
    suffix = PurePosixPath(name).suffix or "(no extension)"
    expected = _NAMES[kind][0]
    fix = f"rename it to {extension}" if extension else _fix_for(data, described, kind)
    raise ParseError(
        f"the file is {described}, not {expected}: its extension {suffix} does not match its content; {fix}"
    )


def _fix_for(data: bytes, described: str, kind: str) -> str:
    for magic, _, fix in _OTHER_BINARIES:
        if data.startswith(magic):
            return fix
    if described == "text":
        return f"give it the extension of its format (.md, .html, .yaml or .json), or export it as {_NAMES[kind][1]}"
    return "export the document as PDF, DOCX, Markdown, HTML or OpenAPI"
