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

all.jsonl is not shipped: it is dev.jsonl and heldout.jsonl merged in id order (its sha256, ALL_SHA256, is
checked). `python3 split.py` re-derives both parts from that union and fails unless they come out byte for
byte as shipped; `python3 split.py --write` writes them (from all.jsonl when present).
"""
import hashlib
import json
import os
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ALL_SHA256 = "264dc152b6b86e436522b1908d76c5e25764f74b60eb4f2af144126885049265"


def read(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        return [line for line in f.read().splitlines() if line.strip()]


def all_lines():
    """all.jsonl's lines: the file when present, else dev + heldout merged in id order (ids were assigned
    in the order of all.jsonl, before the split)."""
    if os.path.exists(os.path.join(HERE, "all.jsonl")):
        lines = read("all.jsonl")
    else:
        lines = sorted(read("dev.jsonl") + read("heldout.jsonl"), key=lambda line: json.loads(line)["id"])
    digest = hashlib.sha256(("\n".join(lines) + "\n").encode("utf-8")).hexdigest()
    if digest != ALL_SHA256:
        sys.exit(f"the passages do not hash to the recorded all.jsonl ({digest}): the set has changed")
    return lines


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def main():
    rows = [json.loads(line) for line in all_lines()]

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

    out = {"dev": "", "heldout": ""}
    for r in rows:
        out[part[r["id"]]] += json.dumps(r, ensure_ascii=False) + "\n"
    for name, text in out.items():
        path = os.path.join(HERE, f"{name}.jsonl")
        if "--write" in sys.argv:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        else:
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    sys.exit(f"{name}.jsonl is not what the split rule gives")

    for (label, kind), n, d, h, method in report:
        print(f"{label:7s} {kind:26s} total={n:3d} dev={d:3d} heldout={h:3d} method={method}")
    if "--write" not in sys.argv:
        print("dev.jsonl and heldout.jsonl are what the split rule gives")


if __name__ == "__main__":
    main()
