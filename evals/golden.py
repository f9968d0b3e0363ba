"""The golden set: questions written per department, each with the sections that answer it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kb_core.roles import Role

GOLDEN = Path(__file__).with_name("golden.jsonl")
CATEGORIES = ("direct", "paraphrase", "version_trap", "cross_reference", "table", "out_of_scope", "role_restricted")
ANSWERABLE = ("direct", "paraphrase", "version_trap", "cross_reference", "table")


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
            )
        )
    return questions
