"""The held-out prompt-injection gate (issue 19): what ingestion flags (the rules, else the classifier) is scored
on the held-out part of evals/injection, which is pinned by its sha256. The gate is set just under what the
held-out part measured for the classifier fitted on the development passages (dev, dev_extra and corpus/'s own
benign chunks, with the chat-markup and decode-and-follow rules: recall 0.639, FPR 0.013 at the cross-validated
threshold; 0.619 / 0.013 before the second, 0.598 / 0.009 before both; 0.479 / 0.009 before dev_extra's third
batch; 0.366 / 0.004 before the corpus chunks, at a threshold raised by hand so that no corpus document was
flagged), not at the 0.90 / 0.02 the issue asked for, which no detector here reaches honestly: a drop below it
means the scanner lost something."""

from __future__ import annotations

import subprocess
import sys

from evals.injection.__main__ import DETECTORS, IN_USE, overall, rates
from evals.injection.data_set import DATA, HELDOUT_SHA256, load_part, sha256_of

HELDOUT_RECALL_FLOOR = 0.62
HELDOUT_FPR_CEILING = 0.02


def test_the_held_out_part_is_the_one_whose_hash_was_recorded():
    assert sha256_of("heldout") == HELDOUT_SHA256
    dev, held = load_part("dev"), load_part("heldout")
    assert not {p.id for p in dev} & {p.id for p in held}
    assert sum(p.is_attack for p in held) >= 150 and sum(not p.is_attack for p in held) >= 150


def test_the_extra_development_passages_share_no_text_or_id_with_the_held_out_part():
    def folded(text: str) -> str:
        return " ".join(text.lower().split())

    held = load_part("heldout")
    extra = load_part("dev_extra")
    assert len(extra) >= 600 and {p.label for p in extra} == {"attack", "benign"}
    assert not {folded(p.text) for p in extra} & {folded(p.text) for p in held}
    assert not {p.id for p in extra} & {p.id for p in held} and all(p.id.startswith("X") for p in extra)


def test_the_split_rule_re_derives_both_shipped_parts_from_the_recorded_whole_set():
    done = subprocess.run([sys.executable, "split.py"], cwd=DATA, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "dev.jsonl and heldout.jsonl are what the split rule gives" in done.stdout


def test_the_scanner_in_use_holds_the_held_out_gate(capsys):
    recall, fpr = overall(rates(load_part("heldout"), DETECTORS[IN_USE]))
    with capsys.disabled():
        print(
            f"\nheld-out: recall {recall:.3f} (floor {HELDOUT_RECALL_FLOOR}), FPR {fpr:.3f} (max {HELDOUT_FPR_CEILING})"
        )
    assert recall >= HELDOUT_RECALL_FLOOR
    assert fpr <= HELDOUT_FPR_CEILING


def test_the_gate_fails_for_a_detector_that_flags_everything():
    recall, fpr = overall(rates(load_part("heldout"), lambda text: True))
    assert recall == 1.0 and fpr > HELDOUT_FPR_CEILING
