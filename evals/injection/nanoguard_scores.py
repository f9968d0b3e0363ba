"""Score passages with metatronnanoguard 0.1.0, the step of `evals.injection.packaged` that needs torch (which
the product never does). Run by path in its own virtual environment:

    python -m venv NG && NG/bin/pip install torch==2.13.0 tiktoken numpy \\
        && NG/bin/pip install --no-deps metatronnanoguard==0.1.0
    python -m evals.injection.packaged --texts TEXTS.json          # the project's venv
    NG/bin/python evals/injection/nanoguard_scores.py TEXTS.json SCORES.json
    python -m evals.injection.packaged DIR --nanoguard SCORES.json  # the figures

The package's own scan() pads every text to 512 tokens; each passage is scored unpadded here (the same
logits, four times faster). Its tokenizer is a pickle in the package: run this only on that release.
"""

import json
import sys

import torch
from nanoguard import NanoGuard


def main(texts_file: str, scores_file: str) -> None:
    torch.set_num_threads(2)
    guard = NanoGuard(device="cpu")
    scores = []
    with open(texts_file) as f:
        texts = json.load(f)
    for text in texts:
        ids = guard.tokenizer.encode(text, max_length=guard.config.sequence_len)
        with torch.no_grad():
            logits = guard.model(torch.tensor([ids]), torch.ones((1, len(ids)), dtype=torch.bool))
        scores.append(torch.softmax(logits.float(), -1)[0, 1].item())
    with open(scores_file, "w") as f:
        json.dump(scores, f)


if __name__ == "__main__":
    main(*sys.argv[1:3])
