"""Vectors in the row or in TOAST: `python -m bench.vector_storage --chunks 100000 --dims 1024`.

A 1,024-dimension vector is 4 KB, over PostgreSQL's 2 KB TOAST threshold, so with the column's default storage
(EXTENDED; vectors do not compress) each one lives out of line and every exact distance the search computes
(the re-ranked candidates, a small department filter's chunks) first fetches it from the TOAST table. SET
STORAGE MAIN keeps it in the row whenever the row fits a page. Two copies of the same synthetic chunks, one
each way, and the hybrid query as served on both, alternating per case so that the machine's load falls on
both alike; then each one's size. The result is merged into bench/results.md as its own section.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path
from statistics import median
from typing import Any

import psycopg
from evals.run import fresh_database
from pgvector.psycopg import register_vector_async

from bench import parse, parse_text
from bench.database import start_database
from bench.scale import FILTERS, ROLE, _ours, _timed
from bench.synthetic import MARKERS, SyntheticCorpus, load, query_vectors
from kb_core.db.embedded import EmbeddedPostgres
from kb_core.db.embedding_space import EmbeddingSpace
from kb_core.db.targets import reader_conninfo

REPO = Path(__file__).resolve().parents[1]
STORAGES = ("EXTENDED", "MAIN")  # the default first


def _sizes(owner: str) -> dict[str, float]:
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE kb.chunks")
        heap, toast = conn.execute(
            "SELECT sum(pg_relation_size(c.oid)), sum(coalesce(pg_total_relation_size(c.reltoastrelid), 0)) "
            "FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid WHERE i.inhparent = 'kb.chunks'::regclass"
        ).fetchone() or (0, 0)
    return {"heap_mb": round(float(heap) / 2**20, 1), "toast_mb": round(float(toast) / 2**20, 1)}


def run(superuser: str, chunks: int, dims: int, *, queries: int, repeat: int) -> dict[str, Any]:
    spec = SyntheticCorpus(chunks=chunks, dimensions=dims)
    servers, sizes = {}, {}
    for storage in STORAGES:
        db = fresh_database(superuser, f"bench_storage_{storage.lower()}", EmbeddingSpace("synthetic", dims))
        with psycopg.connect(db.owner, autocommit=True) as conn:
            conn.execute(f"ALTER TABLE kb.chunks ALTER COLUMN embedding SET STORAGE {storage}")
        load(db.owner, spec)
        sizes[storage] = _sizes(db.owner)
        servers[storage] = reader_conninfo(db.server, ROLE)
    vectors = query_vectors(spec, queries)

    async def timed() -> dict[str, Any]:
        conns = {}
        for storage, info in servers.items():
            conns[storage] = await psycopg.AsyncConnection.connect(info, autocommit=True)
            await register_vector_async(conns[storage])
        out: dict[str, Any] = {}
        for term_kind, (term, _) in MARKERS.items():
            for filter_name, departments in FILTERS.items():
                cases = [(v, term, departments) for v in vectors]
                runs: dict[str, list[dict[str, float]]] = {s: [] for s in STORAGES}
                for order in (STORAGES, STORAGES[::-1]):
                    for storage in order:
                        measured, _ = await _timed(_ours, conns[storage], cases, repeat)
                        runs[storage].append(measured)
                out[f"{term_kind} term, filter {filter_name}"] = {
                    s: {"p50": round(median(m["p50"] for m in r), 1), "p95": round(max(m["p95"] for m in r), 1)}
                    for s, r in runs.items()
                }
        for conn in conns.values():
            await conn.close()
        return out

    before = os.getloadavg()[0]
    queries_ms = asyncio.run(timed())
    with psycopg.connect(superuser, autocommit=True) as conn:
        for storage in STORAGES:
            conn.execute(f"DROP DATABASE bench_storage_{storage.lower()} WITH (FORCE)")
    return {
        "chunks": chunks,
        "dimensions": dims,
        "sizes": sizes,
        "queries": queries_ms,
        "load": [round(before, 2), round(os.getloadavg()[0], 2)],
    }


def render(r: dict[str, Any]) -> list[str]:
    default, inline = STORAGES
    sizes = r["sizes"]
    total = {s: sizes[s]["heap_mb"] + sizes[s]["toast_mb"] for s in STORAGES}
    rows = [
        f"| {case} | {q[default]['p50']} / {q[default]['p95']} | {q[inline]['p50']} / {q[inline]['p95']} |"
        for case, q in r["queries"].items()
    ]
    worst = {s: max(q[s]["p95"] for q in r["queries"].values()) for s in STORAGES}
    return [
        "## Vectors in the row or in TOAST",
        "",
        f"By `{r['command']}`, commit {r['commit']}; load {r['load'][0]} before, {r['load'][1]} after. "
        f"{r['chunks']:,} synthetic chunks × {r['dimensions']} dimensions, twice: the embedding column as the "
        f"migrations create it ({default}: a vector over 2 KB goes out of line to TOAST) and with SET STORAGE "
        f"{inline} (kept in the row when it fits); the hybrid query as served, the two alternating per case. "
        f"Chunk tables without indexes: {default} {sizes[default]['heap_mb']:.0f} MB in rows + "
        f"{sizes[default]['toast_mb']:.0f} MB in TOAST = {total[default]:.0f} MB; {inline} "
        f"{sizes[inline]['heap_mb']:.0f} + {sizes[inline]['toast_mb']:.0f} = {total[inline]:.0f} MB "
        f"({(total[inline] / total[default] - 1) * 100:+.0f}%: a row holding a 4 KB vector leaves most of its "
        "8 KB page empty).",
        "",
        f"| case | {default} p50 / p95 ms | {inline} p50 / p95 ms |",
        "|---|---|---|",
        *rows,
        "",
        f"Worst p95: {default} {worst[default]} ms, {inline} {worst[inline]} ms. The migrations keep {default}: "
        "both 50 ms targets are met without it, and in-row vectors cost the table's size in disk and cache. "
        f"`ALTER TABLE kb.chunks ALTER COLUMN embedding SET STORAGE {inline}` then `VACUUM FULL kb.chunks` "
        "(which rewrites the rows, so it takes the table's lock for that long; no re-embedding) trades one for "
        "the other where latency matters more. At 384 dimensions a vector is 1.5 KB and is in the row either way.",
        "",
    ]


def splice(markdown: str, section: list[str]) -> str:
    """results.md with this section replaced, or put before the sizing section (after the storage one)."""
    if section[0] in markdown.split("\n"):
        return parse.splice(markdown, section)
    lines = markdown.split("\n")
    at = next((i for i, line in enumerate(lines) if line.startswith("## What to configure")), len(lines))
    return "\n".join([*lines[:at], *section, *lines[at:]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=1024)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument("--state", type=Path, default=REPO / ".kb-bench")
    parser.add_argument("--quick", action="store_true", help="tiny: checks the code runs, the timings mean nothing")
    args = parser.parse_args(argv)
    state = Path(tempfile.mkdtemp(prefix="kosha-kb-bench-")) if args.quick else args.state
    state.mkdir(exist_ok=True)
    superuser = start_database(state, tuned=not args.quick)
    try:
        measured = run(
            superuser,
            3_000 if args.quick else args.chunks,
            args.dims,
            queries=5 if args.quick else 30,
            repeat=1 if args.quick else 2,
        )
    finally:
        if args.quick:
            EmbeddedPostgres(state).stop()
            shutil.rmtree(state, ignore_errors=True)
    measured["command"] = f"python -m bench.vector_storage --chunks {args.chunks} --dims {args.dims}"
    measured["commit"] = parse_text.commit()
    results = json.loads((args.out / "results.json").read_text())
    results["vector_storage"] = measured
    (args.out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    markdown = args.out / "results.md"
    markdown.write_text(splice(markdown.read_text(), render(measured)))
    print(f"wrote {markdown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
