"""`poe eval`: the golden set and the public collection, every ablation, into evals/report.md.

Fresh databases under .kb-eval/ (its own embedded PostgreSQL), built from the committed corpus/ (a fixed
snapshot, so the numbers reproduce), one with the contextual prefix and one without. Each golden question
runs through the query the MCP tool runs, as its own role; then the leak gate runs every question as
every role. The NPL (Vaswani) collection is ingested and run the same way.

    python -m evals.run                # everything (about 15 minutes on 2 cores the first time)
    python -m evals.run --skip-public  # the golden set only
    python -m evals.run --reuse        # keep databases already built by a run of the same migrations
    python -m evals.run --only point-in-time  # only the point-in-time questions, into the existing report

Tuned settings (BM25, fusion) are chosen by `python -m evals.tune` on the development split (evals/split.py);
the report gives every run on the development and the held-out parts separately.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from evals import ablations, answers, report, vaswani
from evals.cache import CachingEmbedder
from evals.gates import leak_gate, quality_gate
from evals.golden import load_golden
from evals.retrieval import Run, classifications, leaks, run_questions
from evals.split import npl_part
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


def database_targets(superuser: str, name: str) -> DatabaseTargets:
    from psycopg import conninfo

    owner = conninfo.make_conninfo(superuser, dbname=name)
    return DatabaseTargets(
        owner,
        conninfo.make_conninfo(owner, user="kb_server", password=""),
        conninfo.make_conninfo(owner, user="kb_ingest", password=""),
        f"eval database {name}",
    )


def drop_database(superuser: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def fresh_database(superuser: str, name: str, space: EmbeddingSpace) -> DatabaseTargets:
    import psycopg
    from psycopg import sql

    drop_database(superuser, name)
    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    targets = database_targets(superuser, name)
    migrate(targets.owner, space)
    return targets


def reusable_database(superuser: str, name: str) -> DatabaseTargets | None:
    """An eval database a finished run built under the current migrations, else None."""
    import psycopg

    from kb_core.db.migrations import discover_migrations

    targets = database_targets(superuser, name)
    try:
        with psycopg.connect(targets.owner) as conn:
            (applied,) = conn.execute("SELECT count(*) FROM kb.schema_migrations").fetchone() or (0,)
            (documents,) = conn.execute("SELECT count(*) FROM kb.documents").fetchone() or (0,)
    except psycopg.Error:
        return None
    return targets if applied == len(discover_migrations()) and documents else None


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
    parser.add_argument("--reuse", action="store_true", help="reuse the eval databases a previous run built")
    parser.add_argument(
        "--only",
        choices=("point-in-time",),
        help="run only these questions and rewrite only their section of the existing evals/report.md",
    )
    args = parser.parse_args(argv)
    if args.only == "point-in-time":
        return point_in_time_only()
    started = time.perf_counter()
    STATE.mkdir(exist_ok=True)
    superuser = EmbeddedPostgres(STATE).start()
    model = LocalEmbedder()
    model.load()
    embedder = CachingEmbedder(model, CACHE / "eval-vectors.npz")
    questions = load_golden()

    reused_main, reused_plain = (
        (reusable_database(superuser, "eval_corpus"), reusable_database(superuser, "eval_no_prefix"))
        if args.reuse
        else (None, None)
    )
    if reused_main is not None and reused_plain is not None:
        main_db, plain_db = reused_main, reused_plain
    else:
        print("ingesting corpus/ (with and without the contextual prefix) ...", flush=True)
        main_db = fresh_database(superuser, "eval_corpus", model.space)
        ingest_corpus(main_db, embedder, prefix=True)
        plain_db = fresh_database(superuser, "eval_no_prefix", model.space)
        ingest_corpus(plain_db, embedder, prefix=False)

    print("running the golden set ...", flush=True)
    server = main_db.server
    vectors = {q.id: model.embed_query(q.question) for q in questions}
    runs: list[Run] = []
    for name, variant in ablations.golden_runs().items():
        variant = dict(variant)
        database = plain_db if variant.pop("no_prefix", False) else main_db
        runs.append(
            asyncio.run(run_questions(database.server, model, questions, name=name, vectors=vectors, **variant))
        )
        print(f"  {name}: recall@5 {runs[-1].overall.recall_at_5:.3f} MRR {runs[-1].overall.mrr:.3f}", flush=True)
    leak_runs = {
        role.value: leaks(
            asyncio.run(run_questions(server, model, questions, role=role, vectors=vectors)),
            role,
            classifications(main_db.ingest),
        )
        for role in Role
    }

    saved = STATE / "public.json"
    public = None
    if not args.skip_public:
        public = run_public(superuser, embedder, model, reuse=args.reuse)
        saved.write_text(json.dumps(public, indent=1))
    elif saved.exists():  # the last NPL run's figures, so a golden-only rerun keeps them in the report
        public = json.loads(saved.read_text())

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


def point_in_time_only() -> int:
    """The point-in-time questions on a fresh ingest of corpus/, into their section of evals/report.md."""
    STATE.mkdir(exist_ok=True)
    superuser = EmbeddedPostgres(STATE).start()
    model = LocalEmbedder()
    model.load()
    targets = fresh_database(superuser, "eval_corpus", model.space)
    ingest_corpus(targets, CachingEmbedder(model, CACHE / "eval-vectors.npz"), prefix=True)
    questions = [q for q in load_golden() if q.category == "point_in_time"]
    run = asyncio.run(run_questions(targets.server, model, questions, name="hybrid (default)"))
    report.replace_point_in_time_section(REPO / "evals" / "report.md", run.outcomes)
    print("\n".join(report.point_in_time_section(run.outcomes)))
    return 0


def run_public(
    superuser: str, embedder: CachingEmbedder, model: LocalEmbedder, *, reuse: bool = False
) -> dict[str, Any] | None:
    try:
        collection = vaswani.load()
    except FileNotFoundError as exc:
        print(f"the NPL collection is not available ({exc}); set KB_VASWANI_DIR", file=sys.stderr)
        return None
    targets = reusable_database(superuser, "eval_vaswani") if reuse else None
    if targets is None:
        print(f"loading the NPL collection ({len(collection.documents)} abstracts) ...", flush=True)
        targets = fresh_database(superuser, "eval_vaswani", model.space)
        vaswani.bulk_load(targets.owner, embedder, collection, model=model.space.model)
        embedder.save()
    print("running the NPL queries ...", flush=True)
    vectors = {qid: model.embed_query(text) for qid, text in collection.queries.items()}
    parts = {part: npl_part(collection.qrels, part) for part in ("dev", "held_out")}
    measured = {}
    for name, variant in ablations.NPL.items():
        rankings = asyncio.run(vaswani.run(targets.server, model, collection, vectors=vectors, **variant))
        measured[name] = {
            **vaswani.measures(rankings, collection.qrels),
            **{f"{part} MAP": vaswani.measures(rankings, collection.qrels, ids)["MAP"] for part, ids in parts.items()},
        }
        print(f"  {name}: MAP {measured[name]['MAP']:.3f}", flush=True)
    return {
        "documents": len(collection.documents),
        "queries": len(collection.queries),
        "judged": len(collection.qrels),
        "runs": measured,
        "baselines": vaswani.BASELINES,
    }


if __name__ == "__main__":
    sys.exit(main())
