"""The gates a change must pass (LLD §5): retrieval quality, and no chunk above a caller's ceiling."""

from __future__ import annotations

from dataclasses import dataclass

from evals.retrieval import Run

RECALL_AT_5 = 0.85
MRR = 0.70


@dataclass(frozen=True)
class GateResult:
    passed: bool
    failures: tuple[str, ...]


def quality_gate(run: Run) -> GateResult:
    failures = []
    if run.overall.recall_at_5 < RECALL_AT_5:
        failures.append(f"recall@5 {run.overall.recall_at_5:.3f} < {RECALL_AT_5}")
    if run.overall.mrr < MRR:
        failures.append(f"MRR {run.overall.mrr:.3f} < {MRR}")
    return GateResult(not failures, tuple(failures))


def leak_gate(leaks_by_role: dict[str, list[tuple[str, str]]]) -> GateResult:
    failures = [
        f"{role}: {len(found)} chunks above its ceiling (first: {found[0]})"
        for role, found in leaks_by_role.items()
        if found
    ]
    return GateResult(not failures, tuple(failures))
