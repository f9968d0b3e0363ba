"""`python -m evals.injection` (`poe eval:injection`): recall and false-positive rate per kind on the dev and
held-out parts, for the scanner before issue 19, its rules alone, and what ingestion uses now (the rules, or
else the classifier: ingest.injection); the cost per chunk of scanning beside the cost of embedding it, on
the set's passages and on corpus chunks. Writes evals/injection/report.md.

Only aggregate figures are printed for the held-out part: it is scored, never read while tuning.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from evals.injection import baseline, public
from evals.injection.corpus_part import PLANTED, document_chunks
from evals.injection.data_set import HELDOUT_SHA256, Passage, load_part
from ingest.chunker import chunk_document
from ingest.injection import detect
from ingest.injection_score import score_model
from ingest.parsers import parse_document
from ingest.scanner import scan_for_injection

REPORT = Path(__file__).resolve().parent / "report.md"
CORPUS = Path(__file__).resolve().parents[2] / "corpus"
Detector = Callable[[str], bool]
DETECTORS: dict[str, Detector] = {
    "old scanner (before issue 19)": lambda text: bool(baseline.scan_for_injection(text)),
    "rules alone (in use before the classifier)": lambda text: bool(scan_for_injection(text)),
    "scanner in use (rules, else classifier)": lambda text: bool(detect(text)),
}
IN_USE = "scanner in use (rules, else classifier)"


def rates(passages: list[Passage], detector: Detector) -> dict[tuple[str, str], tuple[int, int]]:
    """(flagged, total) per (label, kind), and per (label, 'all')."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for passage in passages:
        flagged = detector(passage.text)
        for key in ((passage.label, passage.kind), (passage.label, "all")):
            counts[key][0] += flagged
            counts[key][1] += 1
    return {key: (n, total) for key, (n, total) in counts.items()}


def overall(result: dict[tuple[str, str], tuple[int, int]]) -> tuple[float, float]:
    """(recall, false-positive rate)."""
    caught, attacks = result[("attack", "all")]
    alarms, benign = result[("benign", "all")]
    return caught / attacks, alarms / benign


def corpus_chunks(limit: int = 64) -> list[str]:
    """The first `limit` chunks of corpus/'s Markdown documents, as the scanner reads them."""
    texts: list[str] = []
    for path in sorted(CORPUS.rglob("*.md")):
        document = parse_document(path.read_bytes(), path.name, max_bytes=50_000_000)
        texts += [f"{c.section_path}\n{c.content}" for c in chunk_document(document)]
        if len(texts) >= limit:
            break
    return texts[:limit]


def cost_per_chunk(texts: list[str]) -> dict[str, float]:
    """Milliseconds per text: each detector over all, and the local embedder (the default, offline) on 64."""
    costs = {}
    for name, detector in DETECTORS.items():
        started = time.perf_counter()
        for text in texts:
            detector(text)
        costs[name] = (time.perf_counter() - started) * 1000 / len(texts)
    from kb_core.embedders.local import LocalEmbedder

    embedder = LocalEmbedder()
    embedder.load()
    sample = texts[:64]
    embedder.embed(sample[:4])  # warm-up
    started = time.perf_counter()
    embedder.embed(sample)
    costs["local embedder (all-MiniLM-L6-v2 int8)"] = (time.perf_counter() - started) * 1000 / len(sample)
    return costs


def _pairs_head(left: list[str], right: list[str]) -> list[str]:
    """A table's head: a detector column, then two right-aligned figures for each group."""
    names = " | ".join(f"{a} | {b}" for a, b in zip(left, right, strict=True))
    return [f"| detector | {names} |", "|---|" + "---:|---:|" * len(left)]


def public_section() -> list[str]:
    """What each detector flags of the public collections, and per family what the scanner in use flags."""
    passages = public.load()
    collections = list(dict.fromkeys(p.collection for p in passages))
    lines = [
        "",
        "## Public collections (never trained or tuned on)",
        "",
        "evals/injection/data/public (README.md there: sources and licences). Attacks flagged / attacks; benign",
        "controls flagged / controls.",
        "",
        *_pairs_head([f"{c}: attacks" for c in collections], [f"{c}: controls" for c in collections]),
    ]
    for name, detector in DETECTORS.items():
        cells = []
        for collection in collections:
            own = [p for p in passages if p.collection == collection]
            attacks, controls = [p for p in own if p.attack], [p for p in own if not p.attack]
            cells.append(f"{sum(detector(p.text) for p in attacks)}/{len(attacks)}")
            cells.append(f"{sum(detector(p.text) for p in controls)}/{len(controls)}" if controls else "–")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    attacks = [p for p in passages if p.attack]
    flagged = sum(DETECTORS[IN_USE](p.text) for p in attacks)
    share = flagged / len(attacks)
    lines += ["", f"Together, the scanner in use flags {flagged}/{len(attacks)} of their attacks ({share:.3f})."]
    families: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for p in passages:
        families[(p.collection, p.family)].append(DETECTORS[IN_USE](p.text))
    lines += ["", f"Per family, {IN_USE}:", "", "| collection | family | flagged |", "|---|---|---:|"]
    lines += [f"| {c} | {f} | {sum(hits)}/{len(hits)} |" for (c, f), hits in sorted(families.items())]
    return lines


def main() -> None:
    parts = {part: load_part(part) for part in ("dev", "dev_extra", "heldout")}
    results = {(part, name): rates(passages, d) for part, passages in parts.items() for name, d in DETECTORS.items()}
    kinds = sorted({(p.label, p.kind) for p in parts["dev"]})
    chunks = corpus_chunks()
    costs = {"dev passages": cost_per_chunk([p.text for p in parts["dev"]]), "corpus chunks": cost_per_chunk(chunks)}
    model = score_model()
    lines = [
        "# Prompt-injection detection: development and held-out",
        "",
        "`python -m evals.injection` (`poe eval:injection`). Set: evals/injection/data (README.md there: how it was",
        f"written and split); held-out sha256 `{HELDOUT_SHA256}` (pinned in data_set.py and checked by the tests).",
        "Recall is the share of attack passages flagged; FPR the share of benign passages flagged. The classifier's",
        f"settings, weights and threshold ({model.threshold:.4f}) were chosen and fitted on the development passages",
        "only (dev, dev_extra and corpus/'s benign chunks; evals/injection/train.py). The classifier was fitted on",
        "them, so its figures there are in-sample; the cross-validated (out-of-fold) development figures are under",
        "'What this says'.",
        "",
        "## Overall",
        "",
        *_pairs_head([f"{part} recall" for part in parts], [f"{part} FPR" for part in parts]),
    ]
    for name in DETECTORS:
        figures = [overall(results[(part, name)]) for part in parts]
        lines.append(f"| {name} | " + " | ".join(f"{r:.3f} | {f:.3f}" for r, f in figures) + " |")
        named = zip(parts, figures, strict=True)
        print(f"{name}: " + "; ".join(f"{part} recall {r:.3f} FPR {f:.3f}" for part, (r, f) in named))
    corpus = document_chunks()
    benign_chunks = sum(doc not in PLANTED for doc, _, _ in corpus)
    lines += ["", "## corpus/ (every document, chunked as ingestion does)", ""]
    lines += ["| detector | benign documents' chunks flagged | planted documents flagged |", "|---|---:|---:|"]
    for name, detector in DETECTORS.items():
        flagged = [(doc, detector(text)) for doc, _, text in corpus]
        false_alarms = sum(hit for doc, hit in flagged if doc not in PLANTED)
        planted = len({doc for doc, hit in flagged if hit and doc in PLANTED})
        lines.append(f"| {name} | {false_alarms}/{benign_chunks} | {planted}/{len(PLANTED)} |")
    lines += ["", "## Per kind (flagged / passages)", ""]
    header = "| label | kind | " + " | ".join(f"{part}: {name}" for part in parts for name in DETECTORS) + " |"
    lines += [header, "|---|---|" + "---:|" * (len(parts) * len(DETECTORS))]
    for label, kind in kinds:
        cells = []
        for part in parts:
            for name in DETECTORS:
                n, total = results[(part, name)].get((label, kind), (0, 0))
                cells.append(f"{n}/{total}")
        lines.append(f"| {label} | {kind} | " + " | ".join(cells) + " |")
    lines += public_section()
    words = sum(len(t.split()) for t in chunks) / len(chunks)
    lines += ["", f"## Cost per chunk (ms, this machine; corpus chunks average {words:.0f} words)", ""]
    lines += ["| | " + " | ".join(costs) + " |", "|---|" + "---:|" * len(costs)]
    lines += [
        f"| {name} | " + " | ".join(f"{c[name]:.2f}" for c in costs.values()) + " |" for name in costs["dev passages"]
    ]

    def weakest(part: str) -> str:
        counts = results[(part, IN_USE)]
        kinds_of = sorted(
            (
                (n / total, kind, n, total)
                for (label, kind), (n, total) in counts.items()
                if label == "attack" and kind != "all"
            )
        )
        return ", ".join(f"{kind} {n}/{total}" for _, kind, n, total in kinds_of[:4])

    held_recall, held_fpr = overall(results[("heldout", IN_USE)])
    lines += [
        "",
        "## What this says",
        "",
        f"- The scanner in use flags held-out attacks at recall {held_recall:.3f} with FPR {held_fpr:.3f} (0.619 /",
        "  0.013 before the decode-and-follow rule, 0.598 / 0.009 before chat-markup; in the round before that:",
        "  0.366 / 0.004 at a threshold raised by hand to",
        "  0.985; 0.479 / 0.009 with the corpus chunks alone; rules alone 0.103 / 0.004): still short of the issue's",
        "  gate (recall >= 0.90, FPR <= 0.02). The gate in `make test` (tests/evals/test_injection_gate.py) is set",
        "  just under it: recall >= 0.62, FPR <= 0.02.",
        "- The chat-markup rule (ingest/scanner.py) was written from the development passages' fake chat turns:",
        "  special tokens by their shape rather than their known names, prompt-framing tags, role objects in JSON or",
        "  YAML, '### System:' sections, a transcript in which the model has a turn. On development it took the",
        "  rules alone from 23 to 59 of the 75 fake-chat-template attacks, and flagged one more benign passage (a",
        "  YAML prompt configuration quoted in documentation) and no corpus chunk. The rule declared before its",
        "  held-out run, keep it if the held-out FPR stays within the gate's 0.02, held: held-out template attacks",
        "  12 to 16 of 20, and one more benign passage flagged, of the kind encoded_or_markup.",
        "- The decode-and-follow rule (ingest/scanner.py), written from the development passages' encoded payloads:",
        "  an encoding or a decoding verb (base64, hex, rot13, read it backwards, unescape ...) and an order to act on",
        "  the result in the same clause, either order; verbs that also name everyday work (follow, execute, apply)",
        "  only where the clause ends with them. On development it took the rules alone from 1 to 50 of the 61",
        "  encoded-payload attacks, and flagged three more benign passages, all security training that quotes",
        "  'decode and follow', and no corpus chunk. Declared before its held-out run as above, it held: held-out",
        "  encoded payloads 10 to 14 of 17, no more benign passages flagged.",
        "- The model-hailed rule (the model hailed at the start of a line or sentence in one of many languages:",
        "  'Asistente:', 'Note pour l'IA :', 'Модель,') and a fix to every rule: normalise() turns Cyrillic",
        "  look-alikes into Latin letters, so a rule's own Cyrillic words ('игнорируй') never matched until they were",
        "  spelt the same way. Development, rules alone: multilingual attacks 2 to 19 of 133, no benign passage and",
        "  no corpus chunk more. Held-out, under the same declared rule: the rules alone flag 2 more multilingual",
        "  attacks, which the classifier already flagged, so the scanner in use is unchanged (0.639 / 0.013).",
        "  Held-out was scored once per change, after the change was chosen on the development passages.",
        f"  Weakest held-out kinds: {weakest('heldout')}.",
        "- Development passages: dev (466) and dev_extra (1779: 969 from the second round, 810 from the third;",
        "  data/README.md), and as benign passages the 1188 chunks of corpus/'s documents without a planted",
        "  injection (evals/injection/corpus_part.py). Out of fold (5-fold, grouped: a corpus document is one group;",
        "  3 repeats) the decision ingestion makes (rules, else the classifier) has recall 0.550 at FPR 0.031 on the",
        "  set's development passages and flags no corpus chunk (the rules alone flag about 0.02 of the benign",
        "  passages, mostly security training that quotes attack strings; the classifier flags at most 1% of those",
        "  no rule flags). The dev, dev_extra and corpus columns above are in-sample.",
        "- The threshold is the cross-validated one (no hand-set floor): the corpus chunks in training are what let it",
        "  come down from 0.985 without flagging a corpus document. Compared on the development passages only:",
        "  corpus chunks as benign training passages raised out-of-fold recall at the same FPR from 0.435 (threshold",
        "  pushed up to clear every corpus chunk) to 0.509; the third batch of dev_extra raised it on the passages",
        "  that were there before from about 0.51 to 0.62-0.66; a fourth batch (283 passages) did not move it",
        "  beyond the noise between repeats and was left out. Scoring the highest of one- and two-sentence windows",
        "  (a classifier fitted on whole passages, or also on benign windows) lowered out-of-fold recall (0.43 and",
        "  0.38 against 0.51): the windows of long benign corpus chunks scored higher than whole chunks, so the",
        "  threshold had to rise; it would also have run the clause features once per window.",
        "- Sentence embeddings do not help (development passages only, `python -m evals.injection.semantic`, same",
        "  cross-validation): a logistic head on the product's local embedding model (all-MiniLM-L6-v2 int8, from",
        "  its installed packages) over the passage's vector, the dimension-wise maximum of its clauses' vectors or",
        "  both reaches out-of-fold recall 0.16-0.19 (AUC 0.74-0.76 on the set's passages: the vectors say what a",
        "  passage is about, not whom it addresses); the highest clause's logit 0.15; added to the classifier in",
        "  use, 0.49-0.52 (vectors as features) and 0.53-0.56 (0.25-0.5 x the clause logit) against its 0.550.",
        "  Embedding every clause of a corpus chunk also cost more than embedding the chunk (30 against 23 ms a",
        "  chunk, load 0.8). Left out.",
        "- Fine-tuning the encoder itself does worse too (development passages only, `python -m",
        "  evals.injection.finetune`: all-MiniLM-L6-v2 trained whole with a linear head, 2 epochs, the same 5 grouped",
        "  folds): AUC 0.867 against the classifier in use's 0.941 on the same folds, recall 0.253 at 2% of the set's",
        "  benign passages flagged (0.605), and as ingestion decides 0.214 against 0.547 at the same FPR (0.031) and",
        "  corpus chunks flagged (0). About 2,200 written passages are too few to teach an encoder who is being",
        "  addressed; multilingual attacks (the encoder reads English) scored 0.008. It costs 38 ms a corpus chunk on",
        "  2 threads, near the embedding's own, but that could be paid: the classifier in use, kept as a first stage",
        "  at 95% of the attacks no rule flags, hands on only 1.2% of corpus chunks. It does not pay: asked second,",
        "  the encoder lowers out-of-fold recall to 0.250 at the same FPR.",
        "- Published detectors that ship their weights in a package do worse still (development passages only,",
        "  `python -m evals.injection.packaged`): jailguard 0.1.2's MLP over MiniLM vectors AUC 0.588, recall 0.071",
        "  at 2% of the set's benign passages flagged; prompt-guardrail 1.0.1's logistic regression AUC 0.522,",
        "  recall 0.030, and it flags 31 corpus chunks at that threshold; metatronnanoguard 0.1.0's 16.8M-parameter",
        "  transformer AUC 0.536, recall 0.033, 68 corpus chunks flagged (at its own threshold, 0.5, over half of",
        "  them). All three describe themselves as screens for prompts sent to a chat model (jailbreak and",
        "  injection attempts), not for instructions planted in documents among passages that legitimately",
        "  instruct people.",
        "- The classifier (src/ingest/injection_score.py): logistic regression over TF-IDF weighted hashed word",
        "  1-2-grams and character 2-5-grams (word and character parts each of unit length; the idf ships with the",
        "  weights) and the clause features, C 30, clause scale 0.5 (evals/injection/train.py lists the settings",
        "  compared). The clause features read each clause once and give a pair of clauses the union of its",
        "  clauses' flags, 25% less CPU than reading every pair again.",
        "- `long_text` is left out of the classifier: length looked like a signal on dev (attacks embedded in long",
        "  prose) and flagged four benign corpus documents.",
        "- Public labelled collections: two small MIT-licensed ones are in the repository (evals/injection/data/",
        "  public; 'Public collections' above), never trained or tuned on. What the scanner in use flags of their",
        "  attacks agrees with the held-out figure: it is about as far from the issue's 0.90 there.",
    ]
    REPORT.write_text("\n".join(lines) + "\n")
    print(f"wrote {REPORT}")


if __name__ == "__main__":
    main()
