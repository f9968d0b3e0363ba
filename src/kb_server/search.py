"""The hybrid query (LLD §2): vector and full-text candidates fused by Reciprocal Rank Fusion, in one
SQL statement and one round trip, under the caller's role.

Both legs read kb.searchable_chunks, the classification partitions as one relation: for a role, the
partitions above its ceiling are planned away (`One-Time Filter: false`) and the others are read
through their own HNSW and GIN indexes (see sql/002 for why the ceiling is enforced per partition).
When there is no query vector (the embedder failed: degraded mode) the vector leg is an empty set.

As of a date (point in time), both legs read the chunks of the versions in force then (kb_server.versions):
those of current versions through the same partial indexes, those of earlier versions (few) through the
doc_id index. The current path is unchanged: it never looks at the versions table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import numpy as np
from psycopg import AsyncConnection

from kb_core.roles import Role
from kb_server.citations import Citation
from kb_server.db.reader import reader_transaction
from kb_server.versions import in_force_on

RRF_K = 60
CANDIDATES = 50  # per leg

# Each leg is a subquery ordered by its own index (HNSW distance, or ts_rank_cd over GIN matches) and
# limited to the candidates; row_number() then gives the leg's rank.
_VECTOR_LEG = """
vector_hits AS (
    SELECT chunk_id, classification, row_number() OVER (ORDER BY distance) AS rank
    FROM (SELECT chunk_id, classification, embedding <=> %(vector)s AS distance
          FROM kb.searchable_chunks
          WHERE {current} AND (%(departments)s::text[] IS NULL OR department = ANY(%(departments)s))
          ORDER BY embedding <=> %(vector)s
          LIMIT %(candidates)s) nearest
)"""
_NO_VECTOR_LEG = """
vector_hits AS (
    SELECT NULL::bigint AS chunk_id, NULL::kb.classification AS classification, NULL::bigint AS rank
    WHERE false
)"""
_NO_TEXT_LEG = """
text_hits AS (
    SELECT NULL::bigint AS chunk_id, NULL::kb.classification AS classification, NULL::bigint AS rank
    WHERE false
)"""
# The full-text leg reads each classification partition on its own and ranks at most MATCH_CAP of its
# matching rows: ranking reads every tsvector it ranks, so a question matching a quarter of a million
# chunks would otherwise rank them all (seconds at 1M chunks). With the OR form the cap is shared out
# among the question's words: each word brings at most MATCH_CAP / words of its matches. A rare word
# brings all of its chunks, so a chunk that shares the question's rarer words is always ranked; only a
# word too common to tell chunks apart contributes an arbitrary sample of its matches. (The first
# MATCH_CAP matches of the whole OR query would mostly be chunks that share only the common words: on
# the NPL collection, where 75 of 93 queries match over 2,000 abstracts, full-text MAP fell from 0.231
# uncapped to 0.185 that way, against 0.228 with the cap shared out.) Below the cap the ranking is exact.
PARTITIONS = ("public", "internal", "confidential", "restricted")
MATCH_CAP = 2000
_WORD_MATCHES = """
          SELECT word_matches.* FROM unnest((SELECT words FROM query)) AS w(word)
          CROSS JOIN LATERAL (SELECT c.chunk_id, c.classification, c.tsv FROM kb.chunks_{partition} c
                              WHERE c.tsv @@ w.word AND c.{current}
                                AND (%(departments)s::text[] IS NULL OR c.department = ANY(%(departments)s))
                              LIMIT (SELECT per_word FROM query)) word_matches"""
_QUERY_MATCHES = """
          SELECT * FROM (SELECT c.chunk_id, c.classification, c.tsv FROM kb.chunks_{partition} c
                         WHERE c.tsv @@ (SELECT tsq FROM query) AND c.{current}
                           AND (%(departments)s::text[] IS NULL OR c.department = ANY(%(departments)s))
                         LIMIT %(match_cap)s) {partition}_matches"""
# As of a date: the current versions' chunks (read as above, then kept if their version was in force), and
# the chunks of earlier versions in force then, which the partial indexes do not hold.
_CURRENT = "is_effective"
_CURRENT_AS_OF = "is_effective AND {c}doc_id IN (SELECT doc_id FROM in_force WHERE is_effective)"
_EARLIER_AS_OF = "NOT c.is_effective AND c.doc_id IN (SELECT doc_id FROM in_force WHERE NOT is_effective)"
_IN_FORCE = "\nin_force AS (" + in_force_on() + "\n)"
_VECTOR_LEG_AS_OF = """
vector_hits AS (
    SELECT chunk_id, classification, row_number() OVER (ORDER BY distance) AS rank
    FROM (SELECT * FROM (SELECT chunk_id, classification, embedding <=> %(vector)s AS distance
                         FROM kb.searchable_chunks
                         WHERE {current}
                           AND (%(departments)s::text[] IS NULL OR department = ANY(%(departments)s))
                         ORDER BY embedding <=> %(vector)s
                         LIMIT %(candidates)s) current_versions
          UNION ALL
          SELECT c.chunk_id, c.classification, c.embedding <=> %(vector)s FROM kb.searchable_chunks c
          WHERE {earlier} AND (%(departments)s::text[] IS NULL OR c.department = ANY(%(departments)s))
          ORDER BY distance LIMIT %(candidates)s) nearest
)"""
_EARLIER_MATCHES = """
          SELECT * FROM (SELECT c.chunk_id, c.classification, c.tsv FROM kb.searchable_chunks c
                         WHERE c.tsv @@ (SELECT tsq FROM query) AND {earlier}
                           AND (%(departments)s::text[] IS NULL OR c.department = ANY(%(departments)s))
                         LIMIT %(match_cap)s) earlier_matches"""
_TEXT_LEG = """
text_hits AS (
    SELECT chunk_id, classification, row_number() OVER (ORDER BY text_rank DESC, chunk_id) AS rank
    FROM (SELECT m.chunk_id, m.classification, {rank}(m.tsv, (SELECT tsq FROM query)) AS text_rank
          FROM (SELECT DISTINCT ON (chunk_id) * FROM ({matches}
          ) partition_matches ORDER BY chunk_id) m
          ORDER BY text_rank DESC, m.chunk_id
          LIMIT %(candidates)s) ranked
)"""
_FUSE_AND_FETCH = """
fused AS (
    SELECT chunk_id, classification,
           sum(1.0 / (%(rrf_k)s + rank)) AS score,
           min(rank) FILTER (WHERE leg = 'vector') AS vector_rank,
           min(rank) FILTER (WHERE leg = 'text') AS text_rank
    FROM (SELECT chunk_id, classification, rank, 'vector' AS leg FROM vector_hits
          UNION ALL
          SELECT chunk_id, classification, rank, 'text' AS leg FROM text_hits) legs
    GROUP BY chunk_id, classification
),
top AS (
    SELECT * FROM fused ORDER BY score DESC, chunk_id LIMIT %(limit)s
)
SELECT d.doc_code, d.title, d.version, d.effective_date, d.department, c.section_path, c.anchor,
       c.content, t.score::float8, t.vector_rank, t.text_rank, c.injection_suspect, c.injection_rule
FROM top t
JOIN kb.searchable_chunks c ON c.chunk_id = t.chunk_id AND c.classification = t.classification
JOIN kb.documents d ON d.doc_id = c.doc_id
ORDER BY t.score DESC, t.chunk_id
"""


# How the query text becomes a tsquery. websearch_to_tsquery joins the words with AND, so a question in
# plain language often matches no chunk at all (golden set: full-text recall@5 0.10); the OR form (each
# stemmed word of the question, stop words dropped, joined with |) finds the chunks that share its words.
# Ranked by ts_rank (how often the words occur) rather than ts_rank_cd (how close together they are),
# since the words of an OR query need not be near each other. evals/report.md has the measurements.
# A query with no words left (only stop words) gives a NULL tsquery, which matches nothing.
TEXT_QUERY = "or"
TEXT_RANK = "ts_rank"
TEXT_RANKS = ("ts_rank", "ts_rank_cd")
TEXT_QUERIES = {
    "websearch": "websearch_to_tsquery('english', %(text)s)",
    "or": "string_agg(quote_literal(lexeme), ' | ')::tsquery",
}
# The question's words (stemmed, stop words dropped), each its own tsquery, and each word's share of the cap.
_QUERY_WORDS = """query AS (
    SELECT {tsq} AS tsq, array_agg(quote_literal(lexeme)::tsquery) AS words,
           ceil(%(match_cap)s::float8 / nullif(count(*), 0))::int AS per_word
    FROM unnest(to_tsvector('english', %(text)s)) AS words(lexeme)
)"""


def hybrid_sql(
    *,
    with_vector: bool,
    with_text: bool = True,
    text_query: str = TEXT_QUERY,
    text_rank: str = TEXT_RANK,
    as_of: bool = False,
) -> str:
    """The statement; a leg turned off is an empty set (degraded mode, and the evals' ablations). With
    `as_of`, it reads the versions in force on %(as_of)s instead of the current ones."""
    if text_rank not in TEXT_RANKS:
        raise ValueError(f"text_rank must be one of {TEXT_RANKS}")
    query = _QUERY_WORDS.format(tsq=TEXT_QUERIES[text_query])
    # The OR form shares the cap out among the words; the websearch (AND) form caps the whole query's matches.
    per_partition = _WORD_MATCHES if text_query == "or" else _QUERY_MATCHES
    current = _CURRENT_AS_OF.format(c="c.") if as_of else _CURRENT
    partitions = [per_partition.format(partition=p, current=current) for p in PARTITIONS]
    if as_of:
        partitions.append(_EARLIER_MATCHES.format(earlier=_EARLIER_AS_OF))
    matches = "\n          UNION ALL".join(partitions)
    text_leg = _TEXT_LEG.format(rank=text_rank, matches=matches) if with_text else _NO_TEXT_LEG
    if not with_vector:
        vector_leg = _NO_VECTOR_LEG
    elif as_of:
        vector_leg = _VECTOR_LEG_AS_OF.format(current=_CURRENT_AS_OF.format(c=""), earlier=_EARLIER_AS_OF)
    else:
        vector_leg = _VECTOR_LEG.format(current=_CURRENT)
    legs = [*([_IN_FORCE] if as_of else []), query, vector_leg, text_leg]
    return "WITH " + ",".join(legs) + "," + _FUSE_AND_FETCH


@dataclass(frozen=True)
class Hit:
    doc_code: str
    title: str
    version: str
    effective_date: date
    department: str
    section_path: str
    anchor: str
    content: str
    score: float
    vector_rank: int | None
    text_rank: int | None
    injection_suspect: bool
    injection_rule: str | None

    @property
    def citation(self) -> str:
        """Pinned to the chunk's version: it resolves to this text whatever supersedes it later."""
        return str(Citation(self.department, self.doc_code, self.version, self.anchor))


async def hybrid_search(
    conn: AsyncConnection,
    role: Role,
    *,
    text: str,
    vector: np.ndarray | None,
    departments: list[str] | None,
    limit: int,
    ef_search: int = 80,
    candidates: int = CANDIDATES,
    match_cap: int = MATCH_CAP,
    text_query: str = TEXT_QUERY,
    text_rank: str = TEXT_RANK,
    with_text: bool = True,
    as_of: date | None = None,
) -> list[Hit]:
    """Run the hybrid query as `role` in one round trip; `vector` None runs the full-text leg alone. With
    `as_of`, each document answers with its version in force on that date."""
    params = {
        "text": text,
        "vector": vector,
        "departments": departments,
        "candidates": candidates,
        "match_cap": match_cap,
        "rrf_k": RRF_K,
        "limit": limit,
        "as_of": as_of,
    }
    async with reader_transaction(conn, role, ef_search=ef_search) as tx:
        statement = hybrid_sql(
            with_vector=vector is not None,
            with_text=with_text,
            text_query=text_query,
            text_rank=text_rank,
            as_of=as_of is not None,
        )
        cursor = await tx.execute(statement, params)
    return [Hit(*row) for row in await cursor.fetchall()]
