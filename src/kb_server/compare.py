"""What changed between two versions of a document (compare_versions).

Sections are matched by their citation anchor (`4.2`): a section only in the newer version was added, one
only in the older was removed, and one in both whose text differs changed. A changed section's text is cut
into sentences (list items and table rows are sentences of their own; a paragraph wrapped over several lines
is one text) and the two sentence lists are aligned with difflib, so the answer carries just the sentences
that differ, each beside its counterpart. Whitespace alone never counts as a change.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from kb_server.documents import StoredSection

# A line that starts an item of its own: a list item, a table row or a heading.
_ITEM = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|\||#)")
# A sentence ends at . ! or ? followed by a space and what looks like the start of the next one.
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'“‘$*])")


SAME_SENTENCE = 0.5  # two sentences at least this alike (difflib ratio) are one sentence, changed


_FRAGMENT = re.compile(r"^(?:\d+[.)]|[a-z]\.|e\.g\.|i\.e\.|etc\.|vs\.|no\.)$", re.IGNORECASE)


@dataclass(frozen=True)
class SentenceChange:
    before: str | None  # None: a sentence added
    after: str | None  # None: a sentence removed


@dataclass(frozen=True)
class ChangedSection:
    before: StoredSection
    after: StoredSection
    changes: list[SentenceChange]


@dataclass(frozen=True)
class VersionDiff:
    added: list[StoredSection]
    removed: list[StoredSection]
    changed: list[ChangedSection]
    unchanged: int


def sentences(text: str) -> list[str]:
    units: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if not line.strip() or _ITEM.match(line):
            if current:
                units.append(" ".join(current))
            current = [line.strip()] if line.strip() else []
        else:
            current.append(line.strip())
    if current:
        units.append(" ".join(current))
    found: list[str] = []
    for unit in units:
        pieces = [" ".join(p.split()) for p in _SENTENCE.split(unit) if p.strip()]
        merged: list[str] = []
        for piece in pieces:
            if merged and _FRAGMENT.match(merged[-1]):  # "1." of a numbered item, "e.g.": not sentences
                merged[-1] += " " + piece
            else:
                merged.append(piece)
        found.extend(merged)
    return found


def sentence_changes(before: str, after: str) -> list[SentenceChange]:
    old, new = sentences(before), sentences(after)
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    changes: list[SentenceChange] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            changes.extend(_pair(old[i1:i2], new[j1:j2]))
    return changes


def _pair(old: list[str], new: list[str]) -> list[SentenceChange]:
    """Within a block that differs, put each old sentence beside the most similar new one (in order, when
    at least half alike); the rest were removed or added."""
    pairs: list[SentenceChange] = []
    start = 0
    for sentence in old:
        scores = [difflib.SequenceMatcher(a=sentence, b=n, autojunk=False).ratio() for n in new[start:]]
        best = max(range(len(scores)), key=scores.__getitem__, default=None)
        if best is None or scores[best] < SAME_SENTENCE:
            pairs.append(SentenceChange(sentence, None))
            continue
        pairs.extend(SentenceChange(None, added) for added in new[start : start + best])
        pairs.append(SentenceChange(sentence, new[start + best]))
        start += best + 1
    pairs.extend(SentenceChange(None, added) for added in new[start:])
    return pairs


def compare_sections(old: list[StoredSection], new: list[StoredSection]) -> VersionDiff:
    before = {s.anchor: s for s in old}
    after = {s.anchor: s for s in new}
    changed: list[ChangedSection] = []
    unchanged = 0
    for anchor, section in after.items():
        previous = before.get(anchor)
        if previous is None:
            continue
        changes = sentence_changes(previous.content, section.content)
        if changes:
            changed.append(ChangedSection(previous, section, changes))
        else:
            unchanged += 1
    return VersionDiff(
        added=[s for a, s in after.items() if a not in before],
        removed=[s for a, s in before.items() if a not in after],
        changed=changed,
        unchanged=unchanged,
    )
