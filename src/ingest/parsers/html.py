"""HTML: the header block is a <dl class="document-control">; the body is walked in document order.

Where the page marks its main content (<main>, role="main", itemprop="articleBody": Read the Docs, Sphinx
and most documentation themes do), only that is read. Page chrome (navigation, breadcrumbs, footers,
scripts) is skipped by tag, by ARIA role, and by class names matched as whole words: a class-name substring
match on "nav" once skipped the Read the Docs theme's main column ("wy-nav-content"). Text outside any block
element (a heading left unclosed before its paragraphs, text beside a <div>) is kept in order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from selectolax.lexbor import LexborHTMLParser, LexborNode

from ingest.document import Block, HeaderError, Heading, Paragraph, ParsedDocument, ParseError, Table, normalise_space
from ingest.header import FIELDS, build_header, field_key, twice
from ingest.hidden import hidden_by_attributes, hidden_by_style, mark_hidden
from ingest.parsers.budget import Deadline
from ingest.parsers.text import decode_text

_SKIP_TAGS = {"script", "style", "noscript", "template", "nav", "header", "footer", "form", "button", "svg"}
# A class is chrome when it is one of these words, or ends in one after a hyphen ("wiki-nav", "site-footer").
_CHROME_WORDS = {"nav", "navbar", "breadcrumb", "breadcrumbs", "footer", "menu", "toolbar", "skip-link", "topbar"}
_CHROME_CLASSES = {"sphinxsidebar", "wy-nav-side", "rst-versions", "related", "headerlink"}
_CHROME_ROLES = {"navigation", "banner", "contentinfo", "search"}
_MAIN = "main, [role=main], [itemprop=articleBody]"
_BLOCK_TAGS = {
    *("p", "div", "section", "article", "main", "aside", "header", "footer", "nav", "blockquote", "pre", "table"),
    *("ul", "ol", "dl", "li", "figure", "figcaption", "address", "details", "summary", "form", "fieldset", "hr"),
    *("h1", "h2", "h3", "h4", "h5", "h6"),
}
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_TEXT_BLOCKS = {"p", "pre", "blockquote", "figcaption", "address"}


def parse_html(data: bytes, deadline: Deadline | None = None) -> ParsedDocument:
    text = decode_text(data)
    refuse_deep_nesting(text)
    tree = LexborHTMLParser(text)
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
            if label in raw and raw[label] != _inline(node) and field_key(label) in FIELDS:
                raise twice(field_key(label))  # a dict would keep the last of the two values silently
            raw[label] = _inline(node)
            label = None
    header = build_header(raw)
    body = tree.body or tree.root
    blocks: list[Block] = []
    deadline = deadline or Deadline(float("inf"))
    if body is not None:
        _mark_hidden_elements(body, _stylesheet_hidden(tree))
        _separate_blocks(body)
        main = body.css_first(_MAIN)
        if main is not None:
            title = body.css_first("h1")  # themes often put the page's h1 above the main column
            if title is not None and not _inside(title, main):
                _visit(title, blocks, True, deadline)
        _walk(main or body, blocks, main is not None, deadline)
    return ParsedDocument(header=header, blocks=blocks, source_format="html")


def html_fragment_blocks(html: str, deadline: Deadline | None = None) -> list[Block]:
    """The blocks of a fragment of HTML (a raw HTML block in Markdown), read as a page's body is: hidden
    elements marked, comments and page chrome dropped, tables kept as tables. Found walking it: a visible
    <table> or <div> in Markdown, which any Markdown viewer shows, was dropped without a word."""
    tree = LexborHTMLParser(f"<html><body>{html}</body></html>")
    body = tree.body
    blocks: list[Block] = []
    if body is None or not html.strip():
        return blocks
    _mark_hidden_elements(body, _stylesheet_hidden(tree))
    _separate_blocks(body)
    _walk(body, blocks, False, deadline or Deadline(float("inf")))
    return blocks


_SEPARATED = ", ".join(sorted((_BLOCK_TAGS - {"table"}) | {"tr", "td", "th", "dt", "dd"}))


def _separate_blocks(body: LexborNode) -> None:
    """A line break after each <br> and a space after each block element: an element's text is read with
    no separator (so '<b>un</b>believable' stays one word), and '<td><p>a</p><p>b</p></td>' or 'line<br>next'
    would otherwise run two words together."""
    for node in body.css("br"):
        node.insert_after("\n")
    for node in body.css(_SEPARATED):
        node.insert_after(" ")


def _is_chrome(node: LexborNode, main_found: bool) -> bool:
    if node.tag in _SKIP_TAGS:
        return True
    attributes = node.attributes
    if (attributes.get("role") or "").lower() in _CHROME_ROLES:
        return True
    for token in (attributes.get("class") or "").lower().split():
        if token in _CHROME_CLASSES or token in _CHROME_WORDS or token.rsplit("-", 1)[-1] in _CHROME_WORDS:
            return True
        if token == "sidebar" and not main_found:  # in a main column, a sidebar is a boxed note of the text
            return True
    return False


def _walk(node: LexborNode, blocks: list[Block], main_found: bool, deadline: Deadline) -> None:
    _walk_nodes(node.iter(include_text=True), blocks, main_found, deadline)


def _walk_nodes(nodes: Iterable[LexborNode], blocks: list[Block], main_found: bool, deadline: Deadline) -> None:
    """Block elements in order; runs of text and inline elements between them become paragraphs."""
    run: list[str] = []

    def flush() -> None:
        joined = "".join(run)
        run.clear()
        if joined.strip():  # most runs are the whitespace between two blocks
            blocks.append(Paragraph(normalise_space(re.sub(r"\s+", " ", joined))))

    for child in nodes:
        if child.is_text_node:
            run.append(child.text_content or "")
        elif child.is_comment_node or _is_chrome(child, main_found):
            continue
        elif child.tag in _BLOCK_TAGS or child.tag in ("table", "dl"):
            flush()
            _visit(child, blocks, main_found, deadline)
        else:
            run.append(child.text(deep=True, separator="") or "")
    flush()


def _visit(child: LexborNode, blocks: list[Block], main_found: bool, deadline: Deadline) -> None:
    # One check per block element; the first follows the page's parsing and the hidden-text marking.
    deadline.check("HTML", f"block {len(blocks) + 1} (<{child.tag}>)")
    tag = child.tag
    if tag == "dl" and "document-control" in (child.attributes.get("class") or ""):
        return
    if tag in _HEADINGS:
        # A heading left unclosed swallows the blocks after it (the parser nests them inside): the heading
        # is its text up to the first block element, the rest is read as what follows it.
        children = list(child.iter(include_text=True))
        first_block = next((i for i, c in enumerate(children) if c.tag in _BLOCK_TAGS), len(children))
        text = normalise_space(
            re.sub(r"\s+", " ", "".join(_node_text(c) for c in children[:first_block] if not c.is_comment_node))
        )
        if text:
            blocks.append(Heading(_HEADINGS[tag], text))
        _walk_nodes(children[first_block:], blocks, main_found, deadline)
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
    else:
        _walk(child, blocks, main_found, deadline)


def _node_text(node: LexborNode) -> str:
    return (node.text_content or "") if node.is_text_node else (node.text(deep=True, separator="") or "")


def _cell_text(cell: LexborNode) -> str:
    """A cell's text; a table nested in it is read row by row ('a | b; c | d'), not run together."""
    if cell.css_first("table") is None:
        return _inline(cell)
    parts = []
    for child in cell.iter(include_text=True):
        if child.tag == "table":
            nested = _table(child)
            parts.append("; ".join(" | ".join(row) for row in nested.rows) if nested else "")
        else:
            parts.append(_node_text(child))
    return normalise_space(re.sub(r"\s+", " ", " ".join(parts)))


def _closest_table(node: LexborNode) -> int | None:
    parent = node.parent
    while parent is not None and parent.tag != "table":
        parent = parent.parent
    return parent.mem_id if parent is not None else None


def _inside(node: LexborNode, ancestor: LexborNode) -> bool:
    return _has_ancestor_in(node, {ancestor.mem_id})


_INLINE_TAGS = {"span", "a", "em", "strong", "b", "i", "u", "small", "font", "code", "mark", "sup", "sub", "label"}


_CSS_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
MAX_HIDING_RULES = 200


def _stylesheet_hidden(tree: LexborHTMLParser) -> list[tuple[LexborNode, str]]:
    """Elements hidden by a rule of the page's own <style> sheets (`.note { display: none }`): a reader sees
    them no more than an inline display:none. Simple selectors only; pseudo-classes (:hover) never hide
    for good and are ignored, as are at-rule bodies' nesting (print-only rules hide on paper, not on screen)."""
    css = "\n".join(style.text(deep=True) or "" for style in tree.css("style"))
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    css = re.sub(r"@media[^{]*\{(?:[^{}]*\{[^{}]*\})*[^{}]*\}", "", css)  # @media print { ... } and the like
    found: list[tuple[LexborNode, str]] = []
    rules = 0
    for selectors, declarations in _CSS_RULE.findall(css):
        reason = hidden_by_style(declarations.strip())
        if reason is None:
            continue
        rules += 1
        if rules > MAX_HIDING_RULES:
            break
        for selector in selectors.split(","):
            selector = selector.strip()
            if not selector or ":" in selector or selector.startswith("@"):
                continue
            try:
                found += [(node, f"{reason} by a stylesheet") for node in tree.css(selector)]
            except (ValueError, SyntaxError):
                continue  # a selector the CSS engine does not read
    return found


def _mark_hidden_elements(body: LexborNode, styled: list[tuple[LexborNode, str]]) -> None:
    """Each element a reader would not see becomes its marked text (ingest.hidden), in place: inline as a
    span, otherwise as a paragraph of its own. Comments are already left out of an element's text. One query,
    outermost hidden elements only (the text of those inside is in their marker): a query per hidden element
    was quadratic."""
    hidden = [
        (node, reason)
        for node in body.css("[hidden], [aria-hidden], [style], font[color]")
        if (reason := hidden_by_attributes(node.attributes, node.tag))
    ]
    hidden += styled
    hidden_ids = {node.mem_id for node, _ in hidden}
    done: set[int] = set()
    for node, reason in hidden:
        if node.mem_id in done or _has_ancestor_in(node, hidden_ids):
            continue
        done.add(node.mem_id)
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
        if _closest_table(row) != node.mem_id:
            continue  # a row of a table nested in a cell: its text is already in that cell
        cells = tuple(_cell_text(cell) for cell in row.iter(include_text=False) if cell.tag in ("th", "td"))
        if any(cells):
            rows.append(cells)
    return Table(tuple(rows)) if rows else None


# lexbor builds the tree in time quadratic in how deep elements nest (each new element looks through the
# open ones): 20,000 nested <div> take 0.45 s, 40,000 take 1.7 s, 500,000 (2.5 MB) over a minute. No page
# nests ten thousand deep (this parser's own walk stops at a few hundred nested blocks anyway), so a page
# that does is refused before the tree is built, naming its line, instead of running to the time limit.
MAX_DEPTH = 10_000
_TAG = re.compile(r"<!--.*?(?:-->|$)|<(/?)([a-zA-Z][^\s/>]*)[^>]*?(/?)>", re.S)
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# Closed without an end tag by the next one of their kind or their parent's end: not counted as nesting.
_IMPLIED_END = {"p", "li", "dt", "dd", "tr", "td", "th", "option", "optgroup", "thead", "tbody", "tfoot", "rb", "rt"}
_RAW_TEXT = {"script", "style", "textarea", "title", "xmp", "noscript", "iframe", "noembed", "noframes"}
_RAW_TEXT_END = {name: re.compile(f"</{name}", re.I) for name in _RAW_TEXT}
_PEEK = 9  # bytes read after "<": "/" and 8 of the name, enough for every name below and the byte after it
_NOT_NESTING = _VOID | _IMPLIED_END
_NOT_NESTING_KEYS = [int.from_bytes(t.encode().ljust(8, b"\0"), "little") for t in _NOT_NESTING]
_NAME_BYTES = b"abcdefghijklmnopqrstuvwxyz0123456789-:"  # bytes that continue a tag name, once lower-cased


def _most_unclosed(text: str) -> int:
    """The most start tags not yet followed by as many end tags, over the text's prefixes, leaving out the
    void elements and those whose end is implied (as the exact count does): in numpy over the 8 bytes after
    each "<", ~0.5 s for a page of a million tags. Every level of nesting needs a start tag that no end tag
    has closed yet, so this bounds the depth, and the pages below MAX_DEPTH (all real ones) skip the exact
    count (~1 s for such a page). An end tag counts only while a start tag of its name is unclosed, so end tags
    that close nothing cannot hide depth from it."""
    if text.count("<") < MAX_DEPTH:  # every level needs a start tag
        return 0
    import numpy as np  # here: the parse server then holds numpy only after a page this large

    raw = np.frombuffer(text.encode("utf-8", "surrogatepass") + bytes(_PEEK), dtype=np.uint8)
    at = np.flatnonzero(raw[:-_PEEK] == ord("<"))
    after = np.lib.stride_tricks.sliding_window_view(raw, _PEEK)[at + 1] | 0x20  # letters lower-cased
    closing = after[:, 0] == ord("/")
    name = np.where(closing[:, None], after[:, 1:], after[:, :-1])  # 8 bytes from the name's start
    is_letter = (name[:, 0] >= ord("a")) & (name[:, 0] <= ord("z"))
    name_byte = np.zeros(256, dtype=bool)
    name_byte[np.frombuffer(_NAME_BYTES, dtype=np.uint8)] = True
    length = np.argmin(name_byte[name], axis=1)  # up to the first byte that is not a name's (8: longer)
    packed = np.where(np.arange(8) < length[:, None], name, 0).view("<u8").ravel()
    counted = is_letter & ~np.isin(packed, np.array(_NOT_NESTING_KEYS, dtype=np.uint64))
    steps = np.where(closing[counted], -1, 1)
    # An end tag lowers the count only while a start tag of its own name is unclosed: one that closes nothing
    # is ignored by a tree builder, and so must not hide depth (a <div></span> repeated nests every <div>).
    # Per name, in the text's order, the count held at zero is the running sum less its lowest point so far.
    keys = packed[counted]
    order = np.argsort(keys, kind="stable")  # by name, each name's tags in the text's order
    keys, steps = keys[order], steps[order]
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])  # where each name's tags start
    name = np.cumsum(np.r_[False, keys[1:] != keys[:-1]])  # 0, 1, …: the names numbered
    running = np.cumsum(steps)
    own = running - (running - steps)[first][name]  # each name's sum from its own first tag
    apart = len(steps) + 1  # each name's lows set below every earlier name's, so one accumulate keeps them apart
    low = np.minimum.accumulate(np.minimum(own, 0) - name * apart) + name * apart
    held = own - low
    change = held - np.r_[0, held[:-1]]
    change[first] = held[first]
    applied = np.empty_like(change)
    applied[order] = change
    return int(np.cumsum(applied).max(initial=0))


def refuse_deep_nesting(text: str) -> None:
    """Raise when elements nest MAX_DEPTH deep. The depth is that of the open elements as a tree builder
    keeps them: an end tag closes every element opened since its own start tag; void and self-closed
    elements, and those whose end tag is implied, do not count. Linear in the text."""
    if _most_unclosed(text) < MAX_DEPTH:
        return
    open_tags: list[str] = []
    open_count: dict[str, int] = {}
    position = 0
    while (tag := _TAG.search(text, position)) is not None:
        position = tag.end()
        closing, name, self_closed = tag.group(1, 2, 3)
        if name is None:  # a comment
            continue
        name = name.lower()
        if closing:
            if open_count.get(name):
                while (last := open_tags.pop()) != name:
                    open_count[last] -= 1
                open_count[name] -= 1
            continue
        if name in _RAW_TEXT:  # its content is text, whatever tags it seems to hold
            end = _RAW_TEXT_END[name].search(text, position)
            position = len(text) if end is None else end.start()
            continue
        if self_closed or name in _NOT_NESTING:
            continue
        open_tags.append(name)
        open_count[name] = open_count.get(name, 0) + 1
        if len(open_tags) >= MAX_DEPTH:
            line = text.count("\n", 0, tag.start()) + 1
            raise ParseError(
                f"line {line} of the HTML nests elements {MAX_DEPTH:,} or more deep, past what the HTML parser reads "
                "in time: flatten it"
            )
