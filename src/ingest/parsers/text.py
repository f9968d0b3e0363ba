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
