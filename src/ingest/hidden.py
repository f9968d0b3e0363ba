"""Text a human reader of the source would not see, recognised at parse time.

Such text is a favourite carrier for prompt injection: the reviewer of a document sees nothing, the model
that retrieves its chunk reads everything. Each carrier is either dropped or kept inside a visible marker,
never passed on silently:

| carrier | what happens |
|---|---|
| HTML elements hidden by `hidden`, `aria-hidden="true"` or inline style (display:none, | kept, marked |
| visibility:hidden, font-size:0, opacity:0, white text on no background, far off-screen) | |
| HTML comments; raw HTML blocks in Markdown | dropped (not content) |
| raw hidden HTML inline in Markdown | kept as written; the scanner flags it |
| DOCX runs hidden (vanish, specVanish), white, or under 2 pt | kept, marked |
| PDF text in invisible render mode, white, or under 1.5 pt | kept, marked |
| PDF text outside the page | dropped (pymupdf clips to the page) |
| document metadata (PDF info, DOCX core properties) | never read |
| zero-width and bidi-control characters | dropped |
| Unicode tag characters (invisible ASCII) | decoded, kept, marked |

Marked text reads `[hidden text (<carrier>): …]`; the scanner's `hidden-text` rule flags every chunk that
holds one, so it reaches a model only with `injection_suspect` and a warning.
"""

from __future__ import annotations

import re

MARK_OPEN = "[hidden text ("


def mark_hidden(carrier: str, text: str) -> str:
    """Hidden text as a visible, flaggable marker; '' when there is no text to speak of."""
    text = " ".join(text.split())
    return f"{MARK_OPEN}{carrier}): {text}]" if text else ""


# --- HTML and CSS ---------------------------------------------------------------------------------------
_STYLE_HIDES = (
    (re.compile(r"(?:^|;)\s*display\s*:\s*none", re.I), "display:none"),
    (re.compile(r"(?:^|;)\s*visibility\s*:\s*(?:hidden|collapse)", re.I), "visibility:hidden"),
    (re.compile(r"(?:^|;)\s*font-size\s*:\s*0(?:\.0*)?(?:px|pt|em|rem|%)?\s*(?:;|$|!)", re.I), "font-size:0"),
    (re.compile(r"(?:^|;)\s*opacity\s*:\s*0(?:\.0*)?\s*(?:;|$|!)", re.I), "opacity:0"),
    (re.compile(r"(?:^|;)\s*(?:left|top|text-indent)\s*:\s*-\d{4,}", re.I), "off-screen"),
    (re.compile(r"(?:^|;)\s*(?:clip-path\s*:\s*inset\(\s*(?:50|100)%|clip\s*:\s*rect\(\s*0)", re.I), "clipped"),
)
_WHITE = re.compile(
    r"(?:^|;)\s*color\s*:\s*(?:white|#fff(?:fff)?|rgba?\(\s*255\s*,\s*255\s*,\s*255\s*(?:,\s*1(?:\.0*)?\s*)?\))\s*(?:;|$|!)",
    re.I,
)
_BACKGROUND = re.compile(r"(?:^|;)\s*background", re.I)


def hidden_by_style(style: str) -> str | None:
    """Why an inline CSS style hides its element's text, or None. White text counts only when the same style
    sets no background (white on a dark banner is visible)."""
    for pattern, reason in _STYLE_HIDES:
        if pattern.search(style):
            return reason
    if _WHITE.search(style) and not _BACKGROUND.search(style):
        return "white text"
    return None


def hidden_by_attributes(attributes: dict[str, str | None]) -> str | None:
    """Why an HTML element is hidden from a reader by its attributes, or None."""
    if "hidden" in attributes:
        return "hidden attribute"
    if (attributes.get("aria-hidden") or "").strip().lower() == "true":
        return "aria-hidden"
    style = attributes.get("style")
    return hidden_by_style(style) if style else None


# --- characters ---------------------------------------------------------------------------------------
# Zero-width characters, bidi embeddings/overrides/isolates, word joiners, invisible operators, BOM, soft
# hyphen, Mongolian vowel separator, combining grapheme joiner: none of them is seen, all can split words.
_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]")
_TAGS = re.compile("[\U000e0000-\U000e007f]+")  # Unicode tag characters: ASCII no font draws


def _decode_tags(match: re.Match[str]) -> str:
    decoded = "".join(chr(ord(ch) - 0xE0000) for ch in match.group() if 0xE0020 <= ord(ch) <= 0xE007E)
    marked = mark_hidden("unicode tag characters", decoded)
    return f" {marked} " if marked else ""


def has_invisible_characters(text: str) -> bool:
    """Whether reveal_invisible_characters would change `text`."""
    return not text.isascii() and (_INVISIBLE.search(text) is not None or _TAGS.search(text) is not None)


def reveal_invisible_characters(text: str) -> str:
    """Drop invisible formatting characters; decode invisible tag-character text into a hidden marker."""
    if text.isascii():
        return text
    return _INVISIBLE.sub("", _TAGS.sub(_decode_tags, text))
