"""Storage and HNSW settings chosen by measurement (`python -m bench --parts storage`).

On one synthetic database, the embedding index is rebuilt in turn as each candidate: the migrations' own
(`vector`, m 16, ef_construction 64), a `halfvec` expression index over the same `vector` column (half the
bytes per vector in the graph; the table keeps full precision, so nothing is re-embedded), and other m /
ef_construction. For each: build time, index size, and the vector leg as served (as the lowest reader role,
iterative scan, candidates re-ranked by their distance) at several ef_search values under no, 10% and 1%
department filters: recall@10 against an exact scan, and latency. "Adaptive" ef_search is read off the same
table: the smallest ef_search that reaches the recall goal for each filter.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from bench.scale import FILTERS, ROLE
from bench.synthetic import SyntheticCorpus, load, query_vectors
from bench.timing import summary
from kb_core.db.targets import reader_conninfo

EF_SEARCHES = (40, 80, 120, 200, 300)
RECALL_GOAL = 0.97


@dataclass(frozen=True)
class IndexChoice:
    name: str
    halfvec: bool
    m: int = 16
    ef_construction: int = 64

    def key(self, dimensions: int) -> str:
        """The indexed expression; a query must order by exactly this for the planner to use the index."""
        return f"(embedding::halfvec({dimensions}))" if self.halfvec else "embedding"

    def operand(self, dimensions: int) -> str:
        return f"%(v)s::halfvec({dimensions})" if self.halfvec else "%(v)s"

    def ddl(self, dimensions: int) -> str:
        ops = "halfvec_cosine_ops" if self.halfvec else "vector_cosine_ops"
        return (
            f"CREATE INDEX chunks_embedding_hnsw ON kb.chunks USING hnsw ({self.key(dimensions)} {ops}) "
            f"WITH (m = {self.m}, ef_construction = {self.ef_construction}) WHERE is_effective"
        )


CHOICES = (
    IndexChoice("vector, m 16, ef_construction 64 (the migrations')", halfvec=False),
    IndexChoice("halfvec expression, m 16, ef_construction 64", halfvec=True),
    IndexChoice("halfvec expression, m 16, ef_construction 128", halfvec=True, ef_construction=128),
    IndexChoice("halfvec expression, m 24, ef_construction 64", halfvec=True, m=24),
)


def _hnsw_bytes(conn: psycopg.Connection) -> int:
    (size,) = conn.execute(
        "SELECT coalesce(sum(pg_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " JOIN pg_am a ON a.oid = c.relam WHERE n.nspname = 'kb' AND a.amname = 'hnsw'"
    ).fetchone() or (0,)
    return int(size)


def _leg(choice: IndexChoice, dimensions: int) -> str:
    key, operand = choice.key(dimensions), choice.operand(dimensions)
    return (
        f"SELECT chunk_id FROM (SELECT chunk_id, {key} <=> {operand} AS distance FROM kb.searchable_chunks "
        "WHERE is_effective AND (%(d)s::text[] IS NULL OR department = ANY(%(d)s)) "
        f"ORDER BY {key} <=> {operand} LIMIT %(n)s) nearest ORDER BY distance"
    )


def exact_answers(conninfo: str, vectors: np.ndarray) -> dict[str, list[set[int]]]:
    """The true 10 nearest (full precision, no index) as the benchmark's role, per filter."""
    statement = _leg(CHOICES[0], 0)
    answers: dict[str, list[set[int]]] = {}
    with psycopg.connect(conninfo, autocommit=True) as conn:
        register_vector(conn)
        for name, departments in FILTERS.items():
            answers[name] = []
            for vector in vectors:
                with conn.transaction():
                    conn.execute(f"SET LOCAL ROLE {ROLE.value}")
                    conn.execute("SET LOCAL enable_indexscan = off")
                    conn.execute("SET LOCAL enable_bitmapscan = off")
                    rows = conn.execute(statement, {"d": departments, "v": vector, "n": 10}).fetchall()
                answers[name].append({r[0] for r in rows})
    return answers


def served(
    conninfo: str, choice: IndexChoice, dimensions: int, vectors: np.ndarray, truth: dict[str, list[set[int]]]
) -> dict[str, dict[int, dict[str, Any]]]:
    """recall@10 and latency (LIMIT 50, as the hybrid query's vector leg asks) per filter and ef_search."""
    statement = _leg(choice, dimensions)
    out: dict[str, dict[int, dict[str, Any]]] = {}
    with psycopg.connect(conninfo, autocommit=True) as conn:
        register_vector(conn)
        for name, departments in FILTERS.items():
            out[name] = {}
            for ef in EF_SEARCHES:
                recalls, samples, plans = [], [], set[str]()
                for round_ in range(2):  # the first round warms the pages this ef_search reads
                    for vector, exact in zip(vectors, truth[name], strict=True):
                        with conn.transaction():
                            conn.execute(f"SET LOCAL ROLE {ROLE.value}")
                            conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                            params = {"d": departments, "v": vector, "n": 50}
                            started = time.perf_counter()
                            rows = conn.execute(statement, params).fetchall()
                            elapsed = (time.perf_counter() - started) * 1000
                            if round_ == 0 and not plans:
                                plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + statement, params))
                                hnsw = re.search(r"Index Scan using \S*(embedding|expr)\S*", plan)
                                plans.add("hnsw" if hnsw else "other")
                        if round_:
                            samples.append(elapsed)
                            found = [r[0] for r in rows][:10]
                            recalls.append(len(set(found) & exact) / len(exact) if exact else float(not found))
                out[name][ef] = {
                    "recall_at_10": round(float(np.mean(recalls)), 4),
                    "ms": summary(samples),
                    "plan": plans.pop() if plans else "?",
                }
    return out


def adaptive(measured: dict[str, dict[int, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per filter, the smallest ef_search whose recall@10 reaches the goal (or the best one measured)."""
    chosen = {}
    for name, by_ef in measured.items():
        reaching = [ef for ef, v in by_ef.items() if v["recall_at_10"] >= RECALL_GOAL]
        ef = min(reaching) if reaching else max(by_ef, key=lambda e: by_ef[e]["recall_at_10"])
        chosen[name] = {"ef_search": ef, **by_ef[ef]}
    return chosen


def run(superuser: str, server: str, spec: SyntheticCorpus, *, queries: int, choices=CHOICES) -> dict[str, Any]:
    reader = reader_conninfo(server, ROLE)
    result: dict[str, Any] = {"chunks": spec.chunks, "dimensions": spec.dimensions, "queries": queries}
    result["load"] = {k: round(v, 1) for k, v in load(superuser, spec, vector_index=False).items()}
    vectors = query_vectors(spec, queries)
    truth = exact_answers(reader, vectors)
    result["choices"] = []
    for choice in choices:
        print(f"  {choice.name} ...", flush=True)
        with psycopg.connect(superuser, autocommit=True) as conn:
            conn.execute("SET maintenance_work_mem = '1GB'")
            conn.execute("DROP INDEX IF EXISTS kb.chunks_embedding_hnsw")
            started = time.perf_counter()
            conn.execute(choice.ddl(spec.dimensions))
            build_s = time.perf_counter() - started
            size = _hnsw_bytes(conn)
            conn.execute("ANALYZE kb.chunks")
        measured = served(reader, choice, spec.dimensions, vectors, truth)
        result["choices"].append(
            {
                "name": choice.name,
                "halfvec": choice.halfvec,
                "m": choice.m,
                "ef_construction": choice.ef_construction,
                "build_s": round(build_s, 1),
                "hnsw_mb": round(size / 2**20, 1),
                "by_filter": {name: {str(ef): v for ef, v in by_ef.items()} for name, by_ef in measured.items()},
                "adaptive": adaptive(measured),
            }
        )
    return result


def render(runs: list[dict[str, Any]] | None) -> list[str]:
    if not runs:
        return []
    lines = [
        "## Storage and HNSW settings, by measurement",
        "",
        "`python -m bench --parts storage` (`bench/storage.py`): on one synthetic database the embedding index is "
        "rebuilt as each candidate in turn; the vector leg as served (the lowest reader role, iterative scan, "
        "LIMIT 50 re-ranked by distance) against an exact full-precision scan, recall@10 over the query vectors "
        "and latency after a warming round. A `halfvec` expression index indexes `embedding::halfvec(d)` over "
        "the unchanged `vector` column: the graph holds half the bytes, the table keeps full precision.",
        "",
    ]
    for r in runs:
        lines += [
            f"### {r['chunks']:,} chunks × {r['dimensions']} dimensions",
            "",
            (f"By `{r['command']}`, commit {r['commit']}. " if "command" in r else "")
            + f"Load {r['load']['load_s']} s; {r['queries']} query vectors.",
            "",
            "| index | build s | HNSW MB | MB per million rows | filter | recall@10 by ef_search | p50 / p95 ms "
            f"by ef_search | smallest ef_search with recall ≥ {RECALL_GOAL} (p95 ms) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for c in r["choices"]:
            for i, (name, by_ef) in enumerate(c["by_filter"].items()):
                pick = c["adaptive"][name]
                head = (
                    f"| {c['name']} | {c['build_s']} | {c['hnsw_mb']} | {c['hnsw_mb'] * 1e6 / r['chunks']:,.0f} "
                    if i == 0
                    else "| | | | "
                )
                lines.append(
                    head
                    + f"| {name}{'' if all(v.get('plan') == 'hnsw' for v in by_ef.values()) else ' (not all HNSW)'} | "
                    + ", ".join(f"{ef}: {v['recall_at_10']:.3f}" for ef, v in by_ef.items())
                    + " | "
                    + ", ".join(f"{ef}: {v['ms']['p50']:.1f} / {v['ms']['p95']:.1f}" for ef, v in by_ef.items())
                    + f" | {pick['ef_search']}"
                    + ("" if pick["recall_at_10"] >= RECALL_GOAL else f" (best: {pick['recall_at_10']:.3f})")
                    + f" ({pick['ms']['p95']:.1f}) |"
                )
        lines.append("")
    return lines
