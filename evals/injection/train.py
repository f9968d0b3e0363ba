"""Choose the injection classifier's settings and fit it on the development passages only:
`python -m evals.injection.train` (needs the `dev` extra: scikit-learn) prints the cross-validated figures of
each candidate setting and writes src/ingest/data/injection_model.npz. `--no-write` only prints.

- Passages: dev.jsonl and dev_extra.jsonl (evals/injection/data_set.py: development), and as benign passages
  the chunks of corpus/'s documents without a planted injection (evals/injection/corpus_part.py: long
  legitimate policy prose, which the short passages of the set under-represent). The held-out part is never
  read here.
- Features: TF-IDF over hashed word 1-2-grams and character 2-5-grams (ingest.injection_ngrams; the inverse
  document frequencies come from the training passages and ship with the weights) and the clause features
  (ingest.injection_features, scaled by the clause scale).
- Model: L2-regularised logistic regression (scikit-learn, balanced class weights).
- Selection (`--compare`): 5-fold cross-validation, stratified by label and grouped (a passage and its copy
  embedded in prose stay in one fold), with the inverse document frequencies refitted inside each fold. The
  threshold is the lowest out-of-fold score at which the classifier flags at most TARGET_FPR of the set's benign
  passages that no rule flags (ingestion asks it only then: ingest.injection) and no corpus chunk (a corpus
  document is one group: its chunks are scored by a classifier that saw none of them); the setting with the highest
  out-of-fold recall of that decision (a rule, or else the classifier) is CHOSEN. The final weights are fitted
  on all the development passages with CHOSEN and the threshold its out-of-fold one.
"""

from __future__ import annotations

import io
import itertools
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import sparse
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedGroupKFold

from evals.injection.corpus_part import KIND as CORPUS_KIND
from evals.injection.corpus_part import corpus_passages
from evals.injection.data_set import Passage, development, group_of
from ingest.injection_ngrams import BUCKETS, char_buckets, damped_bucket_counts, word_buckets
from ingest.injection_score import clause_text, feature_values
from ingest.scanner import rule_findings

MODEL = Path(__file__).resolve().parents[2] / "src" / "ingest" / "data" / "injection_model.npz"
GRID = {"C": [10.0, 30.0, 100.0], "clause_scale": [0.5, 1.0, 2.0]}
# Compared on the development passages (1 repeat, TARGET_FPR 0.01), out-of-fold recall: C 30 / scale 0.5 0.474,
# C 30 / scale 1 0.429, C 100 / scale 1 0.394, C 10 / scale 2 0.333.
CHOSEN = {"C": 30.0, "clause_scale": 0.5}
TARGET_FPR = 0.01  # of the benign passages no rule flags
FOLDS = 5
REPEATS = 3  # the threshold is the mean over repeats: one repeat moved it by up to 0.02
# Not learnt from: the set's attacks embedded mid-paragraph made length look like a signal (the data README
# says it is not one), and most stored chunks are long, so it flagged benign corpus documents.
LEFT_OUT = frozenset({"long_text"})


@dataclass
class Design:
    words: sparse.csr_matrix  # damped word n-gram counts per passage
    chars: sparse.csr_matrix  # damped character n-gram counts per passage
    clause: np.ndarray  # clause feature values per passage
    names: list[str]  # the clause features' names
    rule_hit: np.ndarray  # whether a scanner rule matched the passage
    y: np.ndarray  # 1 for an attack
    corpus: np.ndarray  # whether the passage is a corpus chunk
    groups: np.ndarray
    buckets: np.ndarray  # the n-gram buckets any passage uses: the matrices' columns (fitting is faster)


def _counts(texts: list[str], grams: Callable[[str], Iterable[int]]) -> sparse.csr_matrix:
    rows, cols, vals = [], [], []
    for i, text in enumerate(texts):
        index, values = damped_bucket_counts(grams(text))
        rows += [i] * len(index)
        cols += index.tolist()
        vals += values.tolist()
    return sparse.csr_matrix((vals, (rows, cols)), shape=(len(texts), BUCKETS))


def design(passages: list[Passage]) -> Design:
    normalised = [clause_text(p.text) for p in passages]
    # The classifier only decides when no rule matched (ingest.injection), so it learns without rule features.
    rows = [feature_values(p.text, n, set()) for p, n in zip(passages, normalised, strict=True)]
    names = sorted({name for row in rows for name in row} - LEFT_OUT)
    words, chars = _counts(normalised, word_buckets), _counts(normalised, char_buckets)
    buckets = np.flatnonzero(np.asarray((words != 0).sum(axis=0) + (chars != 0).sum(axis=0)).ravel())
    return Design(
        words=words[:, buckets].tocsr(),
        chars=chars[:, buckets].tocsr(),
        clause=np.array([[row.get(name, 0.0) for name in names] for row in rows]),
        names=names,
        rule_hit=np.array([bool(rule_findings(p.text)) for p in passages]),
        y=np.array([p.is_attack for p in passages], dtype=int),
        corpus=np.array([p.kind == CORPUS_KIND for p in passages]),
        groups=np.array([group_of(p) for p in passages]),
        buckets=buckets,
    )


def idf_of(d: Design, rows: np.ndarray) -> np.ndarray:
    """Smoothed inverse document frequency per used bucket over these passages (scikit-learn's formula)."""
    present = ((d.words[rows] > 0) + (d.chars[rows] > 0)).astype(bool)
    df = np.asarray(present.sum(axis=0)).ravel()
    return (np.log((1 + len(rows)) / (1 + df)) + 1.0).astype(np.float32)


def _unit_rows(m: sparse.csr_matrix) -> sparse.csr_matrix:
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sparse.diags(1.0 / norms) @ m


def features(d: Design, rows: np.ndarray, idf: np.ndarray, scale: float) -> sparse.csr_matrix:
    weigh = sparse.diags(idf.astype(np.float64))
    ngrams = _unit_rows(d.words[rows] @ weigh) + _unit_rows(d.chars[rows] @ weigh)
    return sparse.hstack([ngrams, sparse.csr_matrix(d.clause[rows] * scale)]).tocsr()


def fit(d: Design, rows: np.ndarray, setting: dict[str, float]) -> tuple[LogisticRegression, np.ndarray]:
    idf = idf_of(d, rows)
    model = LogisticRegression(C=setting["C"], max_iter=5000, class_weight="balanced")
    return model.fit(features(d, rows, idf, setting["clause_scale"]), d.y[rows]), idf


def out_of_fold(d: Design, setting: dict[str, float], seed: int) -> np.ndarray:
    scores = np.zeros(len(d.y))
    folds = StratifiedGroupKFold(FOLDS, shuffle=True, random_state=seed)
    for train, test in folds.split(d.clause, d.y, d.groups):
        model, idf = fit(d, train, setting)
        scores[test] = model.decision_function(features(d, test, idf, setting["clause_scale"]))
    return scores


def threshold_at(scores: np.ndarray, d: Design, fpr: float) -> float:
    """The lowest logit at which the classifier flags at most `fpr` of the set's benign passages no rule flags
    (ingestion asks the classifier only when no rule matched) and no corpus chunk."""
    candidates = np.sort(scores[(d.y == 0) & ~d.rule_hit & ~d.corpus])[::-1]
    at_fpr = float(candidates[math.floor(fpr * len(candidates))])
    corpus = scores[d.corpus & ~d.rule_hit]
    return max(at_fpr, float(corpus.max()) if corpus.size else -math.inf) + 1e-9


def flagged(scores: np.ndarray, d: Design, cut: float) -> np.ndarray:
    return d.rule_hit | (scores >= cut)


def cross_validate(d: Design, setting: dict[str, float]) -> tuple[float, float, float, np.ndarray]:
    """(out-of-fold recall, FPR on the set's benign passages, logit threshold, flags of the last repeat) of
    ingestion's decision."""
    recalls, fprs, cuts, last = [], [], [], np.zeros(0, dtype=bool)
    for seed in range(REPEATS):
        scores = out_of_fold(d, setting, seed)
        cut = threshold_at(scores, d, TARGET_FPR)
        last = flagged(scores, d, cut)
        recalls.append(float(last[d.y == 1].mean()))
        fprs.append(float(last[(d.y == 0) & ~d.corpus].mean()))
        cuts.append(cut)
    return float(np.mean(recalls)), float(np.mean(fprs)), float(np.mean(cuts)), last


def main() -> None:
    passages = development() + corpus_passages()
    d = design(passages)
    kinds = np.array([p.kind for p in passages])
    if "--compare" in sys.argv:
        for values in itertools.product(*GRID.values()):
            setting = dict(zip(GRID, values, strict=True))
            recall, fpr, _, _ = cross_validate(d, setting)
            print(f"{setting}: out-of-fold recall {recall:.3f}, FPR {fpr:.3f}", flush=True)
    recall, fpr, cut, last = cross_validate(d, CHOSEN)
    print(f"{CHOSEN}: out-of-fold recall {recall:.3f}, FPR {fpr:.3f} (rules or classifier)")
    for kind in sorted(set(kinds)):
        mask = kinds == kind
        print(f"  {kind:26s} {int(last[mask].sum()):3d}/{int(mask.sum())}")
    if "--no-write" in sys.argv:
        return
    setting = CHOSEN
    model, used_idf = fit(d, np.arange(len(d.y)), setting)
    w = model.coef_[0]
    used = len(d.buckets)
    ngram_weights = np.zeros(BUCKETS, dtype=np.float32)
    ngram_weights[d.buckets] = w[:used]
    # A bucket no development passage uses weighs nothing; its idf is that of an n-gram seen nowhere.
    idf = np.full(BUCKETS, math.log(1 + len(d.y)) + 1.0, dtype=np.float32)
    idf[d.buckets] = used_idf
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        ngram_weights=ngram_weights,
        idf=idf,
        clause_names=np.array(d.names),
        clause_weights=(w[used:] * setting["clause_scale"]).astype(np.float64),
        bias=np.float64(model.intercept_[0]),
        threshold=np.float64(1.0 / (1.0 + math.exp(-cut))),
        out_of_fold_dev=np.array([recall, fpr]),
        settings=np.array([setting["C"], setting["clause_scale"], TARGET_FPR]),
    )
    MODEL.write_bytes(buffer.getvalue())
    threshold = 1.0 / (1.0 + math.exp(-cut))
    print(f"threshold {threshold:.4f}; wrote {MODEL} ({len(buffer.getvalue()) // 1024} KiB)")


if __name__ == "__main__":
    main()
