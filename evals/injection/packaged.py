"""Do published injection detectors that ship their weights in a package do better on this set? A
development-only experiment: `python -m evals.injection.packaged DIR`, where DIR holds the two packages'
wheels, fetched with

    pip download --no-deps jailguard==0.1.2 prompt-guardrail==1.0.1 -d DIR

(none of these is a dependency of the product; nothing else is downloaded), and a third scored in a virtual
environment with torch (evals/injection/nanoguard_scores.py says how; `--nanoguard SCORES.json` adds it). Each
detector scores the development
passages (dev, dev_extra) and corpus/'s benign chunks; printed: its AUC on the set's passages, its recall at the
threshold where 2% of the set's benign passages are flagged, and how many corpus chunks that threshold flags.
The classifier in use reaches out-of-fold recall 0.550 at FPR 0.031 on the same passages (report.md).

- jailguard 0.1.2 (MIT OR Apache-2.0): an MLP over all-MiniLM-L6-v2 sentence vectors, its weights a JSON
  document compiled into the package's native library. Its own runtime fetches the fp32 MiniLM ONNX model at
  first use and checks its hash, which cannot run here; the same MLP is applied to the product's MiniLM
  vectors (int8, cosine >= 0.998 to fp32; evals.injection.semantic embeds and caches them).
- prompt-guardrail 1.0.1 (Apache-2.0): a logistic regression over a TF-IDF vectoriser, both pickled in the
  package (joblib loads them: run this only on the wheels named above).
- metatronnanoguard 0.1.0 (MIT): a 16.8M-parameter transformer classifier, its checkpoint and tokenizer in the
  package. Measured: AUC 0.536, recall 0.033, 68 of 1,188 corpus chunks flagged; at its own threshold (0.5)
  it flags 53% of the corpus chunks.

The held-out part and the public collections are never read here.
"""

from __future__ import annotations

import json
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from evals.injection import semantic
from evals.injection.corpus_part import corpus_passages
from evals.injection.data_set import Passage, development

FPR = 0.02


def _wheel(folder: Path, name: str) -> Path:
    found = sorted(folder.glob(f"{name}-*.whl"))
    if not found:
        raise SystemExit(f"no {name} wheel in {folder}: fetch it with the pip download line in this module's docstring")
    return found[-1]


def jailguard_mlp(wheel: Path) -> Callable[[np.ndarray], np.ndarray]:
    with zipfile.ZipFile(wheel) as archive:
        library = next(n for n in archive.namelist() if n.endswith(".so") or n.endswith(".pyd"))
        blob = archive.read(library)
    start = blob.index(b'{"w_h1":')
    weights, _ = json.JSONDecoder().raw_decode(blob[start : start + 8_000_000].decode("latin-1"))
    w1, b1, w2, b2, wo, bo = (np.asarray(weights[k]) for k in ("w_h1", "b_h1", "w_h2", "b_h2", "w_out", "b_out"))

    def score(vectors: np.ndarray) -> np.ndarray:
        hidden = np.maximum(np.maximum(vectors @ w1.T + b1, 0) @ w2.T + b2, 0)
        return 1 / (1 + np.exp(-(hidden @ wo.T + bo)[:, 0]))

    return score


def prompt_guardrail(wheel: Path) -> Callable[[list[str]], np.ndarray]:
    import joblib

    folder = Path(tempfile.mkdtemp(prefix="prompt-guardrail-"))
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(folder)
    model = joblib.load(folder / "guardify" / "models" / "lg_ip_guardrails.pkl")
    vectoriser = joblib.load(folder / "guardify" / "models" / "ig_ip_vectorizer.pkl")
    return lambda texts: model.predict_proba(vectoriser.transform(texts))[:, 1]


def summary(name: str, passages: list[Passage], scores: np.ndarray) -> str:
    attack = np.array([p.is_attack for p in passages])
    in_set = np.array([not p.id.startswith("corpus:") for p in passages])
    threshold = float(np.quantile(scores[in_set & ~attack], 1 - FPR))
    flagged = scores > threshold
    return (
        f"{name}: AUC {roc_auc_score(attack[in_set], scores[in_set]):.3f}; at {FPR:.0%} of the set's benign passages "
        f"flagged, recall {flagged[attack].mean():.3f}, corpus chunks flagged {int(flagged[~in_set].sum())}/"
        f"{int((~in_set).sum())}"
    )


def main(argv: list[str]) -> int:
    passages = development() + corpus_passages()
    if len(argv) == 2 and argv[0] == "--texts":
        Path(argv[1]).write_text(json.dumps([p.text for p in passages]))
        return 0
    if len(argv) not in (1, 3) or (len(argv) == 3 and argv[1] != "--nanoguard"):
        print("usage: python -m evals.injection.packaged DIR [--nanoguard SCORES.json] (DIR: the folder the two")
        print("       wheels were downloaded to), or --texts TEXTS.json (evals/injection/nanoguard_scores.py)")
        return 2
    folder = Path(argv[0])
    vectors, _, _ = semantic.embeddings(passages)
    print(
        summary("jailguard 0.1.2 (its MLP over MiniLM)", passages, jailguard_mlp(_wheel(folder, "jailguard"))(vectors))
    )
    score_texts = prompt_guardrail(_wheel(folder, "prompt_guardrail"))
    print(summary("prompt-guardrail 1.0.1", passages, score_texts([p.text for p in passages])))
    if len(argv) == 3:
        scores = np.array(json.loads(Path(argv[2]).read_text()))
        if len(scores) != len(passages):
            raise SystemExit(f"{argv[2]} has {len(scores)} scores for {len(passages)} passages: score --texts again")
        print(summary("metatronnanoguard 0.1.0", passages, scores))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
