"""Point-in-time reads (as_of) beside the current path, in the same run, through the function the MCP tool calls.

At corpus size: the golden questions, each as its own role, current and as of two dates (one when the
earlier version of each corpus version pair was in force, one when the current versions were). At scale:
the synthetic corpus given a version history first (`add_history`: a share of its documents get an earlier,
superseded version with its own chunks), then the marker-term cases current and as of both dates.

The current path's statement is the one it was before point-in-time reads existed (it never reads the
versions table); these figures show what asking for a date costs on top of it.
"""

from __future__ import annotations

import asyncio
import time
from datetime import date
from typing import Any

import numpy as np
import psycopg

from bench.synthetic import MARKERS
from bench.timing import summary
from kb_core.db.targets import DatabaseTargets
from kb_core.roles import Role
from kb_server.db.pools import RoleConnections
from kb_server.search import hybrid_search

# The corpus's earlier versions took effect in 2024-2025 and their successors in 2026: mid-2025 reads the
# earlier version of every pair, and 2026-11-01 the current ones (through the as_of statement).
CORPUS_DATES = {"as_of 2025-07-01": date(2025, 7, 1), "as_of 2026-11-01": date(2026, 11, 1)}
# Synthetic documents are effective from 2026-01-01; add_history gives a share of them a version effective
# from 2025-01-01.
SCALE_DATES = {"as_of 2025-06-01": date(2025, 6, 1), "as_of 2026-06-01": date(2026, 6, 1)}
HISTORY_SHARE = 0.10
SCALE_ROLE = Role.DEMO_READONLY
SCALE_FILTERS = {"none": None, "1%": ["finance"]}
TOP_K = 8


async def _time_modes(connections, cases, modes: dict[str, date | None], repeat: int) -> dict[str, Any]:
    """Every case once untimed per mode, then `repeat` timed rounds with the modes interleaved, so that no mode
    has the cache to itself."""
    samples: dict[str, list[float]] = {mode: [] for mode in modes}
    rows: dict[str, list[int]] = {mode: [] for mode in modes}
    for as_of in modes.values():
        for role, text, vector, departments in cases:
            conn = await connections.get(role)
            await hybrid_search(conn, role, text=text, vector=vector, departments=departments, limit=TOP_K, as_of=as_of)
    for _ in range(repeat):
        for role, text, vector, departments in cases:
            conn = await connections.get(role)
            for mode, as_of in modes.items():
                started = time.perf_counter()
                hits = await hybrid_search(
                    conn, role, text=text, vector=vector, departments=departments, limit=TOP_K, as_of=as_of
                )
                samples[mode].append((time.perf_counter() - started) * 1000)
                rows[mode].append(len(hits))
    return {mode: {"sql_ms": summary(samples[mode]), "rows_min": min(rows[mode])} for mode in modes}


def corpus_benchmark(targets: DatabaseTargets, embedder, questions, repeat: int) -> dict[str, Any]:
    vectors = [embedder.embed_query(q.question) for q in questions]
    cases = [(q.role, q.question, v, None) for q, v in zip(questions, vectors, strict=True)]

    async def run() -> dict[str, Any]:
        async with RoleConnections(targets.server) as connections:
            return await _time_modes(connections, cases, {"current": None, **CORPUS_DATES}, repeat)

    return {"questions": len(questions), "modes": asyncio.run(run())}


def add_history(superuser: str, share: float = HISTORY_SHARE) -> dict[str, Any]:
    """Give every 1/share-th synthetic document an earlier version (1.0 becomes the successor of 0.9, effective
    2025-01-01, superseded) with copies of its chunks; return how many documents and chunks that added."""
    step = round(1 / share)
    started = time.perf_counter()
    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute(
            """INSERT INTO kb.documents (doc_code, version, version_key, title, status, effective_date, owner,
                   department, classification, regulatory_refs, source_uri, source_format, source_sha256)
               SELECT doc_code, '0.9', ARRAY[0, 9], title, 'superseded', DATE '2025-01-01', owner, department,
                      classification, regulatory_refs, 'synthetic-earlier://' || doc_id, source_format,
                      lpad(to_hex(doc_id + 1000000000), 64, '0')
               FROM kb.documents WHERE source_uri LIKE 'synthetic://%%' AND doc_id %% %s = 0""",
            (step,),
        )
        chunks = conn.execute(
            """INSERT INTO kb.chunks (doc_id, classification, department, is_effective, ordinal, section_path, anchor,
                   title, content, token_count, embedding_sha256, embedding)
               SELECT e.doc_id, c.classification, c.department, false, c.ordinal, c.section_path, c.anchor, c.title,
                      c.content, c.token_count, c.embedding_sha256, c.embedding
               FROM kb.documents e
               JOIN kb.documents d ON d.doc_code = e.doc_code AND d.version = '1.0'
               JOIN kb.chunks c ON c.doc_id = d.doc_id
               WHERE e.source_uri LIKE 'synthetic-earlier://%%'"""
        ).rowcount
        (documents,) = conn.execute(
            "SELECT count(*) FROM kb.documents WHERE source_uri LIKE 'synthetic-earlier://%%'"
        ).fetchone() or (0,)
        conn.execute("VACUUM ANALYZE kb.documents")
        conn.execute("VACUUM ANALYZE kb.chunks")
    return {"documents": int(documents), "chunks": int(chunks), "seconds": round(time.perf_counter() - started, 1)}


def scale_benchmark(superuser: str, server: str, vectors: np.ndarray, repeat: int) -> dict[str, Any]:
    """The synthetic corpus with a version history added: each marker term and filter, current and as of."""
    result: dict[str, Any] = {"history": add_history(superuser), "role": SCALE_ROLE.value}

    async def run() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with RoleConnections(server) as connections:
            for term_kind, (term, _) in MARKERS.items():
                for filter_name, departments in SCALE_FILTERS.items():
                    cases = [(SCALE_ROLE, term, v, departments) for v in vectors]
                    modes = {"current": None, **SCALE_DATES}
                    out[f"{term_kind} term, filter {filter_name}"] = await _time_modes(
                        connections, cases, modes, repeat
                    )
        return out

    result["cases"] = asyncio.run(run())
    return result


def render(versions: dict[str, Any]) -> list[str]:
    """The bench/results.md section."""
    lines = ["## Point in time (as_of)", ""]
    corpus = versions.get("corpus")
    if corpus:
        modes = corpus["modes"]
        lines += [
            f"Corpus size: {corpus['questions']} golden questions, each as its own role, through `hybrid_search`; "
            "the modes interleaved in each round. 2025-07-01 reads the earlier version of each of the corpus's "
            "version pairs; 2026-11-01 the current ones, through the as_of statement.",
            "",
            "| mode | hybrid SQL min / p50 / p95 ms | fewest rows |",
            "|---|---|---|",
            *[f"| {mode} | {_ms(m['sql_ms'])} | {m['rows_min']} |" for mode, m in modes.items()],
            "",
        ]
    for scale in versions.get("scale", []):
        history = scale["history"]
        lines += [
            f"{scale['chunks']:,} synthetic chunks as `{scale['role']}`, after giving {history['documents']:,} "
            f"documents an earlier version ({history['chunks']:,} more chunks, outside the partial indexes). "
            "2025-06-01 reads those earlier versions for them; 2026-06-01 reads every current version.",
            "",
            "| case | current p50 / p95 ms | " + " | ".join(f"{d} p50 / p95 ms" for d in SCALE_DATES) + " |",
            "|---|---|" + "---|" * len(SCALE_DATES),
        ]
        for case, modes in scale["cases"].items():
            cells = [_p50_p95(modes["current"]["sql_ms"])] + [_p50_p95(modes[d]["sql_ms"]) for d in SCALE_DATES]
            lines.append(f"| {case} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def _ms(stats: dict[str, float]) -> str:
    return f"{stats['min']:.1f} / {stats['p50']:.1f} / {stats['p95']:.1f}" if stats.get("n") else "–"


def _p50_p95(stats: dict[str, float]) -> str:
    return f"{stats['p50']:.1f} / {stats['p95']:.1f}" if stats.get("n") else "–"
