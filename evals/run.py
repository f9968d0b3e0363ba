"""`poe eval`: the golden set and the public collection, every ablation, into evals/report.md.

Fresh databases under .kb-eval/ (its own embedded PostgreSQL), built from the committed corpus/ (a fixed
snapshot, so the numbers reproduce), one with the contextual prefix and one without. Each golden question
runs through the query the MCP tool runs, as its own role; then the leak gate runs every question as
every role. The NPL (Vaswani) collection is ingested and run the same way.

    python -m evals.run                # everything (about 15 minutes on 2 cores the first time)
    python -m evals.run --skip-public  # the golden set only
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from evals import answers, report, vaswani
from evals.cache import CachingEmbedder
from evals.gates import leak_gate, quality_gate
from evals.golden import load_golden
from evals.retrieval import Run, classifications, leaks, run_questions
from ingest.pipeline import Ingestor, document_files, ingest_files
from kb_core.db.embedded import EmbeddedPostgres
from kb_core.db.embedding_space import EmbeddingSpace
from kb_core.db.migrations import migrate
from kb_core.db.targets import DatabaseTargets
from kb_core.embedders.local import LocalEmbedder
from kb_core.roles import Role

REPO = Path(__file__).resolve().parents[1]
STATE = REPO / ".kb-eval"
CACHE = Path.home() / ".cache" / "kosha-kb"


def fresh_database(superuser: str, name: str, space: EmbeddingSpace) -> DatabaseTargets:
    import psycopg
    from psycopg import conninfo, sql

    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    owner = conninfo.make_conninfo(superuser, dbname=name)
    targets = DatabaseTargets(
        owner,
        conninfo.make_conninfo(owner, user="kb_server", password=""),
        conninfo.make_conninfo(owner, user="kb_ingest", password=""),
        f"eval database {name}",
    )
    migrate(targets.owner, space)
    return targets


def ingest_corpus(targets: DatabaseTargets, embedder: CachingEmbedder, *, prefix: bool) -> None:
    files, _ = document_files([REPO / "corpus"])
    with Ingestor(targets.ingest, embedder, max_bytes=25_000_000, contextual_prefix=prefix) as ingestor:
        failed = [r for r in ingest_files(ingestor, files) if r.outcome == "failed"]
    embedder.save()
    if failed:
        raise SystemExit(f"the corpus did not ingest: {failed[0].source_uri}: {failed[0].reason}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-public", action="store_true", help="skip the NPL (Vaswani) collection")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    STATE.mkdir(exist_ok=True)
    superuser = EmbeddedPostgres(STATE).start()
    model = LocalEmbedder()
    model.load()
    embedder = CachingEmbedder(model, CACHE / "eval-vectors.npz")
    questions = load_golden()

    print("ingesting corpus/ (with and without the contextual prefix) ...", flush=True)
    main_db = fresh_database(superuser, "eval_corpus", model.space)
    ingest_corpus(main_db, embedder, prefix=True)
    plain_db = fresh_database(superuser, "eval_no_prefix", model.space)
    ingest_corpus(plain_db, embedder, prefix=False)

    print("running the golden set ...", flush=True)
    server = main_db.server
    runs: list[Run] = [
        asyncio.run(run_questions(server, model, questions, name="hybrid (default)")),
        asyncio.run(
            run_questions(
                server,
                model,
                questions,
                text_query="websearch",
                text_rank="ts_rank_cd",
                name="hybrid, LLD text leg (websearch AND, ts_rank_cd)",
            )
        ),
        asyncio.run(run_questions(server, model, questions, mode="vector", name="vector only")),
        asyncio.run(run_questions(server, model, questions, mode="text", name="full text only (OR, ts_rank)")),
        asyncio.run(
            run_questions(
                server, model, questions, mode="text", text_rank="ts_rank_cd", name="full text only (OR, ts_rank_cd)"
            )
        ),
        asyncio.run(
            run_questions(
                server,
                model,
                questions,
                mode="text",
                text_query="websearch",
                text_rank="ts_rank_cd",
                name="full text only (websearch AND, ts_rank_cd)",
            )
        ),
        asyncio.run(run_questions(plain_db.server, model, questions, name="hybrid, no contextual prefix")),
        asyncio.run(
            run_questions(plain_db.server, model, questions, mode="vector", name="vector only, no contextual prefix")
        ),
    ]
    levels = classifications(main_db.ingest)
    leak_runs = {
        role.value: leaks(asyncio.run(run_questions(server, model, questions, role=role)), role, levels)
        for role in Role
    }

    public = None
    if not args.skip_public:
        public = run_public(superuser, embedder, model)

    answer_report = answers.answer_metrics(runs[0])
    quality, leak = quality_gate(runs[0]), leak_gate(leak_runs)
    report.write(
        REPO / "evals",
        runs=runs,
        leaks=leak_runs,
        quality=quality,
        leak=leak,
        public=public,
        answers=answer_report,
        seconds=time.perf_counter() - started,
    )
    print(
        json.dumps(
            {
                "recall@5": round(runs[0].overall.recall_at_5, 3),
                "mrr": round(runs[0].overall.mrr, 3),
                "quality_gate": quality.passed,
                "leak_gate": leak.passed,
            }
        )
    )
    print(f"wrote evals/report.md in {time.perf_counter() - started:.0f} s")
    return 0 if quality.passed and leak.passed else 1


def run_public(superuser: str, embedder: CachingEmbedder, model: LocalEmbedder) -> dict[str, Any] | None:
    try:
        collection = vaswani.load()
    except FileNotFoundError as exc:
        print(f"the NPL collection is not available ({exc}); set KB_VASWANI_DIR", file=sys.stderr)
        return None
    print(f"ingesting the NPL collection ({len(collection.documents)} abstracts) ...", flush=True)
    targets = fresh_database(superuser, "eval_vaswani", model.space)
    with Ingestor(targets.ingest, embedder, max_bytes=1_000_000) as ingestor:
        results = vaswani.ingest(ingestor, collection)
    embedder.save()
    failed = [r for r in results if r.outcome == "failed"]
    if failed:
        raise SystemExit(f"NPL document failed: {failed[0].source_uri}: {failed[0].reason}")
    import psycopg

    with psycopg.connect(targets.owner, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    measured = {}
    for name, mode, form, rank in (
        ("full text only (OR, ts_rank)", "text", "or", "ts_rank"),
        ("full text only (websearch AND, ts_rank_cd)", "text", "websearch", "ts_rank_cd"),
        ("vector only", "vector", "or", "ts_rank"),
        ("hybrid (default)", "hybrid", "or", "ts_rank"),
        ("hybrid, LLD text leg", "hybrid", "websearch", "ts_rank_cd"),
    ):
        rankings = asyncio.run(
            vaswani.run(targets.server, model, collection, mode=mode, text_query=form, text_rank=rank)
        )
        measured[name] = vaswani.measures(rankings, collection.qrels)
    return {
        "documents": len(collection.documents),
        "queries": len(collection.queries),
        "judged": len(collection.qrels),
        "runs": measured,
        "baselines": vaswani.BASELINES,
    }


if __name__ == "__main__":
    sys.exit(main())
