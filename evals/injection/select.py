"""Model selection for the injection classifier by cross-validation inside the dev part only:
`python -m evals.injection.select` prints, for each candidate setting, the out-of-fold recall at an
out-of-fold false-positive rate <= 0.01 and <= 0.02 (3 x 5-fold stratified, dev passages only).

The held-out part is never read here.
"""

from __future__ import annotations

import itertools
import re
import sys
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from evals.injection.data_set import Passage, load_part
from ingest.injection_ngrams import BUCKETS, hashed
from ingest.injection_score import clause_text, feature_values
from ingest.scanner import rule_findings

REPEATS = 3
FOLDS = 5
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def windows(normalised: str) -> list[str]:
    """The sentences (and lines) of a text that has more than one, alone and with the next one: scoring the
    highest of them (windows=True) was tried for attacks mid-paragraph; out of fold it lost recall."""
    parts = [s.strip() for s in _SENTENCE_END.split(normalised) if s.strip()][:200]
    if len(parts) < 2:
        return []
    return parts + [f"{a} {b}" for a, b in itertools.pairwise(parts)]


@dataclass
class Encoded:
    """One dev passage, encoded: its n-gram rows (whole text first, then each sentence window), its clause
    feature row and whether a scanner rule matched."""

    ngram_rows: sparse.csr_matrix
    clause_row: dict[str, float]
    rule_hit: bool


def encode(passage: Passage) -> Encoded:
    rules = {finding.rule for _, finding in rule_findings(passage.text)}
    normalised = clause_text(passage.text)
    texts = [normalised, *windows(normalised)]
    rows = []
    for text in texts:
        index, values = hashed(text)
        rows.append(sparse.csr_matrix((values, (np.zeros(len(index), dtype=int), index)), shape=(1, BUCKETS)))
    return Encoded(sparse.vstack(rows).tocsr(), feature_values(passage.text, normalised, rules), bool(rules))


def recall_at(scores: np.ndarray, y: np.ndarray, fpr: float) -> tuple[float, float]:
    """(recall, threshold) at the lowest threshold whose false-positive rate on these scores is <= fpr."""
    benign = np.sort(scores[y == 0])[::-1]
    allowed = int(np.floor(fpr * len(benign)))
    cut = benign[allowed] + 1e-9
    return float((scores[y == 1] >= cut).mean()), float(cut)


def out_of_fold(enc: list[Encoded], y: np.ndarray, names: list[str], setting: dict, seed: int) -> np.ndarray:
    scale, c, use_ngrams, use_windows, rules_or = (
        setting["clause_scale"],
        setting["C"],
        setting["ngrams"],
        setting["windows"],
        setting["rules_or"],
    )
    clause = np.array([[e.clause_row.get(n, 0.0) for n in names] for e in enc]) * scale
    scores = np.zeros(len(y))
    folds = StratifiedKFold(FOLDS, shuffle=True, random_state=seed)
    for train, test in folds.split(clause, y):
        blocks = [sparse.csr_matrix(clause[train])]
        if use_ngrams:
            blocks.insert(0, sparse.vstack([enc[i].ngram_rows[0] for i in train]))
        model = LogisticRegression(C=c, max_iter=3000, class_weight="balanced")
        model.fit(sparse.hstack(blocks).tocsr(), y[train])
        w = model.coef_[0]
        w_ng, w_cf = (w[:BUCKETS], w[BUCKETS:]) if use_ngrams else (None, w)
        for i in test:
            base = model.intercept_[0] + clause[i] @ w_cf
            rows = enc[i].ngram_rows if use_windows else enc[i].ngram_rows[:1]
            z = base + (rows @ w_ng).max() if use_ngrams else base
            scores[i] = z + (100.0 if rules_or and enc[i].rule_hit else 0.0)
    return scores


def main() -> None:
    dev = load_part("dev")
    enc = [encode(p) for p in dev]
    y = np.array([p.is_attack for p in dev], dtype=int)
    names = sorted({n for e in enc for n in e.clause_row})
    grid: dict[str, list] = {
        "ngrams": [True],
        "clause_scale": [0.5, 1.0, 2.0],
        "C": [3.0, 10.0, 30.0, 100.0],
        "windows": [False],
        "rules_or": [False],
    }
    if "--clause-only" in sys.argv:
        grid.update(ngrams=[False], windows=[False], C=[0.1, 0.3, 1.0, 3.0], clause_scale=[1.0])
    kinds = np.array([p.kind for p in dev])
    for values in itertools.product(*grid.values()):
        setting = dict(zip(grid, values, strict=True))
        if not setting["ngrams"] and setting["clause_scale"] == 0:
            continue
        r1, r2, fp = [], [], []
        per_kind: dict[str, list[float]] = {}
        for seed in range(REPEATS):
            scores = out_of_fold(enc, y, names, setting, seed)
            rec, cut = recall_at(scores, y, 0.01)
            r1.append(rec)
            r2.append(recall_at(scores, y, 0.02)[0])
            fp.append(float((scores[y == 0] >= cut).mean()))
            for kind in sorted(set(kinds[y == 1])):
                per_kind.setdefault(kind, []).append(float((scores[(y == 1) & (kinds == kind)] >= cut).mean()))
        line = " ".join(f"{k}={v}" for k, v in setting.items())
        print(f"{line}: recall@fpr.01 {np.mean(r1):.3f} (fpr {np.mean(fp):.3f}) recall@fpr.02 {np.mean(r2):.3f}")
        if "--per-kind" in sys.argv:
            print("   " + " ".join(f"{k[:12]}={np.mean(v):.2f}" for k, v in per_kind.items()))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
