-- 008: the statistics Okapi BM25 needs, kept per classification partition.
--
-- BM25 weighs a word by its inverse document frequency (how few chunks contain it) and a chunk by its length
-- against the average; ts_rank has neither. The full-text leg (src/kb_server/search.py) reads, for the
-- question's lexemes only, how many effective chunks contain each (kb.lexeme_stats) and how many effective
-- chunks there are and how long they are (kb.text_stats).
--
-- A role must learn nothing about rows above its ceiling, not even how many chunks contain a word: so the
-- statistics are kept per classification and a reader sees only the rows of the classifications it may read
-- (the same per-row policy as kb.chunks; the lexeme is an equality on the primary key, which is leakproof, so
-- the policy does not cost the index). The query sums what it can see: the statistics of exactly the
-- partitions its full-text leg reads.
--
-- The writer keeps them in the same transaction as the chunks: kb.count_text_stats(doc_ids, +1) after a
-- version's effective chunks are stored, and (doc_ids, -1) before effective chunks stop being effective
-- (superseded), are replaced or are deleted (withdrawn). kb.rebuild_text_stats() recounts everything, for a
-- bulk load that bypassed the writer.

-- Chunk length in lexeme occurrences (stop words dropped), counted from the same text as tsv: a generated
-- column may not read another generated column, so the tsvector is built again here.
CREATE FUNCTION kb.chunk_terms(title text, section_path text, content text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT coalesce(sum(array_length(positions, 1)), 0)::integer
          FROM unnest(to_tsvector('english', title || ' ' || section_path) || to_tsvector('english', content)) $$;

ALTER TABLE kb.chunks ADD COLUMN terms integer
    GENERATED ALWAYS AS (kb.chunk_terms(title, section_path, content)) STORED;

-- No CHECK (chunks >= 0): INSERT ... ON CONFLICT checks the row it proposes (-1) before it finds the conflict.
CREATE TABLE kb.lexeme_stats (
    classification  kb.classification NOT NULL,
    lexeme          text NOT NULL,
    chunks          integer NOT NULL,  -- effective chunks of this classification containing it
    PRIMARY KEY (lexeme, classification)
);

CREATE TABLE kb.text_stats (
    classification  kb.classification PRIMARY KEY,
    chunks          bigint NOT NULL,   -- effective chunks
    terms           bigint NOT NULL    -- their summed kb.chunks.terms
);

-- kb_server too, as for the chunks: on its own it has no policy, so it reads zero rows.
GRANT SELECT ON kb.lexeme_stats, kb.text_stats TO demo_readonly, support_agent, analyst, compliance_officer, kb_server;
GRANT SELECT, INSERT, UPDATE, DELETE ON kb.lexeme_stats, kb.text_stats TO kb_ingest;

ALTER TABLE kb.lexeme_stats ENABLE ROW LEVEL SECURITY;
ALTER TABLE kb.lexeme_stats FORCE ROW LEVEL SECURITY;
ALTER TABLE kb.text_stats ENABLE ROW LEVEL SECURITY;
ALTER TABLE kb.text_stats FORCE ROW LEVEL SECURITY;
CREATE POLICY within_ceiling ON kb.lexeme_stats FOR SELECT
    TO demo_readonly, support_agent, analyst, compliance_officer
    USING (classification <= kb.role_ceiling());
CREATE POLICY within_ceiling ON kb.text_stats FOR SELECT
    TO demo_readonly, support_agent, analyst, compliance_officer
    USING (classification <= kb.role_ceiling());
CREATE POLICY writer ON kb.lexeme_stats FOR ALL TO kb_ingest USING (true) WITH CHECK (true);
CREATE POLICY writer ON kb.text_stats FOR ALL TO kb_ingest USING (true) WITH CHECK (true);

-- Add (direction +1) or take away (-1) the effective chunks of these documents. Writers take one advisory lock
-- first, held to their commit: two ingests updating the same lexemes' counters in different orders would
-- otherwise deadlock, and the stores that follow are short.
CREATE FUNCTION kb.count_text_stats(doc_ids bigint[], direction integer) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF direction NOT IN (1, -1) THEN
        RAISE EXCEPTION 'direction must be 1 or -1';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('kb.text_stats', 0));
    INSERT INTO kb.lexeme_stats AS s (classification, lexeme, chunks)
    SELECT c.classification, l.lexeme, direction * count(*)
    FROM kb.chunks c CROSS JOIN LATERAL unnest(c.tsv) AS l
    WHERE c.doc_id = ANY(doc_ids) AND c.is_effective
    GROUP BY 1, 2
    ORDER BY 2, 1
    ON CONFLICT (lexeme, classification) DO UPDATE SET chunks = s.chunks + excluded.chunks;
    DELETE FROM kb.lexeme_stats s USING (
        SELECT DISTINCT c.classification, l.lexeme
        FROM kb.chunks c CROSS JOIN LATERAL unnest(c.tsv) AS l
        WHERE c.doc_id = ANY(doc_ids) AND c.is_effective) gone
    WHERE direction = -1 AND s.chunks = 0 AND s.lexeme = gone.lexeme AND s.classification = gone.classification;
    INSERT INTO kb.text_stats AS s (classification, chunks, terms)
    SELECT classification, direction * count(*), direction * coalesce(sum(terms), 0)
    FROM kb.chunks WHERE doc_id = ANY(doc_ids) AND is_effective
    GROUP BY 1
    ORDER BY 1
    ON CONFLICT (classification) DO UPDATE SET chunks = s.chunks + excluded.chunks, terms = s.terms + excluded.terms;
END $$;

CREATE FUNCTION kb.rebuild_text_stats() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('kb.text_stats', 0));
    DELETE FROM kb.lexeme_stats;
    DELETE FROM kb.text_stats;
    INSERT INTO kb.lexeme_stats (classification, lexeme, chunks)
    SELECT c.classification, l.lexeme, count(*)
    FROM kb.chunks c CROSS JOIN LATERAL unnest(c.tsv) AS l
    WHERE c.is_effective
    GROUP BY 1, 2;
    INSERT INTO kb.text_stats (classification, chunks, terms)
    SELECT classification, count(*), coalesce(sum(terms), 0) FROM kb.chunks WHERE is_effective GROUP BY 1;
END $$;

REVOKE ALL ON FUNCTION kb.count_text_stats(bigint[], integer), kb.rebuild_text_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kb.count_text_stats(bigint[], integer), kb.rebuild_text_stats() TO kb_ingest;

-- The view search reads lists its columns as they were when it was made (002): add the chunk length.
CREATE OR REPLACE VIEW kb.searchable_chunks WITH (security_invoker = true) AS
          SELECT * FROM kb.chunks_public
UNION ALL SELECT * FROM kb.chunks_internal
UNION ALL SELECT * FROM kb.chunks_confidential
UNION ALL SELECT * FROM kb.chunks_restricted;
