"""HTML: the header block is a <dl class="document-control">; the body is walked in document order.

Page chrome (navigation, breadcrumbs, footers, scripts) is not content and is skipped.
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

from ingest.document import Block, HeaderError, Heading, Paragraph, ParsedDocument, Table, normalise_space
from ingest.header import build_header
from ingest.hidden import hidden_by_attributes, mark_hidden
from ingest.parsers.text import decode_text

_SKIP_TAGS = {"script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form", "button", "svg"}
_SKIP_CLASS = re.compile(r"(^|[\s_-])(nav|navbar|breadcrumbs?|footer|menu|sidebar|toolbar|skip-link)($|[\s_-])", re.I)
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_TEXT_BLOCKS = {"p", "pre", "blockquote", "figcaption", "address"}


def parse_html(data: bytes) -> ParsedDocument:
    tree = LexborHTMLParser(decode_text(data))
    controls = tree.css("dl.document-control")
    if len(controls) > 1:
        raise HeaderError(
            f'{len(controls)} header blocks (<dl class="document-control">): a document has one header and one '
            "classification; keep the one that is right and delete the others"
        )
    control = controls[0] if controls else None
    if control is None:
        raise HeaderError(
            'no header block: an HTML document carries it in a <dl class="document-control"> with '
            "<dt>Label</dt><dd>value</dd> pairs; see docs/header-block.md"
        )
    raw: dict[str, object] = {}
    label = None
    for node in control.iter():
        if node.tag == "dt":
            label = _inline(node)
        elif node.tag == "dd" and label is not None:
            raw[label] = _inline(node)
            label = None
    header = build_header(raw)
    body = tree.body or tree.root
    blocks: list[Block] = []
    if body is not None:
        _mark_hidden_elements(body)
        _walk(body, blocks)
    return ParsedDocument(header=header, blocks=blocks, source_format="html")


def _walk(node: LexborNode, blocks: list[Block]) -> None:
    for child in node.iter(include_text=False):
        tag = child.tag
        if tag in _SKIP_TAGS or _SKIP_CLASS.search(child.attributes.get("class") or ""):
            continue
        if tag == "dl" and "document-control" in (child.attributes.get("class") or ""):
            continue
        if tag in _HEADINGS:
            text = _inline(child)
            if text:
                blocks.append(Heading(_HEADINGS[tag], text))
        elif tag == "table":
            table = _table(child)
            if table is not None:
                blocks.append(table)
        elif tag in ("ul", "ol"):
            blocks.append(Paragraph(_list(child, ordered=tag == "ol")))
        elif tag == "pre":
            blocks.append(Paragraph("```\n" + (child.text(deep=True) or "").strip("\n") + "\n```"))
        elif tag in _TEXT_BLOCKS or tag == "dl":
            text = _inline(child) if tag != "dl" else _definition_list(child)
            if text:
                blocks.append(Paragraph(text))
        elif _has_element_children(child):
            _walk(child, blocks)
        else:
            text = _inline(child)
            if text:
                blocks.append(Paragraph(text))


_INLINE_TAGS = {"span", "a", "em", "strong", "b", "i", "u", "small", "font", "code", "mark", "sup", "sub", "label"}


def _mark_hidden_elements(body: LexborNode) -> None:
    """Each element a reader would not see becomes its marked text (ingest.hidden), in place: inline as a
    span, otherwise as a paragraph of its own. Comments are already left out of an element's text. One query,
    outermost hidden elements only (the text of those inside is in their marker): a query per hidden element
    was quadratic."""
    hidden = [
        (node, reason)
        for node in body.css("[hidden], [aria-hidden], [style]")
        if (reason := hidden_by_attributes(node.attributes))
    ]
    hidden_ids = {node.mem_id for node, _ in hidden}
    for node, reason in hidden:
        if _has_ancestor_in(node, hidden_ids):
            continue
        marked = mark_hidden(reason, _inline(node))
        if not marked:
            node.decompose()
            continue
        tag = "span" if node.tag in _INLINE_TAGS else "p"
        replacement = LexborHTMLParser(f"<{tag}></{tag}>").css_first(tag)
        assert replacement is not None
        replacement.insert_child(marked)
        node.replace_with(replacement)


def _has_ancestor_in(node: LexborNode, ids: set[int]) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.mem_id in ids:
            return True
        parent = parent.parent
    return False


def _has_element_children(node: LexborNode) -> bool:
    return any(True for _ in node.iter(include_text=False))


def _inline(node: LexborNode) -> str:
    return normalise_space(re.sub(r"\s+", " ", node.text(deep=True, separator="") or ""))


def _list(node: LexborNode, ordered: bool, depth: int = 0) -> str:
    lines = []
    number = 0
    for item in node.iter(include_text=False):
        if item.tag != "li":
            continue
        number += 1
        nested = [child for child in item.iter(include_text=False) if child.tag in ("ul", "ol")]
        for child in nested:
            child.decompose()
        marker = f"{number}." if ordered else "-"
        lines.append("  " * depth + f"{marker} {_inline(item)}")
        lines.extend(_list(child, child.tag == "ol", depth + 1) for child in nested)
    return "\n".join(line for line in lines if line.strip())


def _definition_list(node: LexborNode) -> str:
    parts = []
    for child in node.iter(include_text=False):
        text = _inline(child)
        if child.tag == "dt":
            parts.append(f"**{text}**")
        elif child.tag == "dd":
            parts[-1:] = [f"{parts[-1]}: {text}" if parts else text]
    return "\n".join(parts)


def _table(node: LexborNode) -> Table | None:
    rows = []
    for row in node.css("tr"):
        cells = tuple(_inline(cell) for cell in row.iter(include_text=False) if cell.tag in ("th", "td"))
        if any(cells):
            rows.append(cells)
    return Table(tuple(rows)) if rows else None
