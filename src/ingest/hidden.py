"""Text a human reader of the source would not see, recognised at parse time.

Such text is a favourite carrier for prompt injection: the reviewer of a document sees nothing, the model
that retrieves its chunk reads everything. Each carrier is either dropped or kept inside a visible marker,
never passed on silently:

| carrier | what happens |
|---|---|
| HTML elements hidden by `hidden`, `aria-hidden="true"` or inline style (display:none, | kept, marked |
| visibility:hidden, text under 3 px / 2 pt, opacity under 0.1, transparent text, text the colour of its | |
| background, white text on no background, `<font color="white">`, far off-screen, clipped, scaled to 0, | |
| a zero-height box with overflow hidden) | |
| HTML comments | dropped (not content) |
| raw HTML blocks in Markdown | read as HTML: hidden elements kept, marked; the rest kept (tables as tables) |
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
# An inline style is read declaration by declaration (comments and !important aside), so "/*x*/display:none"
# hides as "display:none" does. Found walking it: white on white, transparent text, 1px text, -999px, a
# zero-height box, scale(0) and opacity 0.01 all passed as visible text.
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_NUMBER = re.compile(r"^\s*(-?(?:\d+(?:\.\d*)?|\.\d+))\s*([a-z%]*)\s*$", re.I)
_OFF_SCREEN = ("left", "top", "right", "bottom", "text-indent", "margin-left", "margin-top")
# How far off-screen, or how small, text must be before no reader sees it, by unit.
_OFF_SCREEN_FROM = {"px": -500.0, "pt": -375.0, "em": -30.0, "rem": -30.0, "%": -100.0, "vw": -100.0, "vh": -100.0}
_TINY_BELOW = {"px": 3.0, "pt": 2.0, "em": 0.2, "rem": 0.2, "%": 20.0, "": 3.0}
_SCALED_AWAY = re.compile(r"scale[xy]?\(\s*0*(?:\.0\d*)?\s*[,)]", re.I)
_NAMED_COLOURS = {"white": (255, 255, 255, 1.0), "black": (0, 0, 0, 1.0), "transparent": (0, 0, 0, 0.0)}


def _declarations(style: str) -> dict[str, str]:
    """An inline style's declarations, property to value, lower case; the last of a property wins, as in CSS."""
    found: dict[str, str] = {}
    for declaration in _COMMENT.sub("", style).split(";"):
        name, colon, value = declaration.partition(":")
        if colon:
            found[name.strip().lower()] = value.replace("!important", "").strip().lower()
    return found


def _length(value: str) -> tuple[float, str] | None:
    match = _NUMBER.match(value)
    return (float(match.group(1)), match.group(2).lower()) if match else None


def _colour(value: str) -> tuple[int, int, int, float] | None:
    """(red, green, blue, alpha) of a CSS colour: a name this module knows, #rgb(a), #rrggbb(aa), rgb(a)()."""
    value = value.strip()
    if value in _NAMED_COLOURS:
        return _NAMED_COLOURS[value]
    if value.startswith("#") and len(value) in (4, 5, 7, 9):
        digits = value[1:]
        if len(digits) <= 4:
            digits = "".join(ch * 2 for ch in digits)
        try:
            parts = [int(digits[i : i + 2], 16) for i in range(0, len(digits), 2)]
        except ValueError:
            return None
        return parts[0], parts[1], parts[2], parts[3] / 255 if len(parts) == 4 else 1.0
    match = re.match(r"rgba?\(([^)]*)\)$", value)
    if match:
        numbers = [n for n in re.split(r"[\s,/]+", match.group(1).strip()) if n]
        try:
            rgb = [round(float(n.rstrip("%")) * (2.55 if n.endswith("%") else 1)) for n in numbers[:3]]
            alpha = (
                float(numbers[3].rstrip("%")) / (100 if numbers[3].endswith("%") else 1) if len(numbers) > 3 else 1.0
            )
        except ValueError:
            return None
        return (rgb[0], rgb[1], rgb[2], alpha) if len(rgb) == 3 else None
    return None


def _background_colour(style: dict[str, str]) -> tuple[int, int, int, float] | None:
    if "background-color" in style:
        return _colour(style["background-color"])
    background = style.get("background", "")
    return _colour(background.split()[0]) if background.split() else None


def hidden_by_style(style: str) -> str | None:
    """Why an inline CSS style hides its element's text, or None. White text counts only when the same style
    sets no background other than white (white on a dark banner is visible)."""
    css = _declarations(style)
    if css.get("display") == "none":
        return "display:none"
    if css.get("visibility") in ("hidden", "collapse"):
        return "visibility:hidden"
    for check in (_too_small, _see_through, _off_screen, _clipped):
        if reason := check(css):
            return reason
    return _hidden_by_colour(css.get("color"), css)


def _too_small(css: dict[str, str]) -> str | None:
    size = _length(css.get("font-size", ""))
    if size is None or size[1] not in _TINY_BELOW:
        return None
    if size[0] <= 0:
        return "font-size:0"
    return "tiny text" if size[0] < _TINY_BELOW[size[1]] else None


def _see_through(css: dict[str, str]) -> str | None:
    opacity = _length(css.get("opacity", ""))
    if opacity is None or opacity[1] not in ("", "%"):
        return None
    share = opacity[0] / (100 if opacity[1] == "%" else 1)
    return "opacity:0" if share <= 0 else "opacity under 0.1" if share < 0.1 else None


def _off_screen(css: dict[str, str]) -> str | None:
    for name in _OFF_SCREEN:
        offset = _length(css.get(name, ""))
        if offset is not None and offset[1] in _OFF_SCREEN_FROM and offset[0] <= _OFF_SCREEN_FROM[offset[1]]:
            return "off-screen"
    return None


def _clipped(css: dict[str, str]) -> str | None:
    clip_path = css.get("clip-path", "").replace(" ", "")
    if clip_path.startswith(("inset(50%", "inset(100%")) or css.get("clip", "").replace(" ", "").startswith("rect(0"):
        return "clipped"
    if _SCALED_AWAY.search(css.get("transform", "")):
        return "scaled to nothing"
    zero_box = any(
        (size := _length(css.get(name, ""))) is not None and size[0] <= 0
        for name in ("height", "max-height", "width", "max-width")
    )
    return "zero-size box" if zero_box and css.get("overflow") in ("hidden", "clip") else None


def _hidden_by_colour(color: str | None, css: dict[str, str]) -> str | None:
    """Why text of colour `color` on the element styled `css` is not seen: see-through, or the colour of the
    background the same style sets, or white where it sets none."""
    text = _colour(color) if color else None
    if text is None:
        return None
    if text[3] < 0.1:
        return "transparent text"
    background = _background_colour(css)
    if background is not None and background[3] >= 0.9 and _alike(text, background):
        return "text the colour of its background"
    if _alike(text, (255, 255, 255, 1.0)) and not any(name.startswith("background") for name in css):
        return "white text"
    return None


def _alike(a: tuple[int, int, int, float], b: tuple[int, int, int, float]) -> bool:
    """Two colours no reader tells apart (each channel within 8 of 255)."""
    return all(abs(x - y) <= 8 for x, y in zip(a[:3], b[:3], strict=True))


def hidden_by_attributes(attributes: dict[str, str | None], tag: str | None = None) -> str | None:
    """Why an HTML element is hidden from a reader by its attributes, or None. `<font color>` counts as a
    style's colour."""
    if "hidden" in attributes:
        return "hidden attribute"
    if (attributes.get("aria-hidden") or "").strip().lower() == "true":
        return "aria-hidden"
    style = attributes.get("style")
    if style and (reason := hidden_by_style(style)):
        return reason
    if tag == "font" and attributes.get("color"):
        return _hidden_by_colour((attributes["color"] or "").lower(), _declarations(style or ""))
    return None


_TAG = re.compile(r"<([a-z][\w-]{0,20})\b([^<>]{0,400})>", re.I)
_ATTRIBUTE = re.compile(r"""([a-z][\w:-]*)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s"'>]+))?""", re.I)


def hidden_inline_html(text: str) -> re.Match[str] | None:
    """The first raw HTML tag in `text` whose attributes hide what it holds (Markdown keeps inline HTML as
    written: a reader of the rendered page does not see it), judged as the HTML parser judges an element."""
    if "<" not in text:
        return None
    for match in _TAG.finditer(text):
        attributes = {
            name.lower(): value.strip("\"'") if value else None for name, value in _ATTRIBUTE.findall(match[2])
        }
        if hidden_by_attributes(attributes, match[1].lower()):
            return match
    return None


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
