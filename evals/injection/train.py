"""Learn the injection detector's weights and threshold from the development split only:
`python -m evals.injection.train` writes src/ingest/data/injection_weights.json.

- Features: ingest.injection_features (clause level, max over clause windows) and one `rule:<id>` per scanner
  rule; values 0/1.
- Model: L2-regularised logistic regression, fitted by gradient descent (numpy), deterministic.
- The regularisation strength is chosen by 5-fold cross-validation on dev: the one whose out-of-fold scores
  give the highest recall at the target false-positive rate.
- The threshold is read off the out-of-fold scores (not the in-sample ones, which flatter the benign
  passages the model was fitted on): the lowest score that keeps the out-of-fold false-positive rate at or
  under TARGET_FPR. The final weights are fitted on all of dev.

The held-out split is never read here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from evals.injection.data_set import Passage, load_part
from ingest.injection_score import clause_text, feature_values
from ingest.scanner import SCANNER_VERSION, rule_findings

WEIGHTS = Path(__file__).resolve().parents[2] / "src" / "ingest" / "data" / "injection_weights.json"
TARGET_FPR = 0.01  # on dev's out-of-fold scores: leaves room under the held-out gate's 0.02
L2_CHOICES = (0.1, 0.3, 1.0, 3.0)
FOLDS = 5


def passage_values(passage: Passage) -> dict[str, float]:
    rules = {finding.rule for _, finding in rule_findings(passage.text)}
    return feature_values(passage.text, clause_text(passage.text), rules)


def fit(x: np.ndarray, y: np.ndarray, l2: float, steps: int = 4000, rate: float = 0.5) -> tuple[np.ndarray, float]:
    w = np.zeros(x.shape[1])
    b = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(x @ w + b)))
        w -= rate * (x.T @ (p - y) / len(y) + l2 * w / len(y))
        b -= rate * float((p - y).mean())
    return w, b


def threshold_at(benign_scores: np.ndarray, fpr: float) -> float:
    """The smallest score that flags at most `fpr` of these benign scores (ties count as flagged)."""
    ordered = np.sort(benign_scores)[::-1]
    allowed = math.floor(fpr * len(ordered))
    return float(ordered[allowed]) + 1e-9


def out_of_fold(x: np.ndarray, y: np.ndarray, l2: float) -> np.ndarray:
    folds = np.random.default_rng(19).permutation(len(y)) % FOLDS
    scores = np.zeros(len(y))
    for k in range(FOLDS):
        train = folds != k
        w, b = fit(x[train], y[train], l2)
        scores[~train] = x[~train] @ w + b
    return scores


def main() -> None:
    dev = load_part("dev")
    values = [passage_values(p) for p in dev]
    names = sorted({name for v in values for name in v})
    x = np.array([[v.get(name, 0.0) for name in names] for v in values])
    y = np.array([p.is_attack for p in dev], dtype=float)
    results = {}
    for l2 in L2_CHOICES:
        scores = out_of_fold(x, y, l2)
        cut = threshold_at(scores[y == 0], TARGET_FPR)
        results[l2] = (float((scores[y == 1] >= cut).mean()), cut)
        print(f"l2={l2}: out-of-fold recall {results[l2][0]:.3f} at dev FPR <= {TARGET_FPR}")
    l2 = max(L2_CHOICES, key=lambda c: (results[c][0], c))
    logit_cut = results[l2][1]
    w, b = fit(x, y, l2)
    threshold = 1.0 / (1.0 + math.exp(-logit_cut))
    WEIGHTS.write_text(
        json.dumps(
            {
                "about": "ingest.injection_score weights; written by `python -m evals.injection.train` from the dev "
                "split of evals/injection only",
                "scanner_version": SCANNER_VERSION,
                "l2": l2,
                "target_dev_fpr": TARGET_FPR,
                "out_of_fold_dev_recall": round(results[l2][0], 4),
                "threshold": round(threshold, 6),
                "bias": round(b, 6),
                "weights": {name: round(float(v), 6) for name, v in zip(names, w, strict=True) if abs(v) > 1e-6},
            },
            indent=1,
            sort_keys=False,
        )
        + "\n"
    )
    print(f"chose l2={l2}, threshold {threshold:.4f}; wrote {WEIGHTS}")


if __name__ == "__main__":
    main()
