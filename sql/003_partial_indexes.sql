-- 003: search indexes over effective chunks only, and a department index.
--
-- Search reads effective versions only (is_effective), so superseded chunks stay out of the HNSW graph
-- and the GIN index: the vector leg never spends its candidates on rows it would filter away. A small
-- department filter is answered best by the department index and an exact sort of the few rows it
-- selects; the planner chooses between that and the HNSW index by the filter's selectivity.
-- Index names on the partitions stay chunks_<classification>_embedding_idx / _tsv_idx.

DROP INDEX kb.chunks_embedding_hnsw;
CREATE INDEX chunks_embedding_hnsw ON kb.chunks USING hnsw (embedding vector_cosine_ops)
    WITH (m = 16, ef_construction = 64) WHERE is_effective;

DROP INDEX kb.chunks_tsv_gin;
CREATE INDEX chunks_tsv_gin ON kb.chunks USING gin (tsv) WITH (fastupdate = off) WHERE is_effective;

CREATE INDEX chunks_department ON kb.chunks (department) WHERE is_effective;
