-- 011: the HNSW index holds half-precision copies of the vectors; the table keeps full precision.
--
-- Measured (bench/results.md, "Storage and HNSW settings"; 100,000 chunks × 1024 dimensions, m 16,
-- ef_construction 64): the vector index is 781 MB, the halfvec expression index 261 MB. A 1024-d vector is
-- 4 KB, so each graph element fills half an 8 KB page and only one fits per page; at 2 KB three do. That is
-- 7.8 against 2.6 GB per million chunks, which decides how many chunks one server keeps in memory. Build time
-- was the same (127 s against 134 s), and recall@10 against an exact full-precision scan as good or better
-- at every ef_search (0.997 against 0.970 at ef_search 40, unfiltered; 1.000 at 80 for both): float16 keeps
-- ~3 significant digits of each coordinate, and the distances move less than the gaps HNSW must tell apart.
--
-- The column stays vector(d): nothing is re-embedded or rewritten, the index is rebuilt from the stored
-- vectors: ~30 min per million 1024-d chunks on 2 busy cores (n log n from 134 s at 100k), during which searches
-- wait (the migration holds the table's lock); run it in a quiet hour.
-- Search orders by kb.searchable_chunks.embedding_key, the same expression as the index, so the planner
-- uses it; ordering by `embedding` itself is still correct, but an exact scan.
DO $$
DECLARE
    d integer := (SELECT dimensions FROM kb.embedding_space);
BEGIN
    DROP INDEX kb.chunks_embedding_hnsw;
    -- The partitions' indexes keep their names, chunks_<classification>_embedding_idx (named after the column).
    EXECUTE format(
        'CREATE INDEX chunks_embedding_hnsw ON kb.chunks USING hnsw ((embedding::halfvec(%s)) halfvec_cosine_ops)'
        ' WITH (m = 16, ef_construction = 64) WHERE is_effective', d);
    EXECUTE format(
        'CREATE OR REPLACE VIEW kb.searchable_chunks WITH (security_invoker = true) AS'
        '          SELECT *, embedding::halfvec(%1$s) AS embedding_key FROM kb.chunks_public'
        ' UNION ALL SELECT *, embedding::halfvec(%1$s) FROM kb.chunks_internal'
        ' UNION ALL SELECT *, embedding::halfvec(%1$s) FROM kb.chunks_confidential'
        ' UNION ALL SELECT *, embedding::halfvec(%1$s) FROM kb.chunks_restricted', d);
END $$;
