"""A CANDIDATE injection detector, measured in evals/injection but not yet used by ingestion.

Its score: a logistic regression over clause-level features (ingest.injection_features)
and the scanner's rule hits, with weights learnt on the development split of evals/injection only.

score = 1 / (1 + exp(-(bias + Σ weight_f · value_f)))

A text whose score reaches THRESHOLD is flagged `injection-score`, quoting its strongest clause. The
weights, the bias and the threshold are in ingest/data/injection_weights.json, written by
`python -m evals.injection.train` (which says how the threshold was chosen); nothing is downloaded.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from ingest.injection_features import strongest_clause, text_features
from ingest.scanner import normalise, rule_findings

RULE_ID = "injection-score"


@dataclass(frozen=True)
class ScoreModel:
    weights: dict[str, float]
    bias: float
    threshold: float


@cache
def score_model() -> ScoreModel:
    data = json.loads((files("ingest") / "data" / "injection_weights.json").read_text(encoding="utf-8"))
    return ScoreModel(dict(data["weights"]), float(data["bias"]), float(data["threshold"]))


def feature_values(raw: str, clause_text: str, rules: set[str]) -> dict[str, float]:
    """Every feature's value for a text: the clause features of `clause_text` (normalised, tabs kept as
    breaks), the whole-text ones of `raw`, and one `rule:<id>` feature per scanner rule that matched."""
    values = text_features(clause_text, raw)
    values.update({f"rule:{rule}": 1.0 for rule in rules})
    return values


def score(values: dict[str, float], model: ScoreModel | None = None) -> float:
    model = model or score_model()
    z = model.bias + sum(model.weights.get(name, 0.0) * value for name, value in values.items())
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def excerpt(clause_text: str, model: ScoreModel | None = None) -> str:
    return strongest_clause(clause_text, (model or score_model()).weights)


def clause_text(text: str) -> str:
    """The text the clause features read: normalised, with tabs kept as clause breaks."""
    return normalise(text.replace("\t", "\n"))


def candidate_flags(text: str, model: ScoreModel | None = None) -> bool:
    """The candidate detector's decision (not yet used by ingestion): a scanner rule, or a score at or above
    the threshold."""
    model = model or score_model()
    rules = {finding.rule for _, finding in rule_findings(text)}
    return bool(rules) or score(feature_values(text, clause_text(text), rules), model) >= model.threshold
