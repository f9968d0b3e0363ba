"""Public labelled prompt-injection collections, brought into the repository under their licences
(evals/injection/data/public/, README there): a measure nobody here wrote or tuned the detector against. They
are never read by training or tuning (evals/injection/train.py reads the development parts only); the report
gives what each detector flags of them.

- agent-injection-bench 0.1.0 (MIT): 21 indirect injections as they arrive in a tool result, document, web page,
  file name or metadata (the `injected` text), and 3 benign controls (family `control`).
- jailbreak-corpus-mini-py 0.1.0 (MIT): 15 jailbreak and injection prompts, every one an attack.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "data" / "public"
AGENT_INJECTION_BENCH = FOLDER / "agent-injection-bench-0.1.0-attacks.jsonl"
JAILBREAK_CORPUS_MINI = FOLDER / "jailbreak-corpus-mini-py-0.1.0-corpus.json"
# As the packages ship them: a changed file is a different collection, not these figures.
SHA256 = {
    AGENT_INJECTION_BENCH.name: "73e1d4274d0f3fcf85f96337dd3b2b1f270260da04712bf1116703c17afc428c",
    JAILBREAK_CORPUS_MINI.name: "caeb58975ee4c0950aa96c0d430cfe2c0e5c20f4d9a54c32fc3c923875422f70",
}


@dataclass(frozen=True)
class PublicPassage:
    collection: str
    id: str
    family: str
    attack: bool
    text: str


def _checked(path: Path) -> bytes:
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != SHA256[path.name]:
        raise ValueError(f"{path.name} is not the file its package ships (sha256 differs): restore it")
    return data


def load() -> list[PublicPassage]:
    passages = []
    for line in _checked(AGENT_INJECTION_BENCH).decode().splitlines():
        row = json.loads(line)
        family = row["family"]
        passages.append(PublicPassage("agent-injection-bench", row["id"], family, family != "control", row["injected"]))
    for row in json.loads(_checked(JAILBREAK_CORPUS_MINI)):
        passages.append(PublicPassage("jailbreak-corpus-mini", row["id"], row["category"], True, row["prompt"]))
    return passages
