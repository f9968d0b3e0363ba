"""`python -m evals.tune`: choose BM25's parameters and the fusion on the development split only.

Reads the databases `python -m evals.run` built (eval_corpus, eval_vaswani; run it first). Every variant is
measured on the development golden questions and the development NPL queries (evals/split.py) and written
to evals/tuning.md; the held-out parts are not read here. On the golden questions every fusion variant runs
through the SQL itself; on NPL (1,000 results per query) each leg's ranking is computed once through the
served query and fused with the SQL's formula in Python (NPL has no tables and its queries name no
identifiers, so the SQL's table dedupe and identifier grades do not apply there).

    python -m evals.tune                 # BM25 grid, then the fusion grid
    python -m evals.tune --skip-bm25     # the fusion grid only
    python -m evals.tune --joint         # BM25 x fusion x normalisation x candidates together (evals/tuning.json)
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from evals import vaswani
from evals.golden import GoldenQuestion, load_golden
from evals.metrics import Ranked, mean, recall_at, reciprocal_rank
from evals.retrieval import run_questions
from evals.split import golden_part, npl_part
from kb_core.db.embedded import EmbeddedPostgres
from kb_core.embedders.local import LocalEmbedder
from kb_server.search import DEFAULT_BM25, RRF_K, Bm25, Fusion

REPO = Path(__file__).resolve().parents[1]
STATE = REPO / ".kb-eval"

K1S = (0.9, 1.2, 1.5, 2.0)
BS = (0.3, 0.5, 0.75, 0.9)
TITLE_WEIGHTS = (1.0, 2.0)
RRF_KS = (10, 20, 30, 60, 100)
TEXT_WEIGHTS = (0.5, 0.75, 1.0, 1.5)
FIRST_BONUSES = (0.0, 0.01, 0.02)
# The convex combination: the vector leg's weight (the text leg gets the rest); identifier_bonus 2 keeps a chunk
# holding a named identifier above any weighted sum (at most 1 plus the bonuses).
CONVEX_VECTOR_WEIGHTS = (0.4, 0.5, 0.6, 0.7)
CONVEX_FIRST_BONUSES = (0.0, 0.05)
# The joint grid: BM25 and the convex fusion chosen together, since a flatter BM25 (lower b) changes how the text
# leg's scores spread and so what weight suits it. Golden at the served 50 candidates per leg and at 100; NPL always
# ranks 1,000.
JOINT_VECTOR_WEIGHTS = (0.5, 0.6, 0.7)
JOINT_METHODS = {"convex": 2.0, "zscore": 10.0}  # normalisation -> the identifier bonus that keeps identifiers first
JOINT_CANDIDATES = (50, 100)


def fusion_grid() -> list[Fusion]:
    rrf = [Fusion(k, 1.0, w, bonus) for k, w, bonus in itertools.product(RRF_KS, TEXT_WEIGHTS, FIRST_BONUSES)]
    convex = [
        Fusion(RRF_K, a, round(1.0 - a, 2), bonus, 2.0, "convex")
        for a, bonus in itertools.product(CONVEX_VECTOR_WEIGHTS, CONVEX_FIRST_BONUSES)
    ]
    return rrf + convex


def objective(measured: dict[str, float]) -> float | None:
    """What the choice maximises: golden dev MRR and NPL dev MAP, weighed alike (None until both are measured)."""
    if "golden_mrr" not in measured or "npl_map" not in measured:
        return None
    return measured["golden_mrr"] + measured["npl_map"]


def best(grid: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    scored = [v for v in grid.values() if objective(v) is not None]
    return max(scored, key=lambda v: objective(v) or 0.0) if scored else None


def fuse(
    legs: dict[str, list[tuple[Any, float]]], fusion: Fusion, depth: int, bonus: dict[Any, float] | None = None
) -> list[Any]:
    """The SQL's fusion (src/kb_server/search.py), over each leg's ranked (key, score) pairs; `bonus` adds a
    key's identifier bonus (the SQL's `exact`), which the golden questions need and NPL does not."""
    scores, best = fused_scores(legs, fusion, bonus)
    return sorted(scores, key=lambda key: (-scores[key], best[key]))[:depth]


def fused_scores(
    legs: dict[str, list[tuple[Any, float]]], fusion: Fusion, bonus: dict[Any, float] | None = None
) -> tuple[dict[Any, float], dict[Any, int]]:
    """Each key's fused score, and its best rank in any leg (the SQL's tie-break)."""
    weights = {"vector": fusion.vector_weight, "text": fusion.text_weight}
    scores: dict[Any, float] = {}
    best: dict[Any, int] = {}
    for leg, ranked in legs.items():
        raw = [score for _, score in ranked]
        low, high = (min(raw), max(raw)) if raw else (0.0, 0.0)
        spread = (high - low) if fusion.method == "convex" else float(np.std(raw)) if raw else 0.0
        for rank, (key, score) in enumerate(ranked, start=1):
            if fusion.method in ("convex", "zscore"):
                part = weights[leg] * ((score - low) / spread if spread > 0 else 1.0)
            else:
                part = weights[leg] / (fusion.rrf_k + rank)
            first = fusion.first_bonus if rank == 1 else 0.0
            scores[key] = scores.get(key, 0.0) + part + first
            best[key] = min(best.get(key, rank), rank)
    for key, extra in (bonus or {}).items():
        if key in scores:
            scores[key] += extra
    return scores, best


def golden_scores(questions: Sequence[GoldenQuestion], ranked: dict[str, list[Ranked]]) -> tuple[float, float]:
    scored = [q for q in questions if q.answerable]
    return (
        mean([recall_at(ranked[q.id], q.expected, 5) for q in scored]),
        mean([reciprocal_rank(ranked[q.id], q.expected) for q in scored]),
    )


async def golden_legs(server: str, embedder, questions, bm25: Bm25, vectors) -> dict[str, dict[str, list]]:
    """Per question, each leg's 50 candidates in order, as keys a fusion can combine."""
    out: dict[str, dict[str, list]] = {q.id: {} for q in questions}
    for mode in ("vector", "text"):
        run = await run_questions(server, embedder, questions, mode=mode, k=50, bm25=bm25, vectors=vectors)
        for outcome in run.outcomes:
            out[outcome.question.id][mode] = [(h.doc_code, h.version, h.section_path, h.content) for h in outcome.hits]
    return out


def npl_legs(server: str, embedder, collection, ids, bm25: Bm25, vectors) -> dict[str, dict[str, list]]:
    out: dict[str, dict[str, list]] = {qid: {} for qid in ids}
    for mode in ("vector", "text"):
        rankings = asyncio.run(
            vaswani.run_scored(
                server,
                embedder,
                collection,
                mode=mode,
                text_query="or",
                text_rank="bm25",
                query_ids=ids,
                bm25=bm25,
                vectors=vectors,
            )
        )
        for qid, ranked in rankings.items():
            first: dict[str, float] = {}
            for docno, score in ranked:  # a document's best chunk stands for it, as in the measured ranking
                first.setdefault(docno, score or 0.0)
            out[qid][mode] = list(first.items())
    return out


def joint(results: dict[str, Any], corpus_server, npl_server, model, dev, collection, npl_dev, parts) -> None:
    """Every BM25 setting x convex fusion x normalisation (x candidates on golden), into results["joint"]."""
    grid = results.setdefault("joint", {})
    golden_vectors = {q.id: model.embed_query(q.question) for q in dev}
    npl_vectors = {qid: model.embed_query(collection.queries[qid]) for qid in npl_dev}
    for k1, b in itertools.product(K1S, BS):
        bm25 = Bm25(k1, b, 1.0)
        npl = npl_legs(npl_server, model, collection, npl_dev, bm25, npl_vectors) if "npl" in parts else None
        for (method, bonus_for_identifiers), weight, bonus in itertools.product(
            JOINT_METHODS.items(), JOINT_VECTOR_WEIGHTS, CONVEX_FIRST_BONUSES
        ):
            fusion = Fusion(RRF_K, weight, round(1.0 - weight, 2), bonus, bonus_for_identifiers, method)
            npl_map = None
            if npl is not None:
                fused = {qid: fuse(legs, fusion, vaswani.DEPTH) for qid, legs in npl.items()}
                npl_map = vaswani.measures(fused, collection.qrels, npl_dev)["MAP"]
            for candidates in JOINT_CANDIDATES if "golden" in parts else ():
                entry = {"bm25": asdict(bm25), "fusion": asdict(fusion), "candidates": candidates, "npl_map": npl_map}
                run = asyncio.run(
                    run_questions(
                        corpus_server,
                        model,
                        dev,
                        fusion=fusion,
                        bm25=bm25,
                        vectors=golden_vectors,
                        candidates=candidates,
                    )
                )
                entry["golden_recall_at_5"], entry["golden_mrr"] = run.overall.recall_at_5, run.overall.mrr
                scores = {"golden_mrr": run.overall.mrr, **({"npl_map": npl_map} if npl_map is not None else {})}
                entry["objective"] = objective(scores)
                grid[json.dumps({k: entry[k] for k in ("bm25", "fusion", "candidates")})] = entry
                print(json.dumps(entry), flush=True)
    chosen = best(grid)
    results["joint_best"] = {k: chosen[k] for k in ("bm25", "fusion", "candidates")} if chosen else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-bm25", action="store_true")
    parser.add_argument("--skip-fusion", action="store_true")
    parser.add_argument("--joint", action="store_true", help="only the joint BM25 x fusion grid")
    parser.add_argument("--parts", default="golden,npl", help="which development sets to measure")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    from psycopg import conninfo

    superuser = EmbeddedPostgres(STATE).start()
    corpus_server = conninfo.make_conninfo(superuser, dbname="eval_corpus", user="kb_server", password="")
    npl_server = conninfo.make_conninfo(superuser, dbname="eval_vaswani", user="kb_server", password="")
    model = LocalEmbedder()
    model.load()
    dev = golden_part(load_golden(), "dev")
    collection = vaswani.load()
    npl_dev = [qid for qid in npl_part(collection.queries, "dev") if qid in collection.qrels]
    out_path = REPO / "evals" / "tuning.json"
    results: dict[str, Any] = json.loads(out_path.read_text()) if out_path.exists() else {}
    results["split"] = {"golden_dev_questions": len(dev), "npl_dev_queries": len(npl_dev)}

    def save() -> None:
        out_path.write_text(json.dumps(results, indent=1) + "\n")

    if args.joint:
        joint(results, corpus_server, npl_server, model, dev, collection, npl_dev, parts)
        save()
        print(json.dumps({"joint_best": results["joint_best"]}))
        return 0

    if not args.skip_bm25:
        grid = results.setdefault("bm25", {})
        for k1, b, title in itertools.product(K1S, BS, TITLE_WEIGHTS):
            bm25 = Bm25(k1, b, title)
            entry = grid.setdefault(json.dumps(asdict(bm25)), {"bm25": asdict(bm25)})
            if "golden" in parts:
                run = asyncio.run(run_questions(corpus_server, model, dev, mode="text", bm25=bm25))
                entry.update(golden_recall_at_5=run.overall.recall_at_5, golden_mrr=run.overall.mrr)
            if "npl" in parts:
                rankings = asyncio.run(
                    vaswani.run(
                        npl_server,
                        model,
                        collection,
                        mode="text",
                        text_query="or",
                        text_rank="bm25",
                        query_ids=npl_dev,
                        bm25=bm25,
                    )
                )
                entry["npl_map"] = vaswani.measures(rankings, collection.qrels, npl_dev)["MAP"]
            entry["objective"] = objective(entry)
            print(json.dumps(entry), flush=True)
            save()
        chosen = best(grid)
        results["bm25_best"] = chosen["bm25"] if chosen else None
        save()

    if args.skip_fusion:
        return 0
    bm25 = Bm25(**(results.get("bm25_best") or asdict(DEFAULT_BM25)))
    grid = results.setdefault("fusion", {})
    measured = {json.dumps(asdict(fusion)) for fusion in fusion_grid()}
    for stale in set(grid) - measured:  # a variant no longer in the grid (or written before a field was added)
        del grid[stale]
    golden_vectors = {q.id: model.embed_query(q.question) for q in dev}
    npl = None
    if "npl" in parts:
        npl_vectors = {qid: model.embed_query(collection.queries[qid]) for qid in npl_dev}
        npl = npl_legs(npl_server, model, collection, npl_dev, bm25, npl_vectors)
    for fusion in fusion_grid():
        entry = grid.setdefault(json.dumps(asdict(fusion)), {"fusion": asdict(fusion)})
        entry["bm25"] = asdict(bm25)
        if "golden" in parts:  # through the SQL itself: it also applies the identifier grades and table dedupe
            run = asyncio.run(
                run_questions(corpus_server, model, dev, fusion=fusion, bm25=bm25, vectors=golden_vectors)
            )
            entry["golden_recall_at_5"], entry["golden_mrr"] = run.overall.recall_at_5, run.overall.mrr
            print(json.dumps(entry), flush=True)
        if npl is not None:
            fused = {qid: fuse(legs, fusion, vaswani.DEPTH) for qid, legs in npl.items()}
            entry["npl_map"] = vaswani.measures(fused, collection.qrels, npl_dev)["MAP"]
        entry["objective"] = objective(entry)
    chosen = best(grid)
    results["fusion_best"] = chosen["fusion"] if chosen else None
    save()
    print(json.dumps({"bm25_best": results.get("bm25_best"), "fusion_best": results["fusion_best"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
