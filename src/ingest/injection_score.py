"""The injection classifier: a logistic regression over TF-IDF weighted hashed word and character n-grams
(ingest.injection_ngrams) and clause-level features (ingest.injection_features).

score = 1 / (1 + exp(-(bias + ngram_weights · tfidf(text) + Σ clause_weight_f · value_f)))

The weights, the inverse document frequencies, the bias and the threshold are in
ingest/data/injection_model.npz, fitted on the development passages of evals/injection only by
`python -m evals.injection.train` (which says how the settings and the threshold were chosen: cross-validation
inside the development passages). Scoring needs numpy alone; nothing is
downloaded. What ingestion does with the score is ingest.injection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import IO

import numpy as np

from ingest.injection_features import strongest_clause, text_features
from ingest.injection_ngrams import BUCKETS, hashed
from ingest.scanner import normalise

MODEL_FILE = "injection_model.npz"


@dataclass(frozen=True)
class ScoreModel:
    ngram_weights: np.ndarray  # (BUCKETS,) float64
    idf: np.ndarray  # (BUCKETS,) inverse document frequency per bucket, from the training passages
    clause_weights: dict[str, float]
    bias: float
    threshold: float  # on the probability


def load_model(path: str | Path | IO[bytes]) -> ScoreModel:
    with np.load(path, allow_pickle=False) as data:
        weights = data["ngram_weights"].astype(np.float64)
        if weights.shape != (BUCKETS,):
            raise ValueError(f"{MODEL_FILE}: {weights.shape[0]} n-gram weights, expected {BUCKETS}")
        names = [str(n) for n in data["clause_names"]]
        clause = dict(zip(names, (float(w) for w in data["clause_weights"]), strict=True))
        idf = data["idf"].astype(np.float64)
        if idf.shape != (BUCKETS,):
            raise ValueError(f"{MODEL_FILE}: {idf.shape[0]} inverse document frequencies, expected {BUCKETS}")
        return ScoreModel(weights, idf, clause, float(data["bias"]), float(data["threshold"]))


@cache
def score_model() -> ScoreModel:
    with (files("ingest") / "data" / MODEL_FILE).open("rb") as f:
        return load_model(f)


def feature_values(raw: str, clause_text: str, rules: set[str]) -> dict[str, float]:
    """Every clause feature's value for a text: the clause features of `clause_text` (normalised, tabs kept
    as breaks), the whole-text ones of `raw`, and one `rule:<id>` feature per scanner rule that matched (the
    classifier is trained and asked with none: it only decides when no rule matched)."""
    values = text_features(clause_text, raw)
    values.update({f"rule:{rule}": 1.0 for rule in rules})
    return values


def clause_text(text: str) -> str:
    """The text the features read: normalised, with tabs kept as clause breaks."""
    return normalise(text.replace("\t", "\n"))


def logit(normalised: str, values: dict[str, float], model: ScoreModel) -> float:
    index, weights = hashed(normalised, model.idf)
    z = model.bias + float(weights @ model.ngram_weights[index])
    return z + sum(model.clause_weights.get(name, 0.0) * value for name, value in values.items())


def probability(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def score(text: str, rules: set[str], model: ScoreModel | None = None) -> float:
    """The classifier's probability that `text` talks to the model reading it; `rules` are the scanner
    rules that matched it."""
    model = model or score_model()
    normalised = clause_text(text)
    return probability(logit(normalised, feature_values(text, normalised, rules), model))


def excerpt(text: str, model: ScoreModel | None = None) -> str:
    """The clause the clause weights point at: the evidence a classifier finding quotes."""
    return strongest_clause(clause_text(text), (model or score_model()).clause_weights)
