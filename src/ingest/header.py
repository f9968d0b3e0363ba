"""Validate a header block's raw fields (from any format) into a Header, naming any bad field."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime

from ingest.document import Header, HeaderError
from kb_core.departments import DEPARTMENTS, DOC_CODE
from kb_core.roles import Classification

FIELDS = (
    "doc_code",
    "title",
    "version",
    "status",
    "effective_date",
    "owner",
    "department",
    "classification",
    "regulatory_refs",
)
LABELS = {name: name.replace("_", " ").capitalize() for name in FIELDS}  # 'Doc code', 'Effective date', ...
STATUSES = ("effective", "superseded", "draft")
VERSION = re.compile(r"^\d+(\.\d+){0,3}$")
SEE = "see docs/header-block.md"


def field_key(label: str) -> str:
    """'Doc code', 'doc-code', 'DOC_CODE' -> 'doc_code'."""
    return re.sub(r"[\s\-]+", "_", label.strip().lower())


def twice(name: str) -> HeaderError:
    """A field given two values (two header blocks, or one field twice): whichever was taken, the document
    could be filed under the wrong classification, owner or date."""
    return _fail(name, "is given twice, with two values: a document has one header; keep the right value")


def two_header_blocks(first: str, second: str) -> HeaderError:
    """A second header block in a DOCX or PDF: taking either one could file the document under the wrong
    classification, so neither is taken."""
    return HeaderError(
        f"two header blocks: {first} and {second} both hold header fields (doc code, classification, ...); "
        "a document has one header and one classification, so keep the one that is right and delete the other"
    )


def repeated_header_field(keys: list[str]) -> str | None:
    """The header field a mapping repeats (its keys as written), when the mapping is a header block (holds at
    least three header fields); else None. Parsers that keep only the last of two equal keys call this first."""
    names = [field_key(key) for key in keys]
    if len(set(names) & set(FIELDS)) < 3:
        return None
    seen: set[str] = set()
    for name in names:
        if name in seen and name in FIELDS:
            return name
        seen.add(name)
    return None


def _fail(name: str, problem: str) -> HeaderError:
    return HeaderError(f"header block: {LABELS[name]} ({name}) {problem}; {SEE}")


def _text(raw: Mapping[str, object], name: str, max_length: int = 300) -> str:
    value = raw.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise _fail(name, "is missing")
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise _fail(name, f"must be text, not {type(value).__name__}")
    text = re.sub(r"\s+", " ", str(value)).strip()
    if len(text) > max_length:
        raise _fail(name, f"is longer than {max_length} characters")
    return text


def build_header(raw: Mapping[str, object]) -> Header:
    normalised: dict[str, object] = {}
    for key, value in raw.items():
        name = field_key(str(key))
        if name in FIELDS and name in normalised and normalised[name] != value:
            raise twice(name)
        normalised[name] = value
    raw = normalised

    department = _text(raw, "department").lower()
    if department not in DEPARTMENTS:
        raise _fail("department", f"is {department!r}; it must be one of {', '.join(DEPARTMENTS)}")

    doc_code = _text(raw, "doc_code").upper()
    match = DOC_CODE.match(doc_code)
    if not match:
        raise _fail("doc_code", f"is {doc_code!r}; the form is DEP-TYP-NNN, e.g. CMP-SOP-004")
    if match.group(1) != DEPARTMENTS[department]:
        raise _fail(
            "doc_code",
            f"{doc_code!r} starts with {match.group(1)}, but department {department!r} uses {DEPARTMENTS[department]}",
        )

    version_value = raw.get("version")
    if isinstance(version_value, float):
        raise _fail("version", f'was read as the number {version_value}: quote it in YAML (version: "{version_value}")')
    version = _text(raw, "version").removeprefix("v").removeprefix("V")
    if not VERSION.match(version):
        raise _fail("version", f"is {version!r}; use dotted numbers such as 3.1 or 2.0.1")

    status = _text(raw, "status").lower()
    if status not in STATUSES:
        raise _fail("status", f"is {status!r}; it must be one of {', '.join(STATUSES)}")

    classification_text = _text(raw, "classification").lower()
    try:
        classification = Classification(classification_text)
    except ValueError:
        levels = ", ".join(c.value for c in Classification)
        raise _fail("classification", f"is {classification_text!r}; it must be one of {levels}") from None

    return Header(
        doc_code=doc_code,
        title=_text(raw, "title"),
        version=version,
        status=status,
        effective_date=_date(raw.get("effective_date")),
        owner=_text(raw, "owner"),
        department=department,
        classification=classification,
        regulatory_refs=_refs(raw),
    )


def _date(value: object) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if value is None or (isinstance(value, str) and not value.strip()):
        raise _fail("effective_date", "is missing")
    try:
        return date.fromisoformat(str(value).strip())
    except ValueError:
        raise _fail("effective_date", f"is {value!r}; use an ISO date such as 2026-03-01") from None


def _refs(raw: Mapping[str, object]) -> tuple[str, ...]:
    if "regulatory_refs" not in raw:
        raise _fail("regulatory_refs", "is missing (write an empty list, or 'none', when there are none)")
    value = raw["regulatory_refs"]
    if value is None:
        return ()
    if isinstance(value, str):
        items = [part for part in re.split(r"\s*;\s*", value) if part]
    elif isinstance(value, list | tuple):
        items = [str(item) for item in value]
    else:
        raise _fail("regulatory_refs", f"must be a list or '; '-separated text, not {type(value).__name__}")
    cleaned = tuple(re.sub(r"\s+", " ", item).strip() for item in items)
    return tuple(item for item in cleaned if item and item.lower() not in {"none", "n/a", "-"})
