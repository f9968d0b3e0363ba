"""Identifiers a question names: document codes, error and alert codes, API paths, operationIds, HTTP headers
and field names. Search looks each one up as an exact token sequence (phraseto_tsquery of the identifier,
which the text parser splits exactly as it split the document), and a chunk holding one (or of the document
a code names) is ranked above the chunks that only share the question's words: a user who types `SCR-E210`
wants the chunk that says SCR-E210, not the ones that say "screening" most often."""

from __future__ import annotations

import re

# Each alternative is one kind; all are anchored on word boundaries so a plain word never matches.
_KINDS = {
    # Codes in any case: found walking it, "cmp-sop-004" and "scr-e210" were not recognised (the tools that
    # take a doc code accept any case), and the named document did not come back at all.
    "document code": r"\b(?i:[A-Z]{3}-[A-Z]{3}-\d{3,6})\b",
    "error code": r"\b(?i:[A-Z][A-Z0-9]{1,9}-[A-Z]?\d{2,5})\b",
    "API path": r"(?<![\w/])/(?:[A-Za-z0-9_.{}-]+/?)*[A-Za-z{][A-Za-z0-9_.{}-]*",
    "operationId": r"\b[a-z]+(?:[A-Z][a-z0-9]+)+\b",
    "alert or type name": r"\b[A-Z][A-Za-z0-9]*[a-z][A-Z][A-Za-z0-9]*\b",
    "header": r"\b(?:X-[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*|[A-Z][a-z]+(?:-[A-Z][a-z]+)+)\b",
    "field name": r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b",
}
_PATTERN = re.compile("|".join(f"(?:{p})" for p in _KINDS.values()))
_DOCUMENT_CODE = re.compile(_KINDS["document code"])
_CODE = re.compile(f"{_KINDS['document code']}|{_KINDS['error code']}")
MAX_IDENTIFIERS = 8  # a pasted log line should not become a hundred lookups


def identifiers_in(question: str) -> list[str]:
    """The identifiers `question` names, in order, each once; codes in upper case, as documents write them."""
    found = dict.fromkeys(_as_written(m.group(0).rstrip("/.")) for m in _PATTERN.finditer(question))
    return [i for i in found if i][:MAX_IDENTIFIERS]


def document_codes_in(question: str) -> list[str]:
    """The document codes `question` names, in order, each once, in upper case."""
    return list(dict.fromkeys(code.upper() for code in _DOCUMENT_CODE.findall(question)))


def _as_written(identifier: str) -> str:
    return identifier.upper() if _CODE.fullmatch(identifier) else identifier
