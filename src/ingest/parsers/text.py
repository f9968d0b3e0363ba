"""Bytes to text for the text formats, with a clear error for what is not text."""

from __future__ import annotations

from ingest.document import ParseError


def decode_text(data: bytes) -> str:
    if not data.strip():
        raise ParseError("the file is empty")
    if b"\x00" in data[:4096]:
        raise ParseError("the file is binary, not text: check its extension")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParseError(f"the file is not UTF-8 text (invalid byte at offset {exc.start}): save it as UTF-8") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


MAX_YAML_NODES = 100_000


def load_yaml(text: str) -> object:
    """yaml.safe_load, refusing anchors and aliases that expand past MAX_YAML_NODES values or refer to
    themselves: a few hundred bytes of nested aliases ('billion laughs') would otherwise expand to
    billions of values as soon as anything renders them."""
    import yaml

    value = yaml.load(text, Loader=_loader())
    _expanded_size(value, {}, set())
    return value


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
