"""The naive form of the LLD §2 query, on the same data, for comparison: one chunks table with a plain
per-row policy (classification <= ceiling), `websearch_to_tsquery` + `ts_rank_cd` over every match, the
legs joined to documents, iterative scan on. This is what the LLD's SQL does when run as written."""

from __future__ import annotations

import psycopg

NAIVE_SQL = """
WITH params AS (SELECT websearch_to_tsquery('english', %(text)s) AS tsq),
vector_hits AS (
  SELECT c.chunk_id, row_number() OVER (ORDER BY c.embedding <=> %(vector)s) AS rank
  FROM naive.chunks c JOIN kb.documents d USING (doc_id)
  WHERE d.status = 'effective' AND (%(departments)s::text[] IS NULL OR d.department = ANY(%(departments)s))
  ORDER BY c.embedding <=> %(vector)s
  LIMIT 50
),
text_hits AS (
  SELECT c.chunk_id, row_number() OVER (ORDER BY ts_rank_cd(c.tsv, p.tsq) DESC) AS rank
  FROM naive.chunks c JOIN kb.documents d USING (doc_id) CROSS JOIN params p
  WHERE c.tsv @@ p.tsq AND d.status = 'effective'
    AND (%(departments)s::text[] IS NULL OR d.department = ANY(%(departments)s))
  ORDER BY ts_rank_cd(c.tsv, p.tsq) DESC
  LIMIT 50
),
fused AS (
  SELECT chunk_id, sum(1.0 / (60 + rank)) AS rrf_score
  FROM (SELECT chunk_id, rank FROM vector_hits UNION ALL SELECT chunk_id, rank FROM text_hits) ranked
  GROUP BY chunk_id
)
SELECT d.doc_code, d.title, d.version, d.effective_date, d.department, c.section_path, c.content, f.rrf_score
FROM fused f JOIN naive.chunks c USING (chunk_id) JOIN kb.documents d USING (doc_id)
ORDER BY f.rrf_score DESC
LIMIT %(limit)s
"""


def build_naive(superuser: str) -> dict[str, float]:
    """Copy kb.chunks into one unpartitioned table with a per-row policy and the two indexes."""
    import time

    timings = {}
    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("DROP SCHEMA IF EXISTS naive CASCADE")
        conn.execute("CREATE SCHEMA naive")
        started = time.perf_counter()
        conn.execute(
            "CREATE TABLE naive.chunks AS SELECT chunk_id, doc_id, classification, department, "
            "section_path, content, embedding, tsv FROM kb.chunks"
        )
        conn.execute("ALTER TABLE naive.chunks ADD PRIMARY KEY (chunk_id)")
        timings["copy_s"] = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute(
            "CREATE INDEX ON naive.chunks USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
        timings["hnsw_build_s"] = time.perf_counter() - started
        conn.execute("CREATE INDEX ON naive.chunks USING gin (tsv)")
        conn.execute("ALTER TABLE naive.chunks ENABLE ROW LEVEL SECURITY")
        conn.execute("ALTER TABLE naive.chunks FORCE ROW LEVEL SECURITY")
        conn.execute(
            "CREATE POLICY within_ceiling ON naive.chunks FOR SELECT USING (classification <= kb.role_ceiling())"
        )
        conn.execute("GRANT USAGE ON SCHEMA naive TO demo_readonly, support_agent, analyst, compliance_officer")
        conn.execute("GRANT SELECT ON naive.chunks TO demo_readonly, support_agent, analyst, compliance_officer")
        conn.execute("VACUUM ANALYZE naive.chunks")
    return timings
