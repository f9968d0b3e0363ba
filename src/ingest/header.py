"""Validate a header block's raw fields (from any format) into a Header, naming any bad field."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import date, datetime
from typing import TypeVar

from ingest.document import Header, HeaderError
from kb_core.departments import DEPARTMENTS, DOC_CODE, DOC_STATUSES, DOC_VERSION
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
STATUSES = DOC_STATUSES[:-1]  # a header cannot declare its document withdrawn
T = TypeVar("T")
SEE = "see docs/header-block.md"


def field_key(label: str) -> str:
    """'Doc code', 'doc-code', 'DOC_CODE' -> 'doc_code'."""
    return re.sub(r"[\s\-]+", "_", label.strip().lower())


def twice(name: str) -> HeaderError:
    """A field given two values (two header blocks, or one field twice): whichever was taken, the document
    could be filed under the wrong classification, owner or date."""
    return _fail(name, "is given twice: a document has one header, so keep one, with the right value")


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


class _FieldProblem(HeaderError):
    """One field's problem; build_header reports every field's at once."""

    def __init__(self, name: str, problem: str) -> None:
        self.name, self.problem = name, problem
        self.part = f"{LABELS[name]} ({name}) {problem}"
        super().__init__(f"header block: {self.part}; {SEE}")

    def __reduce__(self) -> tuple[type[_FieldProblem], tuple[str, str]]:
        # Parsing runs in a child process: the error comes back pickled, and an exception is rebuilt from its
        # args (here the message alone) unless it says otherwise.
        return (type(self), (self.name, self.problem))


def _fail(name: str, problem: str) -> HeaderError:
    return _FieldProblem(name, problem)


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

    # Every field is checked before any error is raised: a file with three bad fields takes one round trip to the
    # dead-letter queue to fix, not three.
    problems: list[str] = []

    def checked(check: Callable[[], T]) -> T | None:
        try:
            return check()
        except _FieldProblem as problem:
            problems.append(problem.part)
            return None

    department = checked(lambda: _department(raw))
    doc_code = checked(lambda: _doc_code(raw, department))
    version = checked(lambda: _version(raw))
    status = checked(lambda: _choice(raw, "status", STATUSES))
    classification = checked(lambda: _classification(raw))
    title = checked(lambda: _text(raw, "title"))
    effective_date = checked(lambda: _date(raw.get("effective_date")))
    owner = checked(lambda: _text(raw, "owner"))
    regulatory_refs = checked(lambda: _refs(raw))
    if problems:
        raise HeaderError(f"header block: {'; '.join(problems)}; {SEE}")
    assert department and doc_code and version and status and classification and title and owner
    assert effective_date is not None and regulatory_refs is not None
    return Header(
        doc_code=doc_code,
        title=title,
        version=version,
        status=status,
        effective_date=effective_date,
        owner=owner,
        department=department,
        classification=classification,
        regulatory_refs=regulatory_refs,
    )


def _department(raw: Mapping[str, object]) -> str:
    department = _text(raw, "department").lower()
    if department not in DEPARTMENTS:
        raise _fail("department", f"is {department!r}; it must be one of {', '.join(DEPARTMENTS)}")
    return department


def _doc_code(raw: Mapping[str, object], department: str | None) -> str:
    doc_code = _text(raw, "doc_code").upper()
    match = DOC_CODE.match(doc_code)
    if not match:
        raise _fail("doc_code", f"is {doc_code!r}; the form is DEP-TYP-NNN, e.g. CMP-SOP-004")
    if department is not None and match.group(1) != DEPARTMENTS[department]:
        raise _fail(
            "doc_code",
            f"{doc_code!r} starts with {match.group(1)}, but department {department!r} uses {DEPARTMENTS[department]}",
        )
    return doc_code


def _version(raw: Mapping[str, object]) -> str:
    version_value = raw.get("version")
    if isinstance(version_value, float):
        raise _fail("version", f'was read as the number {version_value}: quote it in YAML (version: "{version_value}")')
    version = _text(raw, "version").removeprefix("v").removeprefix("V")
    if not DOC_VERSION.match(version):
        raise _fail("version", f"is {version!r}; use dotted numbers such as 3.1 or 2.0.1")
    return version


def _choice(raw: Mapping[str, object], name: str, choices: tuple[str, ...]) -> str:
    value = _text(raw, name).lower()
    if value not in choices:
        raise _fail(name, f"is {value!r}; it must be one of {', '.join(choices)}")
    return value


def _classification(raw: Mapping[str, object]) -> Classification:
    return Classification(_choice(raw, "classification", tuple(c.value for c in Classification)))


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
