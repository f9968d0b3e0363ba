"""Does a quote appear in a cited section? (verify_quote)

A quote matches when it appears in the section once both are normalized: case, runs of whitespace
(including line breaks inside a wrapped paragraph), typographic quotes, dashes, ellipses and the Markdown
emphasis marks the stored text keeps (`**every 12 months**`) are ignored; every word, number and other
punctuation mark must be the same. Otherwise the closest stretch of the section is found with rapidfuzz's
partial alignment (or the one or two sentences that score higher), and returned with a score (0–1): the lower
of its character similarity to the quote and the share of the quote's words found in it, so a quote with one
altered number shows the real passage next to a high but not perfect score. The words matter because
character similarity alone rewards any short text: "the moon is made of cheese" found a stretch of a policy
half alike letter by letter (0.54), above three words of the section's own heading (0.46).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from rapidfuzz import fuzz

_TYPOGRAPHIC = {
    **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032\u0060\u00b4", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb", '"'),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d", "-"),
    "\u2026": "...",
}
# Markdown emphasis (`**bold**`, `_italic_`); not part of what the text says. An underscore inside a name
# (max_bytes) is dropped on both sides alike, so the name still matches itself.
_MARKUP = frozenset("*_")
_LIST_MARKER = re.compile(r"(?m)^[ \t]*([-+]|\d{1,3}[.)])(?= )")  # a list item's marker at the start of its line
_BULLETS = frozenset("\u2022\u25e6\u25aa\u25ab\u2023\u2043\u2219\u25cf\u25cb\u25a0\u25a1")  # • ◦ ▪ ▫ ‣ ⁃ ∙ ● ○ ■ □
# A sentence (or list item) ends at . ! ? or ; before a space, but not after a digit ("1." of a numbered item).
_SENTENCE_END = re.compile(r"(?<![0-9])[.!?;](?=\s|$)")
_TRIM = " \t\r\n\"'.,;:"
_WORD = re.compile(r"\w+(?:[.,]\w+)*")  # "$10,000" and "3.1" are one word each: one altered number, one miss
# Words any English passage has: a quote is not "half found" for sharing them.
_FUNCTION_WORDS_TEXT = (
    "a an and are as at be been but by for from has have in is it its of on or that the their this to was were "
    "will with"
)
_FUNCTION_WORDS = frozenset(_FUNCTION_WORDS_TEXT.split())


@dataclass(frozen=True)
class Normalized:
    """A normalized text, and for each of its characters the index of the original character it came from."""

    text: str
    origin: tuple[int, ...]


def normalize(text: str) -> Normalized:
    chars: list[str] = []
    origin: list[int] = []
    # A list's marker, however drawn: found walking it, a list copied from the PDF ("• involves funds") was not
    # found in the stored "- involves funds", nor a numbered list ("1. ...") copied as a client renders it.
    markers = {i for m in _LIST_MARKER.finditer(text) for i in range(m.start(1), m.end(1))}
    for index, ch in enumerate(text):
        if ch in _MARKUP or ch in _BULLETS or index in markers:
            continue
        mapped = unicodedata.normalize("NFKC", _TYPOGRAPHIC.get(ch, ch)).casefold()
        for out in mapped:
            if out.isspace():
                if not chars or chars[-1] == " ":
                    continue
                out = " "
            chars.append(out)
            origin.append(index)
    while chars and chars[-1] == " ":
        chars.pop()
        origin.pop()
    return Normalized("".join(chars), tuple(origin))


def normalized_quote(quote: str) -> str:
    """The quote as compared: normalized, without the quotation marks and end punctuation around it."""
    return normalize(quote).text.strip(_TRIM)


@dataclass(frozen=True)
class QuoteMatch:
    found: bool
    score: float  # 1.0 when found; otherwise the similarity of the closest stretch, 0–1
    section: int  # index of the section holding the passage
    passage: str  # the matching text as stored, or the sentence(s) around the closest stretch
    # Not found: where the quote and the closest passage part, word by word (see differences()).
    differences: tuple[Difference, ...] = field(default=())


@dataclass(frozen=True)
class Difference:
    """Words of the quote the closest passage has otherwise: `quote` None where the passage has words the quote
    left out, `passage` None where the quote has words the passage does not."""

    quote: str | None
    passage: str | None


# At most this many differences are listed: past it the passage is not the quote altered, but another text.
MAX_DIFFERENCES = 10
_TOKEN = re.compile(r"\w+(?:[.,]\w+)*|[^\w\s]")


def differences(quote: str, passage: str) -> tuple[Difference, ...]:
    """Where the normalized quote and passage differ, word by word, within the stretch of the passage the quote
    covers (the passage's sentences around it are context, not differences). Empty when fewer than half of
    the quote's words line up with the passage in order, or the differences are more than MAX_DIFFERENCES: a
    score of 0.95 says "nearly", this says which number was altered."""
    said, stored = _TOKEN.findall(normalized_quote(quote)), _TOKEN.findall(normalize(passage).text)
    matcher = SequenceMatcher(None, said, stored, autojunk=False)
    if sum(block.size for block in matcher.get_matching_blocks()) * 2 < len(said):
        return ()
    opcodes = matcher.get_opcodes()
    # Passage words before the quote's first word and after its last are the sentence around it.
    while opcodes and opcodes[0][0] == "insert":
        opcodes.pop(0)
    while opcodes and opcodes[-1][0] == "insert":
        opcodes.pop()
    found = tuple(
        Difference(" ".join(said[i1:i2]) or None, " ".join(stored[j1:j2]) or None)
        for tag, i1, i2, j1, j2 in opcodes
        if tag != "equal"
    )
    return found if len(found) <= MAX_DIFFERENCES else ()


def check_quote(quote: str, sections: Sequence[str]) -> QuoteMatch | None:
    """Where `quote` appears among `sections` (texts), or the closest passage; None when there is no text."""
    wanted = normalized_quote(quote)
    rows = _table_rows(quote)
    best: QuoteMatch | None = None
    for number, content in enumerate(sections):
        text = normalize(content)
        if not text.text:
            continue
        at = find_whole(text.text, wanted)
        if at >= 0:
            return QuoteMatch(True, 1.0, number, _original(content, text, at, at + len(wanted)))
        found_rows = [(i, i + len(row)) for row in rows if (i := find_whole(text.text, row)) >= 0]
        if rows and len(found_rows) == len(rows):
            passage = "\n".join(_original(content, text, start, end) for start, end in found_rows)
            return QuoteMatch(True, 1.0, number, passage)
        if (rendered := _in_rendered_tables(quote, content)) is not None:
            return QuoteMatch(True, 1.0, number, rendered)
        closest = _closest_passage(wanted, text.text)
        if closest is None:
            continue
        score, start, end = closest
        if best is None or score > best.score:
            best = QuoteMatch(False, score, number, _original(content, text, start, end))
    if best is not None and not best.found:
        best = QuoteMatch(False, best.score, best.section, best.passage, differences(quote, best.passage))
    return best


def _table_rows(quote: str) -> list[str]:
    """A table excerpt's rows (normalized; the |---| line aside) when every line of the quote is a table row:
    search serves a big table's header row with a few of its rows (a row group), and those rows need not be
    next to the header in the section. Each row is a record of its own, so each is looked for alone. Empty for
    any other quote: the lines of a paragraph are not checked apart."""
    lines = [line.strip() for line in quote.strip().splitlines() if line.strip()]
    if len(lines) < 2 or not all(line.startswith("|") and line.endswith("|") for line in lines):
        return []
    return [normalize(line).text for line in lines if not re.fullmatch(r"[|:\-\s]+", line)]


def find_whole(text: str, wanted: str, start: int = 0) -> int:
    """Where `wanted` first stands in `text` as whole words and whole numbers, or -1. Found walking it: "500 or
    more in cash-equivalent activity" was found in "$7,500 or more …", and "0 business days" in "10 business
    days": a quote that drops the start of a number is not the text."""
    at = text.find(wanted, start)
    while at >= 0:
        if wanted and not _cuts(text, at, wanted[0], -1) and not _cuts(text, at + len(wanted) - 1, wanted[-1], 1):
            return at
        at = text.find(wanted, at + 1)
    return -1


def _cuts(text: str, edge: int, ch: str, step: int) -> bool:
    """Whether the quote's first (step -1) or last (step 1) character, at `edge`, continues a word or number."""
    beside = edge + step
    if not ch.isalnum() or not 0 <= beside < len(text):
        return False
    nxt = text[beside]
    if nxt.isalnum():
        return True
    # 7,500 and 3.5: a separator between digits is inside the number
    further = beside + step
    return ch.isdigit() and nxt in ".," and 0 <= further < len(text) and text[further].isdigit()


def _in_rendered_tables(quote: str, content: str) -> str | None:
    """The stored rows a quote copied from a table as a client shows it holds: cells apart by spaces or tabs,
    no pipes and no |---| line (a chat client renders search's Markdown table). Either the quote runs on within
    the section with its tables' pipes read as spaces, or each line of it is one whole row of them (a header
    row and a row further down, as a row group is served). None when neither, or the section has no table."""
    cells = _cells_view(content)
    if cells == content:
        return None
    view = normalize(cells)
    wanted = normalized_quote(quote.replace("|", " "))
    at = find_whole(view.text, wanted) if wanted else -1
    while at >= 0:
        if not _joins_rows(content, view.origin[at], view.origin[at + len(wanted) - 1]):
            return _original(content, view, at, at + len(wanted))
        # Found walking it: the last cell of one row run on into the next ("Business need Customer call
        # recordings ... 2 years") was certified, a sentence no row says. Rows are quoted a line each.
        at = find_whole(view.text, wanted, at + 1)
    return _rows_quoted(quote, cells, content)


def _joins_rows(content: str, first: int, last: int) -> bool:
    """Whether content[first..last] runs from one line into another and one of them is a table row."""
    if "\n" not in content[first : last + 1]:
        return False
    start = content.rfind("\n", 0, first) + 1
    end = content.find("\n", last)
    lines = content[start : end if end >= 0 else len(content)].split("\n")
    return any(line.lstrip().startswith("|") for line in lines)


def _rows_quoted(quote: str, cells: str, content: str) -> str | None:
    """Each line of the quote one whole row of the section's tables (a header row and rows further down)."""
    lines = [normalize(line.replace("|", " ")).text for line in quote.splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    rows = {
        normalize(row).text: original
        for row, original in zip(cells.splitlines(), content.splitlines(), strict=True)
        if original.lstrip().startswith("|") and row.strip()
    }
    if all(line in rows for line in lines):
        return "\n".join(rows[line].strip() for line in lines)
    return None


def _cells_view(content: str) -> str:
    """`content` with its tables' pipes as spaces and their |---| lines blank, character for character (so a
    position in it is the same position in `content`)."""
    lines = []
    for line in content.split("\n"):
        if line.lstrip().startswith("|"):
            line = " " * len(line) if re.fullmatch(r"[|:\-\s]+", line) else line.replace("\\|", " |").replace("|", " ")
        lines.append(line)
    return "\n".join(lines)


def _closest_passage(wanted: str, text: str) -> tuple[float, int, int] | None:
    """(score, start, end) of the passage of `text` closest to `wanted`: the sentence(s) around the best
    character alignment, or one or two sentences of the text, whichever scores higher. The alignment alone
    picked, for a paraphrase, whatever stretch was most alike letter by letter (the 60-day sentence for a quote
    about 30 days), where the sentence holding the quote's words is the one to show."""
    candidates: list[tuple[int, int]] = []
    alignment = fuzz.partial_ratio_alignment(wanted, text)
    if alignment is not None:
        candidates.append(_sentences_around(text, alignment.dest_start, alignment.dest_end))
    spans = _sentence_spans(text)
    candidates += [(spans[i][0], spans[j][1]) for i in range(len(spans)) for j in range(i, min(i + 2, len(spans)))]
    scored = []
    for start, end in candidates:
        passage = text[start:end]
        alike = fuzz.partial_ratio(wanted, passage) / 100
        # Ties go to the passage more alike letter by letter, then to the shorter one.
        scored.append((round(min(alike, words_found(wanted, passage)), 3), alike, start - end, start, end))
    if not scored:
        return None
    score, _, _, start, end = max(scored)
    return score, start, end


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    spans, begin = [], 0
    for end in [m.end() for m in _SENTENCE_END.finditer(text)] + [len(text)]:
        while begin < end and text[begin] == " ":
            begin += 1
        if begin < end:
            spans.append((begin, end))
        begin = end
    return spans


def words_found(quote: str, passage: str) -> float:
    """The share of the quote's words (its function words aside, unless it has nothing else) in the passage."""
    words = _WORD.findall(quote)
    telling = [w for w in words if w not in _FUNCTION_WORDS] or words
    if not telling:
        return 1.0  # punctuation alone: the character similarity decides
    present = set(_WORD.findall(passage))
    return sum(w in present for w in telling) / len(telling)


def _sentences_around(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen [start, end) to the sentence(s) it touches."""
    before = [m.end() for m in _SENTENCE_END.finditer(text, 0, max(start, 0))]
    begin = before[-1] if before else 0
    after = _SENTENCE_END.search(text, max(end - 1, begin))
    finish = after.end() if after else len(text)
    return begin, finish


def _original(content: str, text: Normalized, start: int, end: int) -> str:
    """The stored text that normalized characters [start, end) came from."""
    if end <= start:
        return ""
    first, last = text.origin[start], text.origin[end - 1] + 1
    while first > 0 and content[first - 1] in _MARKUP:  # keep emphasis marks whole: **like this**
        first -= 1
    while last < len(content) and content[last] in _MARKUP:
        last += 1
    return content[first:last].strip()
