"""The golden set: questions written per department, each with the sections that answer it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from kb_core.roles import Role

GOLDEN = Path(__file__).with_name("golden.jsonl")
CATEGORIES = (
    "direct",
    "paraphrase",
    "version_trap",
    "cross_reference",
    "table",
    "out_of_scope",
    "role_restricted",
    "point_in_time",
)
ANSWERABLE = ("direct", "paraphrase", "version_trap", "cross_reference", "table")
# Point-in-time questions are asked as of their date and scored on their own (evals/report.md, "Point in
# time"): a chunk counts only when it is of the version in force then. They are not in the gates' figures,
# which stay comparable with earlier reports.


@dataclass(frozen=True)
class Expected:
    doc_code: str
    section: str


@dataclass(frozen=True)
class GoldenQuestion:
    id: str
    department: str
    category: str
    question: str
    expected: tuple[Expected, ...]
    answer: str
    role: Role
    superseded_version: str | None = None
    as_of: date | None = None  # point in time: search the versions in force on this date
    expected_version: str | None = None  # point in time: the version in force then

    @property
    def answerable(self) -> bool:
        return self.category in ANSWERABLE


def load_golden(path: Path = GOLDEN) -> list[GoldenQuestion]:
    questions = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        item = json.loads(line)
        if item["category"] not in CATEGORIES:
            raise ValueError(f"{path}:{number}: unknown category {item['category']!r}")
        questions.append(
            GoldenQuestion(
                id=item["id"],
                department=item["department"],
                category=item["category"],
                question=item["question"],
                expected=tuple(Expected(e["doc_code"], e["section"]) for e in item["expected"]),
                answer=item["answer"],
                role=Role(item["role"]),
                superseded_version=item.get("superseded_version"),
                as_of=date.fromisoformat(item["as_of"]) if item.get("as_of") else None,
                expected_version=item.get("expected_version"),
            )
        )
    return questions
