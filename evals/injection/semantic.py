"""Does a sentence-embedding model help the injection classifier generalise? A development-only experiment:
`python -m evals.injection.semantic` (needs the `dev` extra) prints the out-of-fold figures of each variant,
measured exactly as evals/injection/train.py measures the classifier in use (5-fold grouped cross-validation,
3 repeats, the threshold at TARGET_FPR of the benign passages no rule flags and above every corpus chunk).

The embedding model is the one the product ships for its local embedder (all-MiniLM-L6-v2 int8,
kb_core.embedders.local: its weights come from installed packages, nothing is downloaded). Each passage is read
as the classifier reads it (ingest.injection_score.clause_text) and embedded whole and clause by clause
(ingest.injection_features.clauses, at most CLAUSE_PIECES word pieces each); the vectors are cached under
.kb-eval/ so that the variants can be compared without embedding again. The held-out part is never read here.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import sparse
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedGroupKFold

from evals.injection import train
from evals.injection.corpus_part import corpus_passages
from evals.injection.data_set import Passage, development
from ingest.injection_features import clauses
from ingest.injection_score import clause_text

CACHE = Path(__file__).resolve().parents[2] / ".kb-eval" / "injection-embeddings.npz"
CLAUSE_PIECES = 64
BATCH = 64


class ClauseEncoder:
    """Mean-pooled, unit-length MiniLM vectors of short texts, in batches of similar length."""

    def __init__(self) -> None:
        from kb_core.embedders.local import LocalEmbedder

        self._embedder = LocalEmbedder()
        self._embedder.load()

    def encode(self, texts: list[str]) -> np.ndarray:
        e = self._embedder
        encodings = e._tokenizer.encode_batch(texts, add_special_tokens=False)
        windows = [[e._cls, *enc.ids[:CLAUSE_PIECES], e._sep] for enc in encodings]
        out = np.zeros((len(windows), 384), dtype=np.float32)
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        for start in range(0, len(order), BATCH):
            batch = order[start : start + BATCH]
            width = max(len(windows[i]) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, i in enumerate(batch):
                ids[row, : len(windows[i])] = windows[i]
                mask[row, : len(windows[i])] = 1
            (hidden,) = e._session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )
            pooled = (hidden * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            out[batch] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out


def passage_clauses(passage: Passage) -> list[str]:
    return clauses(clause_text(passage.text))[:200] or [""]


def embeddings(passages: list[Passage]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(passage vectors, clause vectors, owner passage of each clause), cached by the passages' texts."""
    key = hashlib.sha256("\x00".join(p.text for p in passages).encode()).hexdigest()
    if CACHE.exists():
        with np.load(CACHE) as cached:
            if str(cached["key"]) == key:
                return cached["passages"], cached["clauses"], cached["owners"]
    from kb_core.embedders.local import LocalEmbedder

    whole = LocalEmbedder()
    vectors = whole.embed([clause_text(p.text) for p in passages]).vectors
    parts = [passage_clauses(p) for p in passages]
    owners = np.array([i for i, ps in enumerate(parts) for _ in ps])
    clause_vectors = ClauseEncoder().encode([c for ps in parts for c in ps])
    CACHE.parent.mkdir(exist_ok=True)
    np.savez(CACHE, key=key, passages=vectors, clauses=clause_vectors, owners=owners)
    return vectors, clause_vectors, owners


def pooled(clause_vectors: np.ndarray, owners: np.ndarray, n: int) -> np.ndarray:
    """Per passage: the dimension-wise maximum of its clauses' vectors."""
    out = np.full((n, clause_vectors.shape[1]), -np.inf, dtype=np.float32)
    np.maximum.at(out, owners, clause_vectors)
    return out


Scorer = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (train rows, test rows) -> test logits


def out_of_fold(d: train.Design, scorer: Scorer, seed: int) -> np.ndarray:
    scores = np.zeros(len(d.y))
    folds = StratifiedGroupKFold(train.FOLDS, shuffle=True, random_state=seed)
    for tr, te in folds.split(d.clause, d.y, d.groups):
        scores[te] = scorer(tr, te)
    return scores


def evaluate(d: train.Design, scorer: Scorer) -> tuple[float, float]:
    recalls, fprs = [], []
    for seed in range(train.REPEATS):
        scores = out_of_fold(d, scorer, seed)
        cut = train.threshold_at(scores, d, train.TARGET_FPR)
        flags = train.flagged(scores, d, cut)
        recalls.append(float(flags[d.y == 1].mean()))
        fprs.append(float(flags[(d.y == 0) & ~d.corpus].mean()))
    return float(np.mean(recalls)), float(np.mean(fprs))


def main() -> None:
    passages = development() + corpus_passages()
    d = train.design(passages)
    vectors, clause_vectors, owners = embeddings(passages)
    maxed = pooled(clause_vectors, owners, len(passages))

    def ngram_scorer(tr: np.ndarray, te: np.ndarray) -> np.ndarray:
        model, idf = train.fit(d, tr, train.CHOSEN)
        return model.decision_function(train.features(d, te, idf, train.CHOSEN["clause_scale"]))

    def dense_scorer(x: np.ndarray, c: float) -> Scorer:
        def scorer(tr: np.ndarray, te: np.ndarray) -> np.ndarray:
            model = LogisticRegression(C=c, max_iter=5000, class_weight="balanced").fit(x[tr], d.y[tr])
            return model.decision_function(x[te])

        return scorer

    def joint_scorer(x: np.ndarray, scale: float) -> Scorer:
        def scorer(tr: np.ndarray, te: np.ndarray) -> np.ndarray:
            idf = train.idf_of(d, tr)
            s = train.CHOSEN["clause_scale"]
            fit_x = sparse.hstack([train.features(d, tr, idf, s), sparse.csr_matrix(x[tr] * scale)]).tocsr()
            model = LogisticRegression(C=train.CHOSEN["C"], max_iter=5000, class_weight="balanced")
            model.fit(fit_x, d.y[tr])
            test_x = sparse.hstack([train.features(d, te, idf, s), sparse.csr_matrix(x[te] * scale)]).tocsr()
            return model.decision_function(test_x)

        return scorer

    def clause_scorer(c: float) -> Scorer:
        """A passage's logit is its highest clause's: a logistic head fitted on clause vectors, an attack's clauses
        first all labelled attack, then only its highest-scoring one (one round of multiple-instance relabelling)."""

        def scorer(tr: np.ndarray, te: np.ndarray) -> np.ndarray:
            mine = np.isin(owners, tr)
            x, owner = clause_vectors[mine], owners[mine]
            y = d.y[owner]
            model = LogisticRegression(C=c, max_iter=3000, class_weight="balanced").fit(x, y)
            z = model.decision_function(x)
            keep = y == 0
            best: dict[int, int] = {}  # owner -> passage index
            for k in np.flatnonzero(y == 1):
                if owner[k] not in best or z[k] > z[best[owner[k]]]:
                    best[owner[k]] = int(k)
            keep[list(best.values())] = True
            model = LogisticRegression(C=c, max_iter=3000, class_weight="balanced").fit(x[keep], y[keep])
            theirs = np.isin(owners, te)
            out = np.full(len(d.y), -np.inf)
            np.maximum.at(out, owners[theirs], model.decision_function(clause_vectors[theirs]))
            return out[te]

        return scorer

    def sum_of(first: Scorer, second: Scorer, weight: float) -> Scorer:
        return lambda tr, te: first(tr, te) + weight * second(tr, te)

    variants: dict[str, Scorer] = {"n-grams and clause features (in use)": ngram_scorer}
    for c in (1.0, 10.0):
        variants[f"passage vector, C {c}"] = dense_scorer(vectors, c)
        variants[f"max over clause vectors, C {c}"] = dense_scorer(maxed, c)
        variants[f"passage + max clause vectors, C {c}"] = dense_scorer(np.hstack([vectors, maxed]), c)
    for scale in (0.5, 1.0):
        variants[f"in use + passage + max clause vectors x{scale}"] = joint_scorer(np.hstack([vectors, maxed]), scale)
    variants["highest clause's logit, C 10"] = clause_scorer(10.0)
    for weight in (0.25, 0.5):
        variants[f"in use + {weight} x highest clause's logit"] = sum_of(ngram_scorer, clause_scorer(10.0), weight)
    only = sys.argv[1:]
    for name, scorer in variants.items():
        if only and not any(o in name for o in only):
            continue
        recall, fpr = evaluate(d, scorer)
        print(f"{name}: out-of-fold recall {recall:.3f}, FPR {fpr:.3f}", flush=True)


if __name__ == "__main__":
    main()
