"""`python -m evals.row_groups [SIZE ...]`: how many rows a table's row group should hold, measured on the
development golden questions only (the held-out ones are never read here).

A table of ROW_GROUP_MIN_ROWS rows or more is also indexed as row groups (ingest.chunker), so that a question
about one row finds a chunk that is mostly that row. A group of one row is the most addressable; a bigger one
keeps more of the table's context in each vector. corpus/ is ingested once per size into its own database
(vectors cached beside the eval run's), and every development question is asked as served. Size 0 stands for no
row groups at all. The report's row (evals/report.py DEV_ONLY_ROWS) quotes this output.
"""

from __future__ import annotations

import argparse
import asyncio

from evals.cache import CachingEmbedder
from evals.golden import load_golden
from evals.report import tables_at_rank_3
from evals.retrieval import Scores, run_questions
from evals.run import CACHE, STATE, drop_database, fresh_database, ingest_corpus
from evals.split import golden_part
from ingest import chunker
from kb_core.db.embedded import EmbeddedPostgres
from kb_core.embedders.local import LocalEmbedder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", type=int, default=[0, 1, 2, 3, 4, 5], help="rows per group; 0: none")
    args = parser.parse_args(argv)
    superuser = EmbeddedPostgres(STATE).start()
    model = LocalEmbedder()
    model.load()
    embedder = CachingEmbedder(model, CACHE / "eval-vectors.npz")
    questions = [q for q in golden_part(load_golden(), "dev") if q.answerable]
    served = (chunker.ROW_GROUP_MIN_ROWS, chunker.ROWS_PER_GROUP)
    try:
        for size in args.sizes:
            # The chunker reads both at call time; no row groups is a minimum no table reaches.
            chunker.ROW_GROUP_MIN_ROWS, chunker.ROWS_PER_GROUP = (served[0], size) if size else (10**9, 1)
            db = fresh_database(superuser, f"eval_row_groups_{size}", model.space)
            ingest_corpus(db, embedder, prefix=True)
            run = asyncio.run(run_questions(db.server, model, questions, mode="hybrid", name=f"rows {size}"))
            drop_database(superuser, f"eval_row_groups_{size}")
            scores = Scores.of(run.outcomes)
            top3, tables = tables_at_rank_3(run)
            label = "no row groups" if size == 0 else f"{size} rows per group"
            mark = " (served)" if size == served[1] else ""
            print(
                f"{label}{mark}: recall@5 {scores.recall_at_5:.3f} MRR {scores.mrr:.3f}; "
                f"table questions at rank ≤ 3: {top3} of {tables}",
                flush=True,
            )
    finally:
        chunker.ROW_GROUP_MIN_ROWS, chunker.ROWS_PER_GROUP = served
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
