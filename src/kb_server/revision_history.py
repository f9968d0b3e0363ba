"""What a document's own revision history says about versions the knowledge base never stored.

Point in time answers from the stored versions (kb_server.versions): a version never ingested is unknown, and the
stored one before it answers for its dates. A later version's revision history table often lists it (`| 3.0 |
2025-10-01 | Activity trigger lowered to $7,500 … |`): read from there, the answer for such a date can say which
version the document itself says was in force, instead of quoting the one before it (found walking it as a
compliance officer: CMP-SOP-004 v2.0's $10,000 came back for a date when v3.0's $7,500 applied).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date

# A revision history section by its heading (the last part of its section path).
HISTORY_HEADING = re.compile(r"(revision|version|change|document)\s+(history|log)|changelog", re.I)
_VERSION = re.compile(r"v?(\d+(?:\.\d+)*)", re.I)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def listed_versions(section_paths_and_texts: Iterable[tuple[str, str]]) -> list[tuple[str, date]]:
    """(version, effective date) of each row of the revision history tables among the sections: a row's first
    cell that is a version number and its first cell that is an ISO date."""
    listed: list[tuple[str, date]] = []
    for path, text in section_paths_and_texts:
        if not HISTORY_HEADING.search(path.split(" › ")[-1]):
            continue
        for line in text.splitlines():
            if not line.lstrip().startswith("|"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            version = next((m.group(1) for c in cells if (m := _VERSION.fullmatch(c))), None)
            when = next((c for c in cells if _DATE.fullmatch(c)), None)
            if version is None or when is None:
                continue
            try:
                listed.append((version, date.fromisoformat(when)))
            except ValueError:
                continue
    return listed


def unstored_in_force(
    listed: Iterable[tuple[str, date]], stored: set[str], *, after: date, on: date
) -> tuple[str, date] | None:
    """The version the history lists as taking effect after `after` and on or before `on` (the latest such) that
    is not among the stored versions: by the document's own record, it, not the stored one, was in force `on`."""
    unknown = [(when, version) for version, when in listed if after < when <= on and version not in stored]
    if not unknown:
        return None
    when, version = max(unknown)
    return version, when


def unstored_between(
    listed: Iterable[tuple[str, date]], stored: set[str], *, after: date, before: date
) -> list[tuple[str, date]]:
    """The versions the history lists as taking effect after `after` and before `before` that are not stored,
    oldest first, each once: a change between the two stored versions may have come with any of them."""
    return sorted({(v, w) for v, w in listed if after < w < before and v not in stored}, key=lambda vw: vw[1])
