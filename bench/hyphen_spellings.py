"""`python -m bench.hyphen_spellings`: what looking up a question's words with and without their hyphens
(sql/013: one index probe into kb.lexeme_stats per word) costs the hybrid statement, timed interleaved with
the lookup turned off on the same database. Corpus size (the golden questions, each as its own role) and a
synthetic scale (rare, medium and common terms under the three department filters). Writes
bench/hyphen_spellings.md.

    python -m bench.hyphen_spellings --scale 100000 --more-scales 1000000
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import psycopg
from evals.golden import load_golden
from evals.run import fresh_database, reusable_database

from bench.scale import FILTERS, ROLE
from bench.synthetic import MARKERS, SyntheticCorpus, load, query_vectors
from bench.text_leg import REPO, fmt, side_by_side_setup, time_cases
from kb_core.db.embedding_space import EmbeddingSpace
from kb_core.embedders.local import LocalEmbedder
from kb_server.search import hybrid_search

OFF, ON = "without the spellings", "with them (served)"
VARIANTS = {
    OFF: lambda: partial(hybrid_search, hyphen_spellings=False),
    ON: lambda: partial(hybrid_search, hyphen_spellings=True),
}


def main(argv: list[str] | None = None) -> int:
    args, superuser, model = side_by_side_setup(__doc__, argv, more_scales=True)
    lines = [
        "# A question's words with and without their hyphens: the cost",
        "",
        "Produced by `python -m bench.hyphen_spellings`; do not edit by hand. Both timed interleaved on the same "
        "database, so the shared machine's load weighs on both alike; hybrid SQL in one round trip; min / p50 / "
        "p95 ms, from the client.",
        "",
        f"| | {OFF} | {ON} | p95 with ÷ without |",
        "|---|---|---|---|",
    ]
    corpus = reusable_database(superuser, "eval_corpus")
    if corpus is not None:
        questions = load_golden()
        cases: list[tuple[Any, ...]] = [(q.role, q.question, model.embed_query(q.question), None) for q in questions]
        timed = asyncio.run(time_cases(corpus.server, cases, args.rounds, VARIANTS))
        lines.append(_row(f"corpus size: {len(questions)} golden questions × {args.rounds}, each as its role", timed))
        print(lines[-1], flush=True)
    for scale in [args.scale, *args.more_scales]:
        lines += _at_scale(superuser, model, scale, args.rounds)
    (REPO / "bench" / "hyphen_spellings.md").write_text("\n".join(lines) + "\n")
    return 0


def _at_scale(superuser: str, model: LocalEmbedder, scale: int, rounds: int) -> list[str]:
    """The synthetic cases at `scale` chunks, each a row; the database is dropped after."""
    rows = []
    spec = SyntheticCorpus(chunks=scale, dimensions=384)
    db = fresh_database(superuser, f"bench_hyphens_{scale}", EmbeddingSpace(model.space.model, 384))
    load(db.owner, spec)
    vectors = query_vectors(spec, 20)
    for kind, (term, _) in MARKERS.items():
        for filter_name, departments in FILTERS.items():
            cases = [(ROLE, term, v, departments) for v in vectors]
            timed = asyncio.run(time_cases(db.server, cases, rounds, VARIANTS))
            rows.append(_row(f"{scale:,} chunks: {kind} term, filter {filter_name}", timed))
            print(rows[-1], flush=True)
    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE bench_hyphens_{scale} WITH (FORCE)")
    return rows


def _row(case: str, timed: dict[str, dict[str, float]]) -> str:
    return f"| {case} | {fmt(timed[OFF])} | {fmt(timed[ON])} | {timed[ON]['p95'] / timed[OFF]['p95']:.2f} |"


if __name__ == "__main__":
    raise SystemExit(main())
