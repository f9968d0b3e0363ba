"""Bytes to text for the text formats, with a clear error for what is not text."""

from __future__ import annotations

import json
import re

from ingest.document import EMPTY_FILE, HeaderError, ParseError
from ingest.header import repeated_header_field, twice

_BOMS = (  # longest first: the UTF-32 LE mark begins with the UTF-16 LE one
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)


def encoding_of(head: bytes) -> str | None:
    """The text encoding of a file from its first bytes: a byte-order mark, else the pattern of NUL bytes
    (UTF-16 text of Latin letters has a NUL in every other byte); None when it is not text at all."""
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding
    sample = head[:4096]
    if b"\x00" not in sample:
        return "utf-8-sig"
    for width, encoding, zero_at in (
        (4, "utf-32-le", (1, 2, 3)),
        (4, "utf-32-be", (0, 1, 2)),
        (2, "utf-16-le", (1,)),
        (2, "utf-16-be", (0,)),
    ):
        usable = len(sample) - len(sample) % width
        if usable < width:
            continue
        groups = usable // width
        zeros = sum(sample[i:usable:width].count(0) for i in zero_at)
        text_bytes = sum(sample[i:usable:width].count(0) for i in range(width) if i not in zero_at)
        if zeros >= 0.9 * groups * len(zero_at) and text_bytes <= 0.1 * groups * (width - len(zero_at)):
            return encoding
    return None


def decode_text(data: bytes) -> str:
    if not data.strip():
        raise ParseError(EMPTY_FILE)
    encoding = encoding_of(data[:4096])
    if encoding is None:
        raise ParseError("the file is binary data, not text: check its extension, or export it as text")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        if encoding == "utf-8-sig":
            raise ParseError(
                f"the file is not UTF-8 text (invalid byte at offset {exc.start}): save it as UTF-8"
            ) from None
        name = encoding.upper()[:6]
        raise ParseError(
            f"the file looks like {name} text but is not valid {name} (invalid bytes at offset {exc.start}): "
            "save it as UTF-8"
        ) from None
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise ParseError(EMPTY_FILE)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def load_json(text: str) -> object:
    """json.loads, refusing a header block (info.x-document-control) that gives a field twice or is given
    twice: json.loads keeps the last value silently. Only that block is read a second time, with the check
    (a hook on every object of a 20 MB spec cost a third more)."""
    value = json.loads(text)
    key = '"x-document-control"'
    at = text.find(key)
    if at == -1:
        return value
    if text.count(key) > 1:
        json.loads(text, object_pairs_hook=json_object)  # which object holds the two? the exact check
        return value
    block = re.compile(r"\s*:\s*").match(text, at + len(key))
    if block is not None and text.startswith("{", block.end()):
        json.JSONDecoder(object_pairs_hook=json_object).raw_decode(text, block.end())
    return value


def json_object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """json.loads' object_pairs_hook: like dict(pairs), but a header block giving a field twice is refused
    (json.loads would keep the last value silently)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        _refuse_repeated_header([key for key, _ in pairs])
    return value


def _refuse_repeated_header(keys: list[str]) -> None:
    if keys.count("x-document-control") > 1:
        raise HeaderError(
            "two header blocks: info.x-document-control is given twice; a document has one header and one "
            "classification, so delete one"
        )
    repeated = repeated_header_field(keys)
    if repeated is not None:
        raise twice(repeated)


MAX_YAML_NODES = 100_000


def load_yaml(text: str) -> object:
    """yaml.safe_load, refusing anchors and aliases that expand past MAX_YAML_NODES values or refer to
    themselves: a few hundred bytes of nested aliases ('billion laughs') would otherwise expand to
    billions of values as soon as anything renders them."""
    import yaml

    value = yaml.load(text, Loader=_loader())
    _expanded_size(value, {}, set())
    return value


def yaml_problem(exc: Exception, first_line: int = 1) -> str:
    """Where and what a YAML error is, for a person: 'at line 12, column 5: expected ',' or ']', but got '}''.
    `first_line`: the file's line number of the text's first line (front matter starts on line 2)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [exc.__class__.__name__])[0]
    where = f"at line {mark.line + first_line}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}"


def _loader() -> type:
    """SafeLoader, except that an impossible date (2026-13-45) stays text: the header check then names the
    field it is in, where PyYAML's ValueError ("month must be in 1..12") named nothing."""
    import yaml

    class DatesKeptWhenInvalid(yaml.SafeLoader):
        def construct_yaml_timestamp(self, node: yaml.ScalarNode) -> object:  # type: ignore[override]
            try:
                return super().construct_yaml_timestamp(node)
            except ValueError:
                return self.construct_scalar(node)

        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
            # PyYAML keeps the last of two equal keys: in a header block that hides a second classification.
            keys = [str(key.value) for key, _ in node.value if isinstance(key, yaml.ScalarNode)]
            if len(keys) != len(set(keys)):  # (keys equal once normalised: build_header sees both)
                _refuse_repeated_header(keys)
            return super().construct_mapping(node, deep=deep)

    DatesKeptWhenInvalid.add_constructor("tag:yaml.org,2002:timestamp", DatesKeptWhenInvalid.construct_yaml_timestamp)
    return DatesKeptWhenInvalid


def _expanded_size(value: object, sizes: dict[int, int], open_nodes: set[int]) -> int:
    if not isinstance(value, list | dict):
        return 1
    key = id(value)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise ParseError("the YAML refers to itself through an anchor and an alias (&name ... *name)")
    open_nodes.add(key)
    total = 1
    for child in value.values() if isinstance(value, dict) else value:
        total += _expanded_size(child, sizes, open_nodes)
        if total > MAX_YAML_NODES:
            raise ParseError(
                f"the YAML expands to more than {MAX_YAML_NODES:,} values through its anchors and aliases "
                "(&name ... *name): write the values out, or remove the aliases"
            )
    open_nodes.discard(key)
    sizes[key] = total
    return total
