"""The labelled injection set (data/README.md says how it was written and split). dev.jsonl is for tuning, and
so is dev_extra.jsonl (more development passages written later, for issue 19's second and third rounds: never split,
never scored as held-out); heldout.jsonl is only ever scored, and its hash is pinned so that it cannot change
unnoticed."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
HELDOUT_SHA256 = "680d96c9bf7eee15b243e6e141178dd6f5eddedcf1fcf414a7e9ee3ce0938ad8"
PARTS = ("dev", "dev_extra", "heldout")


@dataclass(frozen=True)
class Passage:
    id: str
    label: str  # 'attack' | 'benign'
    kind: str
    register: str
    text: str

    @property
    def is_attack(self) -> bool:
        return self.label == "attack"


def part_path(part: str) -> Path:
    if part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}")
    return DATA / f"{part}.jsonl"


def sha256_of(part: str) -> str:
    return hashlib.sha256(part_path(part).read_bytes()).hexdigest()


def load_part(part: str) -> list[Passage]:
    if part == "heldout" and sha256_of(part) != HELDOUT_SHA256:
        raise ValueError("heldout.jsonl does not have its recorded sha256: the held-out part must never change")
    lines = part_path(part).read_text(encoding="utf-8").splitlines()
    return [Passage(**json.loads(line)) for line in lines if line.strip()]


def development() -> list[Passage]:
    """Every passage that may be tuned on: dev.jsonl and dev_extra.jsonl."""
    return load_part("dev") + load_part("dev_extra")


def group_of(passage: Passage) -> str:
    """Passages made from one written passage share a group (dev_extra's `-E` variants embed a passage in
    policy prose), so that cross-validation never trains on one and scores the other; a corpus chunk's group is
    its document, every version of it (evals/injection/corpus_part.py)."""
    if passage.id.startswith("corpus:"):
        return ":".join(passage.id.split(":")[:2])
    return passage.id.split("-", 1)[0]
