"""`python -m bench.text_leg`: what the BM25 text leg (with the identifier path and the table dedupe) costs
against the statement it replaced (src/kb_server/search.py as of commit BEFORE, read from git), timed side
by side on the same database in the same minutes, so
the machine's load (shared cores) weighs on both alike. Corpus size (the golden questions, each as its own
role) and a synthetic scale (bench/synthetic.py: rare, medium and common terms under the three department
filters); hybrid SQL in one round trip, as served. Writes bench/text_leg.md.

    python -m bench.text_leg --scale 100000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from evals.golden import load_golden
from evals.run import fresh_database, reusable_database

from bench.scale import FILTERS, ROLE, TOP_K
from bench.synthetic import MARKERS, SyntheticCorpus, load, query_vectors
from bench.timing import summary
from kb_core.db.embedded import EmbeddedPostgres
from kb_core.db.embedding_space import EmbeddingSpace
from kb_core.embedders.local import LocalEmbedder
from kb_server.db.pools import RoleConnections
from kb_server.search import hybrid_search

REPO = Path(__file__).resolve().parents[1]
BEFORE = "c89ca4e"  # the last commit with the ts_rank text leg


def _before_search() -> Any:
    """The search function as it was at BEFORE, from git, beside today's."""
    import importlib.util
    import subprocess
    import tempfile

    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{BEFORE}:src/kb_server/search.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "search_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("search_before", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["search_before"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.hybrid_search


VARIANTS = {"before (ts_rank)": _before_search, "now (BM25)": lambda: hybrid_search}


async def time_cases(
    server: str, cases: list[tuple[Any, ...]], rounds: int, variants: dict[str, Any] = VARIANTS
) -> dict[str, dict[str, float]]:
    """min / p50 / p95 ms of each variant's search (a function making it) over `cases` (role, text, vector,
    departments), the variants interleaved case by case so that both see the same load."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    searches = {name: make() for name, make in variants.items()}
    async with RoleConnections(server) as connections:
        for role, text, vector, departments in cases:  # warm-up, untimed
            for search in searches.values():
                await search(
                    await connections.get(role), role, text=text, vector=vector, departments=departments, limit=TOP_K
                )
        order = list(searches.items())
        for _ in range(rounds):
            for role, text, vector, departments in cases:
                conn = await connections.get(role)
                # Interleaved, so that both see the same load, and each first in turn: the first of a pair reads
                # what the second then finds cached (at 1M chunks that made the second 10-40% faster).
                order.reverse()
                for name, search in order:
                    started = time.perf_counter()
                    await search(conn, role, text=text, vector=vector, departments=departments, limit=TOP_K)
                    samples[name].append((time.perf_counter() - started) * 1000)
    return {name: summary(values) for name, values in samples.items()}


def side_by_side_setup(
    doc: str | None, argv: list[str] | None, *, more_scales: bool = False
) -> tuple[argparse.Namespace, str, LocalEmbedder]:
    """--scale and --rounds (and --more-scales, comma-separated), the eval databases' server (its superuser) and
    the local model, loaded."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    if more_scales:
        parser.add_argument("--more-scales", type=lambda s: [int(x) for x in s.split(",") if x], default=[])
    args = parser.parse_args(argv)
    superuser = EmbeddedPostgres(REPO / ".kb-eval").start()
    model = LocalEmbedder()
    model.load()
    return args, superuser, model


def main(argv: list[str] | None = None) -> int:
    args, superuser, model = side_by_side_setup(__doc__, argv)
    lines = [
        "# The BM25 text leg against the ts_rank text leg it replaced",
        "",
        "Produced by `python -m bench.text_leg`; do not edit by hand. Both statements timed interleaved on the "
        "same database, so the shared machine's load weighs on both alike; min / p50 / p95 ms, from the client.",
        "",
    ]
    corpus = reusable_database(superuser, "eval_corpus")
    if corpus is not None:
        questions = load_golden()
        cases: list[tuple[Any, ...]] = [(q.role, q.question, model.embed_query(q.question), None) for q in questions]
        timed = asyncio.run(time_cases(corpus.server, cases, args.rounds))
        lines += [
            f"## Corpus size ({len(questions)} golden questions × {args.rounds}, each as its own role)",
            "",
            "| | min / p50 / p95 ms |",
            "|---|---|",
            *(f"| {name} | {fmt(s)} |" for name, s in timed.items()),
            "",
        ]
        print(lines[-4:], flush=True)
    spec = SyntheticCorpus(chunks=args.scale, dimensions=384)
    db = fresh_database(superuser, f"bench_text_{args.scale}", EmbeddingSpace(model.space.model, 384))
    build = load(db.owner, spec)
    vectors = query_vectors(spec, 20)
    lines += [
        f"## {args.scale:,} synthetic chunks",
        "",
        f"Statistics counted after the COPY in {build['text_stats_build_s']:.1f} s. Queries as {ROLE.value}, "
        f"{len(vectors)} vectors × {args.rounds}.",
        "",
        "| text term, department filter | " + " | ".join(VARIANTS) + " | p95 now ÷ before |",
        "|---|---|---|---|",
    ]
    for kind, (term, _) in MARKERS.items():
        for filter_name, departments in FILTERS.items():
            cases = [(ROLE, term, v, departments) for v in vectors]
            timed = asyncio.run(time_cases(db.server, cases, args.rounds))
            before, now = timed["before (ts_rank)"], timed["now (BM25)"]
            ratio = now["p95"] / before["p95"]
            lines.append(f"| {kind} term, filter {filter_name} | {fmt(before)} | {fmt(now)} | {ratio:.2f} |")
            print(lines[-1], flush=True)
    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE bench_text_{args.scale} WITH (FORCE)")
    (REPO / "bench" / "text_leg.md").write_text("\n".join(lines) + "\n")
    return 0


def fmt(s: dict[str, float]) -> str:
    return f"{s['min']:.1f} / {s['p50']:.1f} / {s['p95']:.1f}"


if __name__ == "__main__":
    raise SystemExit(main())
