"""Reference extractions, independent of the product's parsers: the text of each format as another reader
gets it, in reading units (paragraphs, lines, strings), in order.

- PDF: pypdf's text extraction, line by line (the product reads PDFs with pymupdf).
- DOCX: the raw WordprocessingML of the body, footnotes and endnotes: each paragraph's w:t text, with the
  fallback copy of alternate content (text boxes are stored twice) left out.
- HTML: the standard library's HTMLParser over the page's main content (<main>, role="main" or
  itemprop="articleBody", else <body>), without scripts, styles and hidden elements.
- OpenAPI: each operation's path and method, and every summary, description, operationId and parameter
  name under it (callbacks included), for paths and webhooks; and info's description.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import yaml
from lxml import etree


class NoReference(Exception):
    """The reference reader cannot read the file either (an encrypted PDF)."""


def reference_units(kind: str, data: bytes) -> list[str]:
    readers = {"pdf": _pdf, "docx": _docx, "html": _html, "openapi": _openapi}
    return [unit for unit in readers[kind](data) if unit.strip()]


def _pdf(data: bytes) -> list[str]:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        raise NoReference("the PDF is encrypted")
    return [line for page in reader.pages for line in (page.extract_text() or "").splitlines()]


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"


def _docx(data: bytes) -> list[str]:
    units: list[str] = []
    with zipfile.ZipFile(io.BytesIO(data)) as package:
        for part in ("word/document.xml", "word/footnotes.xml", "word/endnotes.xml"):
            if part in package.namelist():
                _walk_docx(etree.fromstring(package.read(part)), units, [])
    return units


def _walk_docx(element: Any, units: list[str], current: list[str]) -> None:
    if element.tag == _FALLBACK:
        return
    if element.tag == f"{_W}p":
        own: list[str] = []
        for child in element:
            _walk_docx(child, units, own)
        units.append("".join(own))
        return
    if element.tag == f"{_W}t":
        current.append(element.text or "")
    elif element.tag in (f"{_W}tab", f"{_W}br", f"{_W}cr"):
        current.append(" ")
    for child in element:
        _walk_docx(child, units, current)


_SKIP = {"script", "style", "noscript", "template", "head"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
_BLOCK = {
    *("p", "div", "section", "article", "main", "aside", "header", "footer", "nav", "blockquote", "pre"),
    *("table", "tr", "td", "th", "li", "ul", "ol", "dl", "dt", "dd", "figure", "figcaption", "br", "hr"),
    *("h1", "h2", "h3", "h4", "h5", "h6"),
}


class _MainText(HTMLParser):
    def __init__(self, main_only: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.main_only = main_only
        self.units: list[str] = []
        self._text: list[str] = []
        self._main: tuple[str, int] | None = None  # the main element's tag and its nesting depth of that tag
        self._done = False
        self._skip: list[tuple[str, int]] = []  # open skipped elements: (tag, depth of that tag)
        self._depth: dict[str, int] = {}

    def _flush(self) -> None:
        if self._text:
            self.units.append(" ".join("".join(self._text).split()))
            self._text = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCK:
            self._flush()
        if tag in _VOID:
            return
        self._depth[tag] = self._depth.get(tag, 0) + 1
        attributes = dict(attrs)
        style = (attributes.get("style") or "").replace(" ", "").lower()
        hidden = "hidden" in attributes or attributes.get("aria-hidden") == "true" or "display:none" in style
        if tag in _SKIP or hidden:
            self._skip.append((tag, self._depth[tag]))
        is_main = tag == "main" or attributes.get("role") == "main" or attributes.get("itemprop") == "articleBody"
        if self.main_only and is_main and self._main is None and not self._done:
            self._main = (tag, self._depth[tag])

    def handle_endtag(self, tag: str) -> None:
        if tag in _BLOCK:
            self._flush()
        if tag in _VOID or not self._depth.get(tag):
            return
        if self._skip and self._skip[-1] == (tag, self._depth[tag]):
            self._skip.pop()
        if self._main == (tag, self._depth[tag]):
            self._main, self._done = None, True
        self._depth[tag] -= 1

    def handle_data(self, data: str) -> None:
        inside = self._main is not None or not self.main_only
        if inside and not self._skip:
            self._text.append(data)


def _html(data: bytes) -> list[str]:
    text = data.decode("utf-8", errors="replace")
    marked = any(mark in text for mark in ("<main", 'role="main"', 'itemprop="articleBody"'))
    reader = _MainText(main_only=marked)
    reader.feed(text)
    reader.close()
    reader._flush()
    return reader.units


_PROSE_KEYS = {"summary", "description", "operationId", "name"}
_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def _openapi(data: bytes) -> list[str]:
    spec = yaml.safe_load(data)
    info = spec.get("info", {})
    units = [str(info.get("description", ""))]  # info.title is the header's title, stored beside the text
    for group in ("paths", "webhooks"):
        for path, item in (spec.get(group) or {}).items():
            for method, operation in (item or {}).items():
                if method in _METHODS and isinstance(operation, dict):
                    units.append(f"{method.upper()} {path}")
                    units.extend(_prose(operation))
    return units


def _prose(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _PROSE_KEYS and isinstance(value, str):
                yield value
            elif key != "$ref":
                yield from _prose(value)
    elif isinstance(node, list):
        for value in node:
            yield from _prose(value)
