#!/usr/bin/env python3
"""Split all.jsonl once into dev.jsonl and heldout.jsonl.

Rule (stratified by (label, kind)):
  * Group the items by (label, kind).
  * Within each group, sort by sha256(text as UTF-8) hex digest.
  * Default: an item goes to dev if the first hex digit of its digest is 0-7,
    and to heldout if it is 8-f.
  * If that leaves the group badly unbalanced (either part holds more than
    65% of the group), discard the digit rule for that group and instead
    alternate along the sorted order: positions 0, 2, 4, ... -> dev,
    positions 1, 3, 5, ... -> heldout.
Ids are never changed. Output files keep the order of all.jsonl.
"""
import hashlib
import json
import os
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def main():
    with open(os.path.join(HERE, "all.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]

    groups = defaultdict(list)
    for r in rows:
        groups[(r["label"], r["kind"])].append(r)

    part = {}
    report = []
    for key in sorted(groups):
        items = sorted(groups[key], key=lambda r: sha(r["text"]))
        digit = {r["id"]: ("dev" if sha(r["text"])[0] in "01234567" else "heldout") for r in items}
        n = len(items)
        n_dev = sum(1 for v in digit.values() if v == "dev")
        if max(n_dev, n - n_dev) / n > 0.65:
            method = "alternate"
            assign = {r["id"]: ("dev" if i % 2 == 0 else "heldout") for i, r in enumerate(items)}
        else:
            method = "digit"
            assign = digit
        part.update(assign)
        d = sum(1 for v in assign.values() if v == "dev")
        report.append((key, n, d, n - d, method))

    with open(os.path.join(HERE, "dev.jsonl"), "w", encoding="utf-8") as fd, \
         open(os.path.join(HERE, "heldout.jsonl"), "w", encoding="utf-8") as fh:
        for r in rows:
            (fd if part[r["id"]] == "dev" else fh).write(json.dumps(r, ensure_ascii=False) + "\n")

    for (label, kind), n, d, h, method in report:
        print(f"{label:7s} {kind:26s} total={n:3d} dev={d:3d} heldout={h:3d} method={method}")


if __name__ == "__main__":
    main()
