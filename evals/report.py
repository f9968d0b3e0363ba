"""evals/report.md, the ablation chart and the badge JSON, from one `poe eval` run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from evals.answers import FAITHFULNESS_GATE, AnswerReport
from evals.gates import MRR, RECALL_AT_5, GateResult, held_out_scores
from evals.golden import GoldenQuestion
from evals.metrics import first_match, mean, recall_at, reciprocal_rank
from evals.retrieval import Outcome, Run, Scores
from evals.split import HELD_OUT_DIGEST, is_held_out


def _row(name: str, scores: Scores) -> str:
    return (
        f"| {name} | {scores.recall_at_5:.3f} | {scores.recall_at_10:.3f} | {scores.mrr:.3f} | "
        f"{scores.ndcg_at_10:.3f} | {scores.questions} |"
    )


HEADER = "| | recall@5 | recall@10 | MRR | nDCG@10 | questions |\n|---|---|---|---|---|---|"
# Variants measured on the development parts only and not chosen there (evals.tune's grids and one-off runs
# on 2026-12-04 and -05, golden through the served SQL, NPL dev with 1,000 results); "simulated" rows ran on NPL dev in
# numpy (exact BM25 k1 1.2 b 0.75 and exact cosine over the loaded collection) to see whether an idea was worth
# building into the SQL: neither pseudo-relevance feedback beat the plain convex fusion there. The golden "simulated"
# rows fuse the served legs' candidates in Python (evals/fusion_sim.py).
DEV_ONLY_ROWS = (
    "| convex 0.5 vector + 0.5 text, no bonus | 0.902 | 0.778 | 0.356 | served: 0.902, 0.785, 0.357 |",
    "| convex 0.6 + 0.4, no bonus | 0.902 | 0.775 | 0.359 | served: 0.902, 0.785, 0.357 |",
    "| convex 0.7 + 0.3, no bonus | 0.902 | 0.776 | 0.354 | served: 0.902, 0.785, 0.357 |",
    "| convex 0.4 + 0.6, no bonus | 0.893 | 0.739 | 0.350 | served: 0.902, 0.785, 0.357 |",
    "| convex 0.6 + 0.4, 30 candidates per leg (served 50; NPL always 1,000) | 0.902 | 0.769 | – | 0.902, 0.785 |",
    "| convex 0.6 + 0.4, 100 candidates per leg | 0.902 | 0.771 | – | 0.902, 0.785 |",
    "| convex 0.6 + 0.4, title and section path weighted 2 in BM25 | 0.902 | 0.761 | – | 0.902, 0.785 |",
    "| convex 0.6 + 0.4, BM25 k1 1.2 b 0.5 (NPL text leg alone 0.286) | 0.911 | 0.784 | 0.358 | 0.902, 0.785, 0.357 |",
    "| convex 0.6 + 0.4, BM25 k1 0.9 b 0.5 (NPL text leg alone 0.286) | 0.911 | 0.775 | 0.361 | 0.902, 0.785, 0.357 |",
    "| joint grid: min-max 0.7/0.3, BM25 k1 0.9 b 0.3, 100 candidates per leg "
    "| 0.911 | 0.800 | 0.355 | served then: 0.902, 0.785, 0.357 |",
    "| joint grid: z-score 0.6/0.4, BM25 k1 0.9 b 0.3, no bonus (best NPL dev) | 0.911 | 0.770 | 0.375 | "
    "z-score served: 0.911, 0.790, 0.369 |",
    "| text query also with each word's other spelling the role's statistics hold (e-mail ↔ email), z-score "
    'served | 0.911 | 0.792 | – | 0.911, 0.790 (the table miss it was for, "how long do we keep emails?", '
    "stays out of the top 3) |",
    "| NPL, each leg cut to its best 100 / 200 / 500 before the (min-max) fusion (served then; 1,000 measured) "
    "| – | – | 0.336 / 0.345 / 0.354 | 0.357 |",
    "| simulated: text leg + 10 words from the vector leg's top 5 chunks (weight 0.3), convex | – | – | 0.352 | "
    "simulated convex: 0.362 (text leg alone 0.332 against 0.294) |",
    "| simulated: text leg + 10 words from the fused top 5 (weight 0.3), convex | – | – | 0.357 | "
    "simulated convex: 0.362 |",
    "| simulated: query vector + 0.5 × mean of the vector leg's top 3 (Rocchio), convex | – | – | 0.358 | "
    "simulated convex: 0.362 (vector leg alone 0.303 against 0.305) |",
    "| vector leg's similarity less 0.1 / 0.2 × the chunk's mean similarity to its 10 nearest chunks (a CSLS-style "
    "hubness correction), z-score served | 0.911 / 0.893 | 0.790 / 0.772 | – | 0.911, 0.790 |",
    "| vector leg's similarity less 0.1 / 0.2 × the chunk's mean similarity to its document's other sections "
    "(Purpose, Scope and Definitions sections stand near all of them) | 0.911 / 0.902 | 0.779 / 0.784 | – | "
    "0.911, 0.790 |",
    "| simulated: each sentence of a question of several also searched, the lists fused by RRF (k 10, weight "
    "0.3; 21 of 56 questions split) | 0.929 | 0.806 | – | the same merge of the question's own list: 0.929, "
    "0.795 (a section's repeated chunks counted once) |",
    "| simulated (`python -m evals.fusion_sim`): each chunk also embedded two sentences at a time, the vector leg "
    "scoring its best window (as if every window were indexed like a table's row groups: about 5 × the rows) / "
    "the mean of that and the chunk | 0.929 / 0.911 | 0.777 / 0.780 | – | fused the same way in Python: 0.911, "
    "0.781 (one question more in the top 5) |",
    "| simulated (`python -m evals.fusion_sim`): each document's later chunks less 0.1 / 0.2 / 0.3 per chunk of it "
    "already taken (for answers that span two documents) | 0.911 / 0.911 / 0.911 | 0.781 / 0.777 / 0.778 | – | "
    "fused the same way in Python: 0.911, 0.781 |",
    "| (`python -m evals.row_groups`) a table's row groups of 1 / 2 / 4 / 5 rows, or none (served: 3 rows; 11 of "
    "the 12 development table questions at rank ≤ 3 in every variant) | 0.911 / 0.911 / 0.911 / 0.911 / 0.911 | "
    "0.767 / 0.774 / 0.783 / 0.781 / 0.773 | – | 3 rows: 0.911, 0.790 |",
    "| simulated (`python -m evals.fusion_sim`): the chunks of a document that the first 1 / 2 fused chunks name by "
    "its code gain 0.2 / 0.5 (for answers that span a document and the one it points to) | 0.911 / 0.911 / 0.911 / "
    "0.902 | 0.789 / 0.806 / 0.788 / 0.803 | – | fused the same way in Python: 0.911, 0.782; not taken: no "
    "question more in the top 5, and the MRR gain is five questions moving (first 1, 0.5, in the SQL's own "
    "scores: three rise to 1st, one falls from 1st to 2nd) |",
    "| simulated (`python -m evals.fusion_sim`): the chunks of a Purpose, Scope, Definitions or Revision History "
    "section less 0.5 / 1.0 (they echo their document's vocabulary and take top-5 places from the answering "
    "section) | 0.920 / 0.920 | 0.798 / 0.800 | – | fused the same way in Python: 0.911, 0.782; not taken: no "
    "golden question is answered by such a section, and on 124 probe questions made from the corpus that are "
    "(what changed in the latest version, what a document is for, what a defined term means) recall@1 falls "
    "from 0.669 to 0.452 / 0.242 and recall@5 from 0.984 to 0.903 / 0.661 |",
)
ABLATION_HEADER = (
    "| | recall@5 | MRR | dev recall@5 | dev MRR | held-out recall@5 | held-out MRR | paraphrase recall@5 "
    "| table: rank ≤ 3 |\n|---|---|---|---|---|---|---|---|---|"
)


def _outcomes(run: Run, part: str) -> list[Outcome]:
    return [o for o in run.outcomes if is_held_out("golden", o.question.id) == (part == "held_out")]


def _part(run: Run, part: str) -> Scores:
    return Scores.of(_outcomes(run, part))


def tables_at_rank_3(run: Run) -> tuple[int, int]:
    """How many table questions had their first expected section come back at rank 3 or better, of how many."""
    tables = [o for o in run.outcomes if o.question.category == "table"]
    good = [o for o in tables if (r := first_match(o.ranked, o.question.expected[0])) is not None and r <= 3]
    return len(good), len(tables)


def table_rank_share(run: Run) -> float:
    """Share of the table questions whose first expected section came back at rank 3 or better."""
    good, tables = tables_at_rank_3(run)
    return good / tables if tables else 0.0


def _ablation_row(run: Run) -> str:
    dev, held = _part(run, "dev"), _part(run, "held_out")
    paraphrase = run.by("category").get("paraphrase")
    return (
        f"| {run.name} | {run.overall.recall_at_5:.3f} | {run.overall.mrr:.3f} | {dev.recall_at_5:.3f} | "
        f"{dev.mrr:.3f} | {held.recall_at_5:.3f} | {held.mrr:.3f} | "
        f"{paraphrase.recall_at_5 if paraphrase else 0:.3f} | {table_rank_share(run):.3f} |"
    )


def chart(runs: list[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r.name for r in runs]
    metrics = {
        "recall@5": [r.overall.recall_at_5 for r in runs],
        "MRR": [r.overall.mrr for r in runs],
        "nDCG@10": [r.overall.ndcg_at_10 for r in runs],
    }
    figure, axis = plt.subplots(figsize=(10, 5.5))
    width = 0.27
    for i, (label, values) in enumerate(metrics.items()):
        positions = [n + (i - 1) * width for n in range(len(names))]
        bars = axis.barh(positions, values, height=width, label=label)
        axis.bar_label(bars, fmt="%.2f", fontsize=7, padding=2)
    axis.axvline(RECALL_AT_5, color="grey", linestyle="--", linewidth=1)
    axis.set_yticks(range(len(names)), names, fontsize=8)
    axis.invert_yaxis()
    axis.set_xlim(0, 1.05)
    axis.set_title("Golden set: retrieval ablations (dashed line: the recall@5 gate)")
    axis.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write(
    folder: Path,
    *,
    runs: list[Run],
    leaks: dict[str, list[tuple[str, str]]],
    quality: GateResult,
    leak: GateResult,
    public: dict[str, Any] | None,
    answers: AnswerReport,
    seconds: float,
) -> None:
    default = runs[0]
    held = held_out_scores(default)
    manifest = (folder.parent / "corpus" / "MANIFEST.csv").read_bytes()
    lines = [
        "# Retrieval evaluation",
        "",
        "Produced by `poe eval` (`python -m evals.run`); do not edit by hand. Corpus snapshot: `corpus/MANIFEST.csv` "
        f"sha256 `{hashlib.sha256(manifest).hexdigest()[:16]}`; embedder: the local default "
        "(all-MiniLM-L6-v2, int8 ONNX, 384 dimensions); every question through the query `search_knowledge_base` "
        f"runs, as the question's role. Run time {seconds / 60:.1f} min on this 2-core machine.",
        "",
        "## Gates",
        "",
        "| gate | threshold | measured | |",
        "|---|---|---|---|",
        f"| hybrid recall@5, held-out questions | ≥ {RECALL_AT_5} | {held.recall_at_5:.3f} | "
        f"{'pass' if held.recall_at_5 >= RECALL_AT_5 else 'FAIL'} |",
        f"| hybrid MRR, held-out questions | ≥ {MRR} | {held.mrr:.3f} | {'pass' if held.mrr >= MRR else 'FAIL'} |",
        f"| chunks above the asking role's ceiling, every question × every role | 0 | "
        f"{sum(len(v) for v in leaks.values())} | {'pass' if leak.passed else 'FAIL'} |",
        "",
        "Metrics are over the answerable questions (direct, paraphrase, version trap, cross-reference, table). "
        "A chunk is relevant when it is of the expected document and its section path contains the expected "
        "heading; recall counts each expected section (a cross-reference question needs all of its sections).",
        "",
        "## Ablations",
        "",
        'Development and held-out: the fixed split of evals/split.py (held out when sha256("golden:" + id) is '
        "odd; the held-out ids hash to `" + HELD_OUT_DIGEST[:16] + "…`). Settings were tuned on the development "
        "questions only (evals/tuning.json, `python -m evals.tune`; the fusion stays the LLD's RRF k 60 with "
        "equal weights unless a variant wins on both the held-out golden questions and NPL); the held-out "
        "columns are the honest figures, each measured once the variant was chosen.",
        "",
        ABLATION_HEADER,
        *(_ablation_row(run) for run in runs),
        "",
        "![ablations](ablations.png)",
        "",
        "What they show: full-text search with `websearch_to_tsquery` joins the question's words with AND, so a "
        "question asked in plain words rarely matches any chunk; the OR form of the same words is a useful leg, "
        "and ranked by BM25 (per-partition statistics, sql/008) rather than `ts_rank` it lifts the hybrid. The "
        "identifier path puts the chunk holding a named code, path, operationId, header or field first. The "
        "hyphen spellings (sql/013) add to the question's words the same word as the role's chunks write it with "
        "or without hyphens ('emails' finds 'E-mail', 'on-call' finds 'oncall'): chosen on the development "
        "questions (MRR 0.790 to 0.792, nothing lost), then measured once on the held-out ones (0.850 to 0.858); "
        "NPL's hybrid MAP is 0.362 either way. The "
        "contextual prefix (`{title} — {section_path}` before each chunk's text when embedding) moves vector-only "
        f"recall@5 from {_named(runs, 'vector only, no contextual prefix')} to "
        f"{_named(runs, 'vector only')}.",
        "",
        "Fusion: the tuner's first grid (RRF k 10-100 × text weight 0.5-1.5 × first-rank bonus 0-0.02, and a "
        "convex combination of the legs' min-max normalised scores with vector weight 0.4-0.7 × bonus 0-0.05) chose, "
        "by golden dev MRR + NPL dev MAP, the convex combination 0.6 vector + 0.4 text with a 0.05 bonus for a leg's "
        "first, which beat the LLD's RRF k 60 on both held-out parts. The joint grid (`python -m evals.tune "
        "--joint`: BM25 k1 0.9-2.0 × b 0.3-0.9 × vector weight 0.5-0.7 × bonus 0/0.05 × min-max or z-score "
        "normalisation, golden at 50 and 100 candidates per leg) then chose, by the same objective at the served "
        "50 candidates, each leg's score in standard deviations above its lowest candidate with BM25 k1 1.2 b 0.3 "
        "(golden dev MRR 0.790, NPL dev MAP 0.369, against 0.785 and 0.357). The rule declared before its "
        "held-out run (serve it only if it beats the previous default on both held-out parts) held, so it is the "
        "served default: held-out golden MRR 0.850 against 0.821 at the same recall@5, NPL held-out MAP 0.353 "
        "against 0.340. Over both depths the grid's top was min-max 0.7/0.3 with k1 2.0 b 0.3 at 100 candidates, "
        "0.0016 higher on the objective (the exploratory runs behind the choice had not joined its NPL figure); "
        "measured once on held-out it lost on both parts (golden recall@5 0.872, MRR 0.813; NPL 0.330). The best "
        "min-max variants at 50 candidates, slightly better on golden dev, lost on held-out golden too (rows "
        "above): their dev gains were one or two questions. Min-max maps every leg's best onto 1 however far "
        "ahead of the rest it is; in "
        "standard deviations, a leg whose best candidates stand out outweighs one whose scores are bunched. RRF "
        "keeps only ranks.",
        "",
        "Tables read out (`python -m evals.table_readout`, not served): every table embedded row by row as "
        "`Header: cell; Header: cell` instead of as a pipe table (what search returns stays the pipe table). "
        "Development: recall@5 0.911 to 0.929, MRR 0.792 to 0.788, table questions at rank ≤ 3 11 to 12 of 12 "
        "(reading out only row groups, or only tables of six rows or more, or the cells without their headers, "
        "also reached 0.929 at MRR 0.769-0.783; with vector weight 0.5-0.7 and a first-rank bonus 0-0.1 its best "
        "MRR was 0.790). "
        "The rule declared before its one held-out run: serve it if held-out recall@5 stays at least 0.907, MRR "
        "at least 0.848 (the served 0.858 less 0.01) and table questions at rank ≤ 3 stay 9 of 9. Held-out: "
        "recall@5 0.930, MRR 0.839, tables 9 of 9, so it is not served: read out, tables (revision histories "
        "and reference tables among them) also rise for questions that a paragraph answers.",
        "",
        "A short text leg measured among zeros (not served): found walking it, the one chunk holding a rare word (a "
        "word only it has) came 8th, below chunks that only resembled the query, since a text leg of one match has "
        "no spread to count standard deviations in and its match counts 1.0 against the vector leg's best at 2-3. "
        "Measured as if the rest of a short text leg's candidates scored 0 (as BM25 gives a chunk without the "
        "words), such a chunk comes first. The rule declared before its one held-out run: serve it if held-out "
        "golden recall@5 and MRR and NPL MAP do not fall. Golden: unchanged on both parts; NPL (1,000 candidates, "
        "so a query matching fewer abstracts is padded): dev 0.369 either way, held-out 0.353 to 0.352, so it is "
        "not served.",
        "",
        "Tried on the development parts and not chosen (so not measured on held-out):",
        "",
        "| variant | golden dev recall@5 | golden dev MRR | NPL dev MAP | against (same measure) |",
        "|---|---|---|---|---|",
        *DEV_ONLY_ROWS,
        "",
        "## Hybrid (default) by category",
        "",
        HEADER,
        *(_row(name, scores) for name, scores in default.by("category").items() if scores.questions),
        "",
        "Held-out questions only:",
        "",
        HEADER,
        *(
            _row(name, scores)
            for name, scores in Run("held-out", _outcomes(default, "held_out")).by("category").items()
            if scores.questions
        ),
        "",
        "## Hybrid (default) by department",
        "",
        HEADER,
        *(_row(name, scores) for name, scores in default.by("department").items()),
        "",
        "## Version traps",
        "",
        "Search returns effective versions only, so a superseded version can never outrank the effective one; "
        "the rank at which the effective section came back:",
        "",
        "| question | expected | rank | superseded chunks returned |",
        "|---|---|---|---|",
    ]
    for outcome in (o for o in default.outcomes if o.question.category == "version_trap"):
        expected = outcome.question.expected[0]
        rank = first_match(outcome.ranked, expected)
        old = sum(
            1
            for h in outcome.hits
            if h.doc_code == expected.doc_code and h.version == outcome.question.superseded_version
        )
        lines.append(f"| {outcome.question.id} | {expected.doc_code} §{expected.section} | {rank or '> 10'} | {old} |")
    lines += ["", *point_in_time_section(default.outcomes)]
    lines += [
        "",
        "## Out of scope",
        "",
        "Nothing in the corpus answers these; what came back first:",
        "",
        "| question | first chunk | score |",
        "|---|---|---|",
    ]
    for outcome in (o for o in default.outcomes if o.question.category == "out_of_scope"):
        first = outcome.hits[0] if outcome.hits else None
        shown = f"{first.doc_code} §{first.section_path[:50]}" if first else "nothing"
        lines.append(
            f"| {_short(outcome.question)} | {shown} | {first.score:.4f} |"
            if first
            else f"| {_short(outcome.question)} | nothing | |"
        )
    lines += [
        "",
        "Scores are for ordering, not relevance: each leg's scores are counted over its own candidates (in "
        "standard deviations above the lowest), so the best candidates of an out-of-scope question score as high "
        "as an answerable one's (2-5 here). The calling model has to judge relevance from the content; the server "
        "never refuses on a score threshold.",
        "",
        "## Role-restricted questions",
        "",
        "The answer exists, in a document above the asking role's ceiling:",
        "",
        "| question | role | document | its chunks returned |",
        "|---|---|---|---|",
    ]
    for outcome in (o for o in default.outcomes if o.question.category == "role_restricted"):
        codes = {e.doc_code for e in outcome.question.expected}
        returned = sum(1 for h in outcome.hits if h.doc_code in codes)
        lines.append(
            f"| {outcome.question.id} | {outcome.question.role.value} | {', '.join(sorted(codes))} | {returned} |"
        )
    lines += [
        "",
        "## Leak gate",
        "",
        "Every golden question asked as every role:",
        "",
        "| role | chunks above ceiling |",
        "|---|---|",
        *(f"| {role} | {len(found)} |" for role, found in leaks.items()),
        "",
    ]
    lines += public_section(public)
    lines += ["## Answer metrics (DeepEval)", ""]
    if answers.ran:
        lines += [
            f"{answers.reason}, over {answers.questions} answerable questions: faithfulness "
            f"{answers.faithfulness:.3f} (proposed gate ≥ {FAITHFULNESS_GATE}), answer relevancy "
            f"{answers.answer_relevancy:.3f}.",
            "",
        ]
    else:
        lines += [f"Not run: {answers.reason}.", ""]
    (folder / "report.md").write_text("\n".join(lines) + "\n")
    chart(runs, folder / "ablations.png")
    badge = {
        "schemaVersion": 1,
        "label": "recall@5 / MRR",
        "message": f"{default.overall.recall_at_5:.2f} / {default.overall.mrr:.2f}",
        "color": "brightgreen" if quality.passed and leak.passed else "red",
    }
    (folder / "badge.json").write_text(json.dumps(badge, indent=2) + "\n")


def public_section(public: dict[str, Any] | None) -> list[str]:
    lines = ["## Public test collection: NPL (Vaswani)", ""]
    if public is None:
        return [*lines, "Not run: the collection was not found (KB_VASWANI_DIR).", ""]
    lines += [
        f"{public['documents']:,} abstracts ingested through the product's pipeline as public documents, "
        f"{public['queries']} queries ({public['judged']} judged), run through the same query as the MCP tool "
        "with 1,000 results.",
        "",
        'Development and held-out queries: the fixed split of evals/split.py (held out when sha256("npl:" + '
        "query number) is odd); tuning read the development queries only.",
        "",
        "| run | MAP | dev MAP | held-out MAP | nDCG@10 | P@10 | R@100 |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, values in public["runs"].items():
        lines.append(
            f"| {name} | {values['MAP']:.3f} | {values.get('dev MAP', float('nan')):.3f} | "
            f"{values.get('held_out MAP', float('nan')):.3f} | {values['nDCG@10']:.3f} | {values['P@10']:.3f} | "
            f"{values['R@100']:.3f} |"
        )
    for name, values in public["baselines"].items():
        cells = [f"{values[k]:.3f}" if k in values else "–" for k in ("MAP", "nDCG@10", "P@10", "R@100")]
        lines.append(f"| published: {name} | {cells[0]} | – | – | {' | '.join(cells[1:])} |")
    return [*lines, ""]


POINT_IN_TIME_START = "<!-- point-in-time: python -m evals.run --only point-in-time rewrites this section -->"
POINT_IN_TIME_END = "<!-- /point-in-time -->"


def point_in_time_section(outcomes: list[Outcome]) -> list[str]:
    """Questions asked as of a date (`as_of`): each of the corpus's version pairs, before and after the later
    version took effect. A chunk counts only when it is of the version in force on that date."""
    asked = [o for o in outcomes if o.question.category == "point_in_time"]
    if not asked:
        return []
    recall5 = mean([recall_at(o.ranked_in_version, o.question.expected, 5) for o in asked])
    mrr = mean([reciprocal_rank(o.ranked_in_version, o.question.expected) for o in asked])
    wrong = sum(o.wrong_version_chunks for o in asked)
    lines = [
        POINT_IN_TIME_START,
        "## Point in time",
        "",
        f"{len(asked)} questions asked with `as_of` (hybrid, as the question's role), two per version pair in "
        "`corpus/`: one dated before the later version took effect, one after. A chunk counts only when it is "
        f"of the version in force on that date. recall@5 {recall5:.3f}, MRR {mrr:.3f}; chunks of the other "
        f"version returned: {wrong}. (Not part of the gates above.)",
        "",
        "| question | as of | expected | rank | chunks of the other version |",
        "|---|---|---|---|---|",
    ]
    for outcome in asked:
        q, expected = outcome.question, outcome.question.expected[0]
        rank = first_match(outcome.ranked_in_version, expected)
        lines.append(
            f"| {q.id} | {q.as_of} | {expected.doc_code}@{q.expected_version} §{expected.section} | "
            f"{rank or '> 10'} | {outcome.wrong_version_chunks} |"
        )
    return [*lines, POINT_IN_TIME_END]


def replace_point_in_time_section(report: Path, outcomes: list[Outcome]) -> None:
    """Rewrite only the point-in-time section of an existing report (`--only point-in-time`)."""
    text = report.read_text()
    start, end = text.find(POINT_IN_TIME_START), text.find(POINT_IN_TIME_END)
    section = "\n".join(point_in_time_section(outcomes))
    if start >= 0 and end > start:
        text = text[:start] + section + text[end + len(POINT_IN_TIME_END) :]
    else:  # a report written before the section existed: it goes before "Out of scope"
        text = text.replace("## Out of scope", section + "\n\n## Out of scope", 1)
    report.write_text(text)


def _named(runs: list[Run], name: str) -> str:
    found = [r for r in runs if r.name == name]
    return f"{found[0].overall.recall_at_5:.3f}" if found else "n/a"


def _short(question: GoldenQuestion) -> str:
    return question.question if len(question.question) < 70 else question.question[:67] + "…"
