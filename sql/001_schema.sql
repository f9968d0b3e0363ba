-- 001: the knowledge base's tables.
--
-- The embedding column's dimension is not known to this file: `kb db migrate` sets
-- kb.embedding_model and kb.embedding_dimensions (from the configured embedder) for the
-- transaction, and kb.embedding_space records them. Every later ingest and query checks
-- its embedder against that record, so vectors of different models are never compared.

CREATE EXTENSION IF NOT EXISTS vector;
CREATE SCHEMA IF NOT EXISTS kb;

CREATE TYPE kb.classification AS ENUM ('public', 'internal', 'confidential', 'restricted');
CREATE TYPE kb.doc_status AS ENUM ('effective', 'superseded', 'draft');

CREATE TABLE kb.embedding_space (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    model       text NOT NULL,
    dimensions  integer NOT NULL CHECK (dimensions BETWEEN 1 AND 2000),
    created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO kb.embedding_space (model, dimensions)
VALUES (current_setting('kb.embedding_model'), current_setting('kb.embedding_dimensions')::integer);

CREATE TABLE kb.departments (
    slug  text PRIMARY KEY,
    code  text NOT NULL UNIQUE CHECK (code ~ '^[A-Z]{3}$'),
    name  text NOT NULL
);
INSERT INTO kb.departments (slug, code, name) VALUES
    ('compliance',  'CMP', 'Compliance'),
    ('risk',        'RSK', 'Risk Management'),
    ('payments',    'PAY', 'Payments Operations'),
    ('lending',     'LND', 'Lending'),
    ('support',     'CSP', 'Customer Support'),
    ('security',    'SEC', 'Information Security'),
    ('engineering', 'ENG', 'Engineering and Platform'),
    ('finance',     'FIN', 'Finance'),
    ('legal',       'LEG', 'Legal');

CREATE TABLE kb.documents (
    doc_id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    doc_code          text NOT NULL CHECK (doc_code ~ '^[A-Z]{3}-[A-Z]{3}-[0-9]{3,6}$'),
    version           text NOT NULL CHECK (version ~ '^[0-9]+(\.[0-9]+)*$'),
    version_key       integer[] NOT NULL,  -- '3.10' sorts after '3.9'
    title             text NOT NULL,
    status            kb.doc_status NOT NULL,
    effective_date    date NOT NULL,
    owner             text NOT NULL,
    department        text NOT NULL REFERENCES kb.departments (slug),
    classification    kb.classification NOT NULL,
    regulatory_refs   text[] NOT NULL DEFAULT '{}',
    source_uri        text NOT NULL,
    source_format     text NOT NULL,
    source_sha256     text NOT NULL CHECK (source_sha256 ~ '^[0-9a-f]{64}$'),
    embedding_tokens  integer NOT NULL DEFAULT 0,  -- tokens sent to the embedder for this version
    ingested_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (doc_code, version)
);
-- At most one effective version per doc code, whatever the writer does.
CREATE UNIQUE INDEX documents_one_effective_version ON kb.documents (doc_code) WHERE status = 'effective';
CREATE INDEX documents_source_uri ON kb.documents (source_uri);

-- Chunks are partitioned by classification so that each ceiling's slice is its own table
-- with its own HNSW and GIN indexes; see 002 for why that matters under row-level security.
CREATE TABLE kb.chunks (
    chunk_id           bigint GENERATED ALWAYS AS IDENTITY,
    doc_id             bigint NOT NULL REFERENCES kb.documents (doc_id) ON DELETE CASCADE,
    classification     kb.classification NOT NULL,  -- copied from the document: the partition key
    department         text NOT NULL,               -- copied from the document: filtered inside the index scan
    is_effective       boolean NOT NULL,            -- copied from documents.status = 'effective'
    ordinal            integer NOT NULL CHECK (ordinal >= 0),
    section_path       text NOT NULL,
    anchor             text NOT NULL,               -- the citation fragment: '4.2'
    title              text NOT NULL,               -- the document title, for the full-text index
    content            text NOT NULL,
    token_count        integer NOT NULL CHECK (token_count >= 0),
    embedding_sha256   text NOT NULL,               -- of the embedded text, so unchanged chunks are never re-embedded
    injection_suspect  boolean NOT NULL DEFAULT false,
    injection_rule     text,
    metadata           jsonb NOT NULL DEFAULT '{}',
    tsv                tsvector GENERATED ALWAYS AS (
                           setweight(to_tsvector('english', title || ' ' || section_path), 'A')
                           || setweight(to_tsvector('english', content), 'B')
                       ) STORED,
    PRIMARY KEY (chunk_id, classification),
    UNIQUE (doc_id, ordinal, classification),
    CHECK (injection_suspect = (injection_rule IS NOT NULL))
) PARTITION BY LIST (classification);

CREATE TABLE kb.chunks_public       PARTITION OF kb.chunks FOR VALUES IN ('public');
CREATE TABLE kb.chunks_internal     PARTITION OF kb.chunks FOR VALUES IN ('internal');
CREATE TABLE kb.chunks_confidential PARTITION OF kb.chunks FOR VALUES IN ('confidential');
CREATE TABLE kb.chunks_restricted   PARTITION OF kb.chunks FOR VALUES IN ('restricted');

DO $$
BEGIN
    EXECUTE format('ALTER TABLE kb.chunks ADD COLUMN embedding vector(%s) NOT NULL',
                   current_setting('kb.embedding_dimensions')::integer);
END $$;

CREATE INDEX chunks_embedding_hnsw ON kb.chunks USING hnsw (embedding vector_cosine_ops)
    WITH (m = 16, ef_construction = 64);
-- fastupdate off: a pending list makes GIN scans look (and be) expensive until the next vacuum.
CREATE INDEX chunks_tsv_gin ON kb.chunks USING gin (tsv) WITH (fastupdate = off);
CREATE INDEX chunks_doc ON kb.chunks (doc_id);
CREATE INDEX chunks_embedding_sha256 ON kb.chunks (embedding_sha256);

-- Every document version the writer saw, and what became of it: the ops engineer's audit trail.
CREATE TABLE kb.ingest_log (
    event_id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at             timestamptz NOT NULL DEFAULT now(),
    source_uri     text NOT NULL,
    source_sha256  text,
    outcome        text NOT NULL CHECK (outcome IN ('ingested', 'unchanged', 'failed', 'withdrawn')),
    doc_code       text,
    version        text,
    chunks         integer,
    embedding_tokens integer,
    detail         text
);
