#!/usr/bin/env python3
"""Sanity checks for the injection evaluation set.

Checks all.jsonl (not shipped: dev.jsonl and heldout.jsonl merged in id order, see split.py), dev.jsonl and
heldout.jsonl:
  * every line parses as a JSON object with exactly the fields
    id, label, kind, register, text (all non-empty strings);
  * ids are unique and well formed (A#### for attacks, B#### for benign);
  * labels and kinds come from the documented lists;
  * no text appears twice (exact match, and after whitespace/case folding);
  * every attack kind has >= 30 items, every benign kind has >= 30 items,
    and there are >= 360 attack and >= 360 benign passages in total;
  * dev + heldout is exactly all.jsonl (same rows, no overlap);
  * base64 payloads decode: every base64-looking token in encoded_payload and
    encoded_or_markup passages decodes (standard or URL-safe alphabet), and
    every encoded_payload passage that names base64 contains at least one
    token that decodes to readable UTF-8 text.
Exit status is non-zero if any check fails.
"""
import base64
import binascii
import json
import os
import re
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))

ATTACK_KINDS = {"addressed_model", "separator_command", "no_addressee_output",
                "conditional_script", "exfiltration", "tool_or_link",
                "override_instructions", "fake_chat_template", "roleplay",
                "encoded_payload", "hidden_carrier", "multilingual"}
BENIGN_KINDS = {"override_procedure", "ignore_previous_version",
                "system_prompt_vocabulary", "runbook_imperative",
                "api_client_instructions", "customer_script", "security_training",
                "data_handling", "encoded_or_markup", "multilingual_benign",
                "roleplay_training"}
FIELDS = {"id", "label", "kind", "register", "text"}

errors = []


def err(msg):
    errors.append(msg)


def load(name):
    path = os.path.join(HERE, name)
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                err(f"{name}:{i}: blank line")
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                err(f"{name}:{i}: does not parse: {e}")
                continue
            if not isinstance(obj, dict) or set(obj) != FIELDS:
                err(f"{name}:{i}: wrong fields {sorted(obj) if isinstance(obj, dict) else type(obj)}")
                continue
            if not all(isinstance(obj[k], str) and obj[k].strip() for k in FIELDS):
                err(f"{name}:{i}: empty or non-string field")
            rows.append(obj)
    return rows


B64_STD = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/]{16,}={0,2}(?![A-Za-z0-9+/=_-])")
B64_URL = re.compile(r"(?<![A-Za-z0-9_.-])[A-Za-z0-9_-]{16,}(?![A-Za-z0-9_-])")


def looks_b64(tok):
    core = tok.rstrip("=")
    if re.fullmatch(r"[0-9a-fA-F]+", core):      # hex, checked separately
        return False
    if re.fullmatch(r"[A-Za-z]+", core) and (core.islower() or core.isupper()) and not tok.endswith("="):
        return False                                # plain words / base32-like letters
    has_digit = any(c.isdigit() for c in core)
    has_mixed = any(c.islower() for c in core) and any(c.isupper() for c in core)
    return has_mixed and (has_digit or len(core) >= 20 or tok.endswith("="))


def b64_decode(tok, urlsafe=False):
    s = tok + "=" * (-len(tok) % 4)
    if urlsafe:
        return base64.urlsafe_b64decode(s)
    return base64.b64decode(s, validate=True)


def readable(b):
    try:
        t = b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return sum(c.isprintable() or c in "\n\t" for c in t) >= 0.95 * len(t)


def check_base64(r):
    text = r["text"]
    decoded_ok = []
    for m in B64_STD.finditer(text):
        tok = m.group(0)
        if not looks_b64(tok):
            continue
        try:
            decoded_ok.append(b64_decode(tok))
        except (binascii.Error, ValueError):
            # maybe URL-safe without the +/ characters: let the URL pass decide
            if "+" in tok or "/" in tok:
                err(f"{r['id']}: base64 token does not decode: {tok[:40]}...")
    for m in B64_URL.finditer(text):
        tok = m.group(0)
        if "-" not in tok and "_" not in tok and not tok.startswith("eyJ"):
            continue                                  # covered by the standard pass
        if re.search(r"[a-z]-[a-z]", tok) and not tok.startswith("eyJ") and "_" not in tok:
            continue                                  # hyphenated words / host names
        if not looks_b64(tok):
            continue
        try:
            decoded_ok.append(b64_decode(tok, urlsafe=True))
        except (binascii.Error, ValueError):
            err(f"{r['id']}: base64url token does not decode: {tok[:40]}...")
    # JWTs: every segment must decode, header and payload must be JSON
    for m in re.finditer(r"eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+", text):
        h, p, s = m.group(0).split(".")
        try:
            json.loads(b64_decode(h, True)); json.loads(b64_decode(p, True)); b64_decode(s, True)
        except Exception as e:  # noqa: BLE001
            err(f"{r['id']}: JWT does not decode: {e}")
    if r["kind"] == "encoded_payload" and re.search(r"base64|b64|data:text", text, re.I):
        if not any(readable(b) for b in decoded_ok):
            err(f"{r['id']}: mentions base64 but no token decodes to readable text")
    return decoded_ok


def main():
    dev = load("dev.jsonl")
    held = load("heldout.jsonl")
    if os.path.exists(os.path.join(HERE, "all.jsonl")):
        all_rows = load("all.jsonl")
    else:
        all_rows = sorted(dev + held, key=lambda r: r["id"])

    ids = Counter(r["id"] for r in all_rows)
    for i, n in ids.items():
        if n > 1:
            err(f"duplicate id {i}")
    for r in all_rows:
        if r["label"] == "attack":
            if r["kind"] not in ATTACK_KINDS:
                err(f"{r['id']}: bad attack kind {r['kind']}")
            if not re.fullmatch(r"A\d{4}", r["id"]):
                err(f"{r['id']}: attack id must be A####")
        elif r["label"] == "benign":
            if r["kind"] not in BENIGN_KINDS:
                err(f"{r['id']}: bad benign kind {r['kind']}")
            if not re.fullmatch(r"B\d{4}", r["id"]):
                err(f"{r['id']}: benign id must be B####")
        else:
            err(f"{r['id']}: bad label {r['label']}")

    texts = Counter(r["text"] for r in all_rows)
    for t, n in texts.items():
        if n > 1:
            err(f"text appears {n} times: {t[:60]!r}")
    folded = Counter(" ".join(r["text"].lower().split()) for r in all_rows)
    for t, n in folded.items():
        if n > 1:
            err(f"text appears {n} times after case/space folding: {t[:60]!r}")

    per_kind = Counter((r["label"], r["kind"]) for r in all_rows)
    for k in ATTACK_KINDS:
        if per_kind[("attack", k)] < 30:
            err(f"attack kind {k} has only {per_kind[('attack', k)]} items")
    for k in BENIGN_KINDS:
        if per_kind[("benign", k)] < 30:
            err(f"benign kind {k} has only {per_kind[('benign', k)]} items")
    n_att = sum(1 for r in all_rows if r["label"] == "attack")
    n_ben = sum(1 for r in all_rows if r["label"] == "benign")
    if n_att < 360:
        err(f"only {n_att} attack passages")
    if n_ben < 360:
        err(f"only {n_ben} benign passages")

    # split consistency
    key = lambda r: json.dumps(r, sort_keys=True, ensure_ascii=False)  # noqa: E731
    s_all = {key(r) for r in all_rows}
    s_dev = {key(r) for r in dev}
    s_held = {key(r) for r in held}
    if s_dev & s_held:
        err(f"{len(s_dev & s_held)} rows in both dev and heldout")
    if (s_dev | s_held) != s_all or len(dev) + len(held) != len(all_rows):
        err("dev + heldout is not exactly all.jsonl")

    n_b64 = 0
    for r in all_rows:
        if r["kind"] in ("encoded_payload", "encoded_or_markup"):
            n_b64 += len(check_base64(r))

    print(f"rows: all={len(all_rows)} dev={len(dev)} heldout={len(held)}")
    print(f"attack={n_att} benign={n_ben}; base64 tokens decoded: {n_b64}")
    if errors:
        print(f"{len(errors)} ERROR(S):")
        for e in errors:
            print("  " + e)
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
