"""The hybrid query (LLD §2): vector and full-text candidates fused into one ranking (a convex combination of
the legs' normalised scores; the LLD's Reciprocal Rank Fusion remains an option), in one SQL statement and one
round trip, under the caller's role.

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
from datetime import date, datetime

import numpy as np
from psycopg import AsyncConnection

from kb_core.roles import Role
from kb_server.citations import Citation
from kb_server.db.reader import reader_transaction
from kb_server.identifiers import identifiers_in
from kb_server.versions import in_force_on

RRF_K = 60
CANDIDATES = 50  # per leg


@dataclass(frozen=True)
class Fusion:
    """How the two legs become one score. "rrf": sum(weight / (rrf_k + rank)); "convex": sum(weight x the leg's
    score min-max normalised over its candidates; "zscore": in standard deviations above the lowest of them), 0 from
    a leg that did not find the chunk. Either way plus
    `first_bonus` for a chunk a leg ranks first, and `identifier_bonus` per identifier grade. The field defaults
    are the LLD's plain RRF; DEFAULT_FUSION is what the server runs (evals/report.md has every variant)."""

    rrf_k: int = RRF_K
    vector_weight: float = 1.0
    text_weight: float = 1.0
    first_bonus: float = 0.0
    identifier_bonus: float = 1.0  # above any rank sum: a chunk holding a named identifier comes first
    # or "convex": weights times each leg's min-max normalised score instead of 1/(k + rank); or "zscore": the same
    # with each leg's score counted in standard deviations above its lowest candidate, so a leg whose best stand far
    # out from the rest weighs more than one whose scores are bunched. Over n candidates that is at most n/sqrt(n-1)
    # (7.1 at 50): identifier_bonus 10 keeps a named identifier's chunk first there.
    method: str = "rrf"


@dataclass(frozen=True)
class Bm25:
    """Okapi BM25's term-frequency saturation (k1) and length normalisation (b), and how much more an
    occurrence in the title or section path counts than one in the text (evals/report.md: chosen on the
    development questions)."""

    k1: float = 1.2
    b: float = 0.75
    title_weight: float = 1.0

    def params(self) -> dict[str, object]:
        # ts_rank_cd with a one-word query and weights {D, C, B, A} is the word's weighted occurrence count
        # (each occurrence is its own cover of length 1); weights must lie in [0, 1], so B gets 1/title_weight
        # and the count is scaled back up.
        scale = max(1.0, self.title_weight)
        return {
            "k1": self.k1,
            "b": self.b,
            "tf_weights": [0.0, 0.0, 1.0 / scale, self.title_weight / scale],
            "tf_scale": scale,
        }


# Served: the fusion evals.tune --joint chose on the development split (golden dev MRR + NPL dev MAP over BM25 k1 x b
# x leg weight x bonus x normalisation, at the served 50 candidates per leg): each leg's score in standard deviations
# above its lowest candidate, 0.6 vector + 0.4 text, +0.05 for a leg's first, BM25 k1 1.2 b 0.3 (golden dev MRR 0.790
# and NPL dev MAP 0.369, against 0.785 and 0.357 for the min-max fusion with k1 1.2 b 0.75 it replaced;
# evals/report.md has both parts of every variant). Min-max normalisation maps every leg's best onto 1 however far
# ahead it is; counted in standard deviations, a leg whose best candidates stand out from the rest outweighs one
# whose scores are bunched. RRF (the LLD's) throws the scores away altogether. identifier_bonus 10 keeps a chunk
# holding a named identifier above any weighted sum (at most 50/sqrt(49) + 2 x first_bonus over 50 candidates).
DEFAULT_FUSION = Fusion(
    RRF_K, vector_weight=0.6, text_weight=0.4, first_bonus=0.05, identifier_bonus=10.0, method="zscore"
)
# The hybrid's BM25 normalises less for length (b 0.3) than the text leg alone does best with: in degraded mode (no
# query vector) the text leg is the whole answer and keeps rank_bm25's k1 1.2 b 0.75 (NPL text-only MAP 0.289
# against 0.281 with b 0.3).
DEFAULT_BM25 = Bm25(1.2, 0.3)
TEXT_ONLY_BM25 = Bm25(1.2, 0.75)

# Each leg is a subquery ordered by its own index (HNSW distance, or a rank over GIN matches) and
# limited to the candidates; row_number() then gives the leg's rank. The vector leg orders by embedding_key,
# the half-precision copy of the vector the HNSW index is built on (sql/011), so the planner uses the index.
# Two cases are answered exactly instead: every candidate's distance, sorted (OFFSET 0 keeps the planner off
# the HNSW index). Only one branch runs: the other's condition is false before it reads a row.
# - A department filter that keeps few chunks (query.filtered, below FEW_ROWS): its chunks by the department
#   index. Walking the graph, the iterative scan visits about 1 / selectivity nodes per row it keeps: at 1M
#   chunks a 1% filter cost 50 ms that way at 384 dimensions, against ~13 ms for reading the filter's 2,260 rows.
# - A role that reads few chunks in all (query.readable, below EXACT_ROWS, from kb.text_stats): found walking
#   it, two documents of ~1,100 near-identical chunks each trapped the graph's walk among themselves (a known
#   HNSW weakness: near-duplicates link mostly to each other), and the nearest chunk of another document, at
#   similarity 0.75, was not among the 50 candidates at any ef_search. Reading 10,000 vectors costs ~3 ms.
_FEW = "coalesce((SELECT filtered FROM query) < %(few_rows)s, false)"
_SMALL = "coalesce((SELECT readable FROM query) < %(exact_rows)s, false)"
_ANY_DEPARTMENT = "(%(departments)s::text[] IS NULL OR {c}department = ANY(%(departments)s))"
_IN_DEPARTMENTS = "{c}department = ANY(%(departments)s)"
_NEAREST = """(SELECT chunk_id, classification, embedding_key <=> %(vector)s::halfvec AS distance
           FROM kb.searchable_chunks
           WHERE {{current}} AND {department}
           ORDER BY {order}
           LIMIT %(candidates)s)"""


def _graph_or_exact(exact: str) -> str:
    """The vector leg's candidates: through the graph, or, when `exact` holds, every readable chunk's distance."""
    return (
        "("
        + _NEAREST.format(
            department=_ANY_DEPARTMENT.format(c="") + f" AND NOT {exact}", order="embedding_key <=> %(vector)s::halfvec"
        )
        + """
          UNION ALL
          (SELECT * FROM (SELECT chunk_id, classification, embedding_key <=> %(vector)s::halfvec AS distance
                          FROM kb.searchable_chunks
                          WHERE {current} AND """
        + _ANY_DEPARTMENT.format(c="")
        + f""" AND {exact}
                          OFFSET 0) scanned
           ORDER BY distance LIMIT %(candidates)s))"""
    )


_GRAPH_OR_EXACT = _graph_or_exact(f"({_FEW} OR {_SMALL})")
_GRAPH_OR_ALL = _graph_or_exact(_SMALL)  # no department filter: the graph, or every readable chunk
_VECTOR_LEG = """
vector_hits AS (
    SELECT chunk_id, classification, row_number() OVER (ORDER BY distance) AS rank, 1.0 - distance AS score
    FROM {nearest} nearest
)"""
_NO_VECTOR_LEG = """
vector_hits AS (
    SELECT NULL::bigint AS chunk_id, NULL::kb.classification AS classification, NULL::bigint AS rank,
           NULL::float8 AS score
    WHERE false
)"""
_NO_TEXT_LEG = """
text_hits AS (
    SELECT NULL::bigint AS chunk_id, NULL::kb.classification AS classification, NULL::bigint AS rank,
           NULL::integer AS exact, NULL::float8 AS score
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
FEW_ROWS = 5000  # a department filter keeping fewer chunks is read by the department index (see _VECTOR_LEG)
EXACT_ROWS = 10_000  # a role reading fewer chunks in all gets the exact nearest ones (see _VECTOR_LEG)
DEPARTMENT_PATH_RATIO = 6  # per row: a GIN match checked ~0.66 µs, a filter's chunk read and tested ~3.5 µs
RESCORE_FACTOR = 2  # BM25 reads the tsvectors of at most this many times the candidates (see _TEXT_LEG_BM25)
# A word's matches are found through the GIN index, and the department filter is checked on each one's row:
# for a common word under a filter that keeps few chunks, that reads tens of thousands of rows to keep a few
# hundred (1M chunks, a word in 25% of them, a 1% filter: 41 ms). When the word's chunks (query.dfs, from
# kb.lexeme_stats: the rows this role may read) outnumber the filter's by DEPARTMENT_PATH_RATIO, the filter's
# chunks are read by the department index instead and each one's tsvector tested (8 ms there). Same rows
# either way; only one branch runs for a word.
_BY_DEPARTMENT = "coalesce(" + _FEW + " AND w.df > %(department_path_ratio)s * (SELECT filtered FROM query), false)"
_WORD_MATCH = """(SELECT c.chunk_id, c.classification, c.doc_id, c.tsv, c.terms FROM kb.chunks_{{partition}} c
                               WHERE {match} AND c.{{current}} AND {department}
                               LIMIT (SELECT per_word FROM query))"""
_BY_GIN = _WORD_MATCH.format(match="c.tsv @@ w.word", department=_ANY_DEPARTMENT.format(c="c."))
_BY_GIN_OR_DEPARTMENT = (
    "("
    + _WORD_MATCH.format(
        match="c.tsv @@ w.word", department=_ANY_DEPARTMENT.format(c="c.") + " AND NOT " + _BY_DEPARTMENT
    )
    + "\n                              UNION ALL\n                              "
    + _WORD_MATCH.format(
        match="coalesce(c.tsv @@ w.word, false)", department=_IN_DEPARTMENTS.format(c="c.") + " AND " + _BY_DEPARTMENT
    )
    + ")"
)
_WORD_MATCHES = """
          SELECT word_matches.*, w.lexeme
          FROM unnest((SELECT words FROM query), (SELECT lexemes FROM query){dfs}) AS w(word, lexeme{df})
          CROSS JOIN LATERAL {matches} word_matches"""
# Each word's matches found through the GIN index alone, or (under a department filter) by either path.
_UNFILTERED_WORD_MATCHES = _WORD_MATCHES.format(dfs="", df="", matches=_BY_GIN)
_FILTERED_WORD_MATCHES = _WORD_MATCHES.format(dfs=", (SELECT dfs FROM query)", df=", df", matches=_BY_GIN_OR_DEPARTMENT)
_QUERY_MATCHES = """
          SELECT * FROM (SELECT c.chunk_id, c.classification, c.doc_id, c.tsv, c.terms, NULL::text AS lexeme
                         FROM kb.chunks_{partition} c
                         WHERE c.tsv @@ (SELECT tsq FROM query) AND c.{current}
                           AND (%(departments)s::text[] IS NULL OR c.department = ANY(%(departments)s))
                         LIMIT %(match_cap)s) {partition}_matches"""
# Identifiers the question names (kb_server.identifiers): chunks holding one as an exact token sequence, and
# chunks of a document whose code it names, join the matches whatever the words' share of the cap.
_IDENTIFIER_MATCHES = """
          SELECT exact_matches.*, NULL::text FROM unnest((SELECT exact FROM query)) AS e(phrase)
          CROSS JOIN LATERAL (SELECT c.chunk_id, c.classification, c.doc_id, c.tsv, c.terms FROM kb.chunks_{partition} c
                              WHERE c.tsv @@ e.phrase AND c.{current}
                                AND (%(departments)s::text[] IS NULL OR c.department = ANY(%(departments)s))
                              LIMIT %(candidates)s) exact_matches
          UNION ALL
          SELECT * FROM (SELECT c.chunk_id, c.classification, c.doc_id, c.tsv, c.terms, NULL::text AS lexeme
                         FROM kb.chunks_{partition} c
                         WHERE c.doc_id = ANY((SELECT named_documents FROM query)::bigint[]) AND c.{current}
                           AND (%(departments)s::text[] IS NULL OR c.department = ANY(%(departments)s))
                         LIMIT %(candidates)s) {partition}_named"""
# As of a date: the current versions' chunks (read as above, then kept if their version was in force), and
# the chunks of earlier versions in force then, which the partial indexes do not hold.
_CURRENT = "is_effective"
_CURRENT_AS_OF = "is_effective AND {c}doc_id IN (SELECT doc_id FROM in_force WHERE is_effective)"
_EARLIER_AS_OF = "NOT c.is_effective AND c.doc_id IN (SELECT doc_id FROM in_force WHERE NOT is_effective)"
_IN_FORCE = "\nin_force AS (" + in_force_on() + "\n)"
_VECTOR_LEG_AS_OF = """
vector_hits AS (
    SELECT chunk_id, classification, row_number() OVER (ORDER BY distance) AS rank, 1.0 - distance AS score
    FROM (SELECT * FROM {nearest} current_versions
          UNION ALL
          SELECT c.chunk_id, c.classification, c.embedding_key <=> %(vector)s::halfvec FROM kb.searchable_chunks c
          WHERE {earlier} AND (%(departments)s::text[] IS NULL OR c.department = ANY(%(departments)s))
          ORDER BY distance LIMIT %(candidates)s) nearest
)"""
_EARLIER_MATCHES = """
          SELECT * FROM (SELECT c.chunk_id, c.classification, c.doc_id, c.tsv, c.terms, NULL::text AS lexeme
                         FROM kb.searchable_chunks c
                         WHERE c.tsv @@ (SELECT tsq FROM query) AND {earlier}
                           AND (%(departments)s::text[] IS NULL OR c.department = ANY(%(departments)s))
                         LIMIT %(match_cap)s) earlier_matches"""
# `exact` grades how plainly a chunk holds what the question names: 5 when it is of a document whose code the
# question names (above any chunk that only cites it); for a named identifier it holds as an exact token
# sequence, 1, plus 2 when its text has the identifier verbatim (the parser drops `_` and case, so
# `dti_exceeds_policy` also matches the words "DTI exceeds policy"), plus 1 when it is in its title or section
# path. It orders the leg before BM25 does, and the fusion adds identifier_bonus per grade.
_EXACT = """CASE WHEN {m}.doc_id = ANY((SELECT named_documents FROM query)::bigint[]) THEN 5 ELSE 0 END
                 + CASE WHEN cardinality((SELECT exact FROM query)) = 0 THEN 0 ELSE
                   (SELECT coalesce(max(1 + CASE WHEN ts_filter({m}.tsv, '{{a}}') @@ e.phrase THEN 1 ELSE 0 END
                                          + CASE WHEN EXISTS (SELECT FROM kb.searchable_chunks v
                                                              WHERE v.chunk_id = {m}.chunk_id
                                                                AND v.classification = {m}.classification
                                                                AND strpos(v.content, e.identifier) > 0)
                                                 THEN 2 ELSE 0 END), 0)
                    FROM unnest((SELECT exact FROM query), (SELECT exact_identifiers FROM query)) e(phrase, identifier)
                    WHERE {m}.tsv @@ e.phrase) END"""
# ts_rank and ts_rank_cd (the ablations): every distinct match ranked with the whole tsquery.
_TEXT_LEG = """
text_hits AS (
    SELECT chunk_id, classification, row_number() OVER (ORDER BY exact DESC, text_rank DESC, chunk_id) AS rank, exact,
           text_rank::float8 AS score
    FROM (SELECT m.chunk_id, m.classification, {rank}(m.tsv, (SELECT tsq FROM query)) AS text_rank,
                 {exact} AS exact
          FROM (SELECT DISTINCT ON (chunk_id) * FROM ({matches}
          ) partition_matches ORDER BY chunk_id) m
          ORDER BY exact DESC, text_rank DESC, m.chunk_id
          LIMIT %(candidates)s) ranked
)"""
# BM25 in two steps. First each match gets the summed idf of the words that brought it, without reading its
# tsvector (which costs a decompression each time): the matches know which word found them. The RESCORE best
# by that sum (and every chunk an identifier brought) are then scored by BM25 proper, which reads each one's
# tsvector once per word for its weighted term frequency. Below RESCORE matches the ranking is exact; above,
# a chunk that shares only the question's commonest words with it may be left out, as the cap already does.
_TEXT_LEG_BM25 = """
text_hits AS (
    SELECT chunk_id, classification, row_number() OVER (ORDER BY exact DESC, text_rank DESC, chunk_id) AS rank, exact,
           text_rank::float8 AS score
    FROM (SELECT p.chunk_id, p.classification, p.exact,
                 sum(ww.idf * tf.tf * (%(k1)s + 1.0)
                     / nullif(tf.tf + %(k1)s * (1.0 - %(b)s + %(b)s * p.terms / corpus.avgdl), 0)) AS text_rank
          FROM (SELECT s.chunk_id, s.classification, s.terms, s.tsv, {exact} AS exact
                FROM (SELECT g.chunk_id, g.classification, g.doc_id, g.terms, v.tsv
                      FROM (SELECT chunk_id, classification, min(doc_id) AS doc_id, min(terms) AS terms,
                                   bool_or(lexeme IS NULL) AS by_identifier, coalesce(sum(ww.idf), 0) AS prescore
                            FROM ({matches}
                            ) partition_matches LEFT JOIN word_weights ww USING (lexeme)
                            GROUP BY chunk_id, classification
                            ORDER BY by_identifier DESC, prescore DESC, chunk_id
                            LIMIT %(rescore)s) g
                      -- setweight with no lexemes is a plain copy: the tsvector is decompressed once here, not
                      -- once per word below (OFFSET 0 keeps the planner from inlining it into each use).
                      CROSS JOIN LATERAL (SELECT setweight(v.tsv, 'b', '{{}}') AS tsv FROM kb.searchable_chunks v
                                          WHERE v.chunk_id = g.chunk_id AND v.classification = g.classification
                                          OFFSET 0) v
                     ) s
               ) p
          CROSS JOIN word_weights ww
          CROSS JOIN corpus
          CROSS JOIN LATERAL (SELECT ts_rank_cd(%(tf_weights)s::float4[], p.tsv, ww.word) * %(tf_scale)s AS tf) tf
          GROUP BY p.chunk_id, p.classification, p.exact
          ORDER BY p.exact DESC, text_rank DESC NULLS LAST, p.chunk_id
          LIMIT %(candidates)s) ranked
)"""
# Okapi BM25 (Lucene's idf, which is never negative) over the question's words. The statistics are read for
# the question's lexemes only, from the rows of kb.lexeme_stats and kb.text_stats this role may read (sql/008):
# exactly the partitions the leg ranks, so they say nothing about chunks above the role's ceiling. A word's
# df can only exceed the chunk count if the statistics were not kept (a bulk load): greatest() keeps the idf
# defined, and a missing average length makes every chunk average.
_BM25_STATS = """
corpus AS (
    SELECT coalesce(sum(chunks), 0)::float8 AS n,
           coalesce(sum(terms)::float8 / nullif(sum(chunks), 0), 1.0) AS avgdl
    FROM kb.text_stats
),
word_weights AS (
    SELECT q.lexeme, q.word, ln(1.0 + (greatest(corpus.n, f.df) - f.df + 0.5) / (f.df + 0.5)) AS idf
    FROM query CROSS JOIN LATERAL unnest(query.lexemes, query.words) AS q(lexeme, word)
    CROSS JOIN corpus
    CROSS JOIN LATERAL (SELECT coalesce(sum(s.chunks), 0)::float8 AS df
                        FROM kb.lexeme_stats s WHERE s.lexeme = q.lexeme) f
)"""
_FUSE_AND_FETCH = """
fused AS (
    SELECT chunk_id, classification,
           sum(CASE WHEN leg = 'vector' THEN %(vector_weight)s ELSE %(text_weight)s END
               * CASE WHEN %(convex)s THEN normalised ELSE 1.0 / (%(rrf_k)s + rank) END
               + CASE WHEN rank = 1 THEN %(first_bonus)s ELSE 0 END
               + %(identifier_bonus)s * exact) AS score,
           min(rank) FILTER (WHERE leg = 'vector') AS vector_rank,
           min(rank) FILTER (WHERE leg = 'text') AS text_rank,
           min(raw) FILTER (WHERE leg = 'vector') AS vector_score,
           min(raw) FILTER (WHERE leg = 'text') AS text_score
    FROM (SELECT chunk_id, classification, rank, leg, exact, raw,
                 -- the convex combination's scale: each leg's scores mapped onto [0, 1] over its candidates, or
                 -- ("zscore") measured from the leg's lowest candidate in the leg's standard deviations
                 coalesce((raw - min(raw) OVER (PARTITION BY leg))
                          / nullif(CASE WHEN %(zscore)s THEN stddev_pop(raw) OVER (PARTITION BY leg)
                                        ELSE max(raw) OVER (PARTITION BY leg) - min(raw) OVER (PARTITION BY leg) END,
                                   0), 1.0)
                     AS normalised
          FROM (SELECT chunk_id, classification, rank, 'vector' AS leg, 0 AS exact, score AS raw FROM vector_hits
                UNION ALL
                SELECT chunk_id, classification, rank, 'text' AS leg, exact, score AS raw FROM text_hits) both_legs
         ) legs
    GROUP BY chunk_id, classification
),
-- A table's row groups and the chunk holding the whole table share a key (sql: metadata rows_of, from the
-- chunker): only the best-scoring of them is shown, so a result never repeats a table's rows.
top AS (
    SELECT * FROM (SELECT DISTINCT ON (c.doc_id, c.table_key) f.*
                   FROM fused f
                   -- one primary-key lookup per fused chunk (OFFSET 0: never a scan of every chunk to join)
                   CROSS JOIN LATERAL (SELECT c.doc_id, coalesce((c.metadata->>'rows_of')::int, c.ordinal) AS table_key
                                       FROM kb.searchable_chunks c
                                       WHERE c.chunk_id = f.chunk_id AND c.classification = f.classification
                                       OFFSET 0) c
                   ORDER BY c.doc_id, c.table_key, f.score DESC, f.chunk_id
                  ) one_per_table
    ORDER BY score DESC, chunk_id LIMIT %(limit)s
)
SELECT d.doc_code, d.title, d.version, d.effective_date, d.department, c.section_path, c.anchor,
       c.content, t.score::float8, t.vector_rank, t.text_rank, c.injection_suspect, c.injection_rule,
       t.vector_score, t.text_score, d.status::text, d.withdrawn_at
FROM top t
JOIN kb.searchable_chunks c ON c.chunk_id = t.chunk_id AND c.classification = t.classification
JOIN kb.documents d ON d.doc_id = c.doc_id
ORDER BY t.score DESC, t.chunk_id
"""


# How the query text becomes a tsquery. websearch_to_tsquery joins the words with AND, so a question in
# plain language often matches no chunk at all (golden set: full-text recall@5 0.10); the OR form (each
# stemmed word of the question, stop words dropped, joined with |) finds the chunks that share its words.
# Ranked by Okapi BM25: ts_rank counts how often the words occur, with no inverse document frequency and
# no length normalisation, so a common word weighed as much as a rare, decisive one (NPL full-text MAP
# 0.228 with ts_rank; evals/report.md has the measurements). ts_rank and ts_rank_cd remain for the ablations.
# A query with no words left (only stop words) gives a NULL tsquery, which matches nothing.
TEXT_QUERY = "or"
TEXT_RANK = "bm25"
TEXT_RANKS = ("bm25", "ts_rank", "ts_rank_cd")
TEXT_QUERIES = {
    "websearch": "websearch_to_tsquery('english', %(text)s)",
    "or": "string_agg(quote_literal(lexeme), ' | ')::tsquery",
}
# The question's words (stemmed, stop words dropped), each its own tsquery, and each word's share of the cap.
# The department filter's chunks this role may read, counted up to FEW_ROWS, and each word's chunks.
_FILTERED = """,
           array_agg((SELECT coalesce(sum(s.chunks), 0) FROM kb.lexeme_stats s WHERE s.lexeme = words.lexeme)) AS dfs,
           -- NULL without a filter (%(departments)s NULL), so that no department path is taken
           CASE WHEN %(departments)s::text[] IS NOT NULL THEN
               (SELECT count(*) FROM (SELECT FROM kb.searchable_chunks f
                                      WHERE f.is_effective AND f.department = ANY(%(departments)s)
                                      LIMIT %(few_rows)s) filtered) END AS filtered"""
_QUERY_WORDS = """query AS (
    SELECT {tsq} AS tsq, array_agg(lexeme) AS lexemes, array_agg(quote_literal(lexeme)::tsquery) AS words,
           ceil(%(match_cap)s::float8 / nullif(count(*), 0))::int AS per_word,
           (SELECT coalesce(array_agg(p ORDER BY n), '{{}}')
            FROM unnest(%(identifiers)s::text[]) WITH ORDINALITY i(i, n), phraseto_tsquery('english', i) p
            WHERE numnode(p) > 0) AS exact,
           (SELECT coalesce(array_agg(i ORDER BY n), '{{}}')
            FROM unnest(%(identifiers)s::text[]) WITH ORDINALITY i(i, n), phraseto_tsquery('english', i) p
            WHERE numnode(p) > 0) AS exact_identifiers,
           (SELECT coalesce(array_agg(doc_id), '{{}}') FROM kb.documents
            WHERE doc_code = ANY(%(identifiers)s::text[]) AND status = 'effective') AS named_documents,
           -- the effective chunks this role may read (kb.text_stats holds only its partitions' rows)
           (SELECT coalesce(sum(chunks), 0) FROM kb.text_stats) AS readable{filtered}
    FROM (SELECT DISTINCT spelled.lexeme
          FROM unnest(to_tsvector('english', %(text)s)) AS asked(lexeme)
          -- the word as asked, and as the chunks this role may read spell it with or without hyphens ('emails'
          -- also finds 'e-mail', 'on-call' also 'oncall'; sql/013): the parser keeps a hyphenated word whole
          CROSS JOIN LATERAL (SELECT asked.lexeme
                              UNION
                              SELECT s.lexeme FROM kb.lexeme_stats s
                              WHERE %(hyphen_spellings)s
                                AND s.unhyphenated = replace(asked.lexeme, '-', '')) spelled
         ) AS words(lexeme)
)"""


def hybrid_sql(
    *,
    with_vector: bool,
    with_text: bool = True,
    text_query: str = TEXT_QUERY,
    text_rank: str = TEXT_RANK,
    with_identifiers: bool = True,
    as_of: bool = False,
    department_filter: bool = True,
) -> str:
    """The statement; a leg turned off is an empty set (degraded mode, and the evals' ablations). With
    `as_of`, it reads the versions in force on %(as_of)s instead of the current ones. Without
    `department_filter` (the caller knows %(departments)s is NULL) the department index paths are left out, and
    with them their planning time."""
    if text_rank not in TEXT_RANKS:
        raise ValueError(f"text_rank must be one of {TEXT_RANKS}")
    query = _QUERY_WORDS.format(tsq=TEXT_QUERIES[text_query], filtered=_FILTERED if department_filter else "")
    # The OR form shares the cap out among the words; the websearch (AND) form caps the whole query's matches.
    if text_query != "or":
        per_partition = _QUERY_MATCHES
    else:
        per_partition = _FILTERED_WORD_MATCHES if department_filter else _UNFILTERED_WORD_MATCHES
    if with_identifiers:
        per_partition += "\n          UNION ALL" + _IDENTIFIER_MATCHES
    current = _CURRENT_AS_OF.format(c="c.") if as_of else _CURRENT
    partitions = [per_partition.format(partition=p, current=current) for p in PARTITIONS]
    if as_of:
        partitions.append(_EARLIER_MATCHES.format(earlier=_EARLIER_AS_OF))
    matches = "\n          UNION ALL".join(partitions)
    legs = [query]
    if not with_text:
        text_leg = _NO_TEXT_LEG
    elif text_rank == "bm25":
        legs.append(_BM25_STATS)
        text_leg = _TEXT_LEG_BM25.format(matches=matches, exact=_EXACT.format(m="s"))
    else:
        text_leg = _TEXT_LEG.format(rank=text_rank, matches=matches, exact=_EXACT.format(m="m"))
    if not with_vector:
        vector_leg = _NO_VECTOR_LEG
    elif as_of:
        vector_leg = _VECTOR_LEG_AS_OF.format(nearest=_GRAPH_OR_ALL, earlier=_EARLIER_AS_OF).format(
            current=_CURRENT_AS_OF.format(c="")
        )
    else:
        vector_leg = _VECTOR_LEG.format(nearest=_GRAPH_OR_EXACT if department_filter else _GRAPH_OR_ALL).format(
            current=_CURRENT
        )
    legs += [vector_leg, text_leg]
    return "WITH " + ",".join([*([_IN_FORCE] if as_of else []), *legs]) + "," + _FUSE_AND_FETCH


def statement_params(
    *,
    text: str,
    vector: np.ndarray | None,
    departments: list[str] | None,
    limit: int,
    candidates: int = CANDIDATES,
    match_cap: int = MATCH_CAP,
    fusion: Fusion = DEFAULT_FUSION,
    bm25: Bm25 = DEFAULT_BM25,
    find_identifiers: bool = True,
    hyphen_spellings: bool = True,
    few_rows: int = FEW_ROWS,
    department_path_ratio: float = DEPARTMENT_PATH_RATIO,
    exact_rows: int = EXACT_ROWS,
) -> dict[str, object]:
    """Every parameter the statement names (`find_identifiers` or `hyphen_spellings` False: the evals'
    ablations; `few_rows` 0 turns the department index paths off, `exact_rows` 0 the exact search of a small
    collection)."""
    return {
        "text": text,
        "vector": vector,
        "departments": departments,
        "candidates": candidates,
        "match_cap": match_cap,
        "limit": limit,
        "rrf_k": fusion.rrf_k,
        "vector_weight": fusion.vector_weight,
        "text_weight": fusion.text_weight,
        "first_bonus": fusion.first_bonus,
        "convex": fusion.method in ("convex", "zscore"),
        "zscore": fusion.method == "zscore",
        "identifier_bonus": fusion.identifier_bonus,
        "identifiers": identifiers_in(text) if find_identifiers else [],
        "hyphen_spellings": hyphen_spellings,
        "as_of": None,
        "rescore": RESCORE_FACTOR * candidates,
        "few_rows": few_rows,
        "department_path_ratio": department_path_ratio,
        "exact_rows": exact_rows,
        **bm25.params(),
    }


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
    vector_score: float | None = None  # the leg's own score: cosine similarity
    text_score: float | None = None  # BM25 (or the ablations' ts_rank)
    status: str = "effective"  # the version's status today (superseded or withdrawn only in an as_of search)
    withdrawn_at: datetime | None = None

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
    fusion: Fusion = DEFAULT_FUSION,
    bm25: Bm25 | None = None,
    find_identifiers: bool = True,
    hyphen_spellings: bool = True,
    as_of: date | None = None,
    exact_rows: int = EXACT_ROWS,
) -> list[Hit]:
    """Run the hybrid query as `role` in one round trip; `vector` None runs the full-text leg alone. With
    `as_of`, each document answers with its version in force on that date. `bm25` None: the served setting for
    the hybrid, or the text leg's own when there is no vector."""
    if bm25 is None:
        bm25 = DEFAULT_BM25 if vector is not None else TEXT_ONLY_BM25
    params = statement_params(
        text=text,
        vector=vector,
        departments=departments,
        limit=limit,
        candidates=candidates,
        match_cap=match_cap,
        fusion=fusion,
        bm25=bm25,
        find_identifiers=find_identifiers,
        hyphen_spellings=hyphen_spellings,
        exact_rows=exact_rows,
    )
    params["as_of"] = as_of
    # A generic plan cannot see a date's or a department filter's selectivity (nor drop the NULL filter): at
    # 100k chunks it made an as_of search 85-90 ms and a 1% department filter 42 ms at p50, against 17 ms and
    # 8 ms planned for the values at hand. Unfiltered searches are planned each time too: at 1024 dimensions
    # (100k chunks) the generic plan orders every visible chunk by an exact distance instead of walking the
    # HNSW index, 300-460 ms against 19-41 ms planned for the vector at hand; ~6 ms of planning is the price.
    async with reader_transaction(conn, role, ef_search=ef_search, custom_plans=True) as tx:
        statement = hybrid_sql(
            with_vector=vector is not None,
            with_text=with_text,
            text_query=text_query,
            text_rank=text_rank,
            as_of=as_of is not None,
            department_filter=departments is not None,
        )
        cursor = await tx.execute(statement, params)
    return [Hit(*row) for row in await cursor.fetchall()]
