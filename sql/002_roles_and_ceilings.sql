-- 002: roles, grants and row-level security (the LLD's "data model §7").
--
-- Four reader roles, each with a classification ceiling:
--
--   role                 ceiling        sees
--   demo_readonly        public         public
--   support_agent        internal       public, internal
--   analyst              confidential   public, internal, confidential
--   compliance_officer   restricted     everything
--
-- Logins: kb_server (the MCP server) is NOINHERIT and a member of the four reader roles, so it
-- holds none of their rights until a request runs SET LOCAL ROLE; on its own it sees zero rows.
-- kb_ingest (the worker) writes. Neither owns a table, is a superuser, or has BYPASSRLS. Every
-- table holding document content or metadata has row-level security ENABLEd and FORCEd, so even
-- its owner is bound by the policies.
--
-- Why chunks are partitioned by classification: under a policy such as
-- USING (classification <= ceiling), PostgreSQL must evaluate the policy before any qual that is
-- not LEAKPROOF, and `tsv @@ query` is not, so it can no longer be a GIN index condition: the
-- full-text leg becomes a sequential scan (327 ms instead of 0.6 ms at 100k chunks). Only a
-- superuser can mark a function LEAKPROOF, and managed PostgreSQL has none. So the ceiling is
-- not a per-row qual on the tables search reads: each partition holds one classification, and
-- its policy names the roles allowed to read it with USING (true). For an allowed role the
-- planner adds no qual at all, so both legs stay on their indexes; for any other role there is
-- no policy, RLS denies by default, and the planner replaces the scan with `One-Time Filter:
-- false`. The ceiling is as strict as a per-row policy: it is enforced by PostgreSQL, per table.
-- kb.chunks itself (the parent) keeps a classic per-row policy for plain reads.

-- Roles are cluster-wide, so they may exist already (another database, an earlier run). Only a superuser
-- may change SUPERUSER or BYPASSRLS, and managed PostgreSQL gives none: so this creates the logins without
-- them and refuses to go on if an existing login has either, rather than trying to alter it.
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['demo_readonly', 'support_agent', 'analyst', 'compliance_officer'] LOOP
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'kb_server') THEN
        CREATE ROLE kb_server LOGIN NOINHERIT;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'kb_ingest') THEN
        CREATE ROLE kb_ingest LOGIN;
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname IN ('kb_server', 'kb_ingest', 'demo_readonly', 'support_agent',
                                                       'analyst', 'compliance_officer')
               AND (rolsuper OR rolbypassrls)) THEN
        RAISE EXCEPTION 'a kosha-kb role is a superuser or bypasses row-level security: remove that first';
    END IF;
    IF (SELECT rolinherit FROM pg_roles WHERE rolname = 'kb_server') THEN
        ALTER ROLE kb_server NOINHERIT;  -- it must hold no reader's rights until it switches role
    END IF;
END $$;

GRANT demo_readonly, support_agent, analyst, compliance_officer TO kb_server;

DO $$
BEGIN
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO kb_server, kb_ingest', current_database());
END $$;

CREATE TABLE kb.role_ceilings (
    role_name  name PRIMARY KEY,
    ceiling    kb.classification NOT NULL
);
INSERT INTO kb.role_ceilings VALUES
    ('demo_readonly', 'public'),
    ('support_agent', 'internal'),
    ('analyst', 'confidential'),
    ('compliance_officer', 'restricted');

-- NULL (no rows) for any role that is not a reader role, kb_server included.
CREATE FUNCTION kb.role_ceiling() RETURNS kb.classification
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT ceiling FROM kb.role_ceilings WHERE role_name = current_user $$;

-- Reader grants. Readers may read documents, chunks and the chunk partitions; RLS decides the rows.
GRANT USAGE ON SCHEMA kb TO demo_readonly, support_agent, analyst, compliance_officer, kb_server, kb_ingest;
GRANT SELECT ON kb.role_ceilings, kb.departments, kb.embedding_space
    TO demo_readonly, support_agent, analyst, compliance_officer, kb_server, kb_ingest;
GRANT SELECT ON kb.documents, kb.chunks,
                kb.chunks_public, kb.chunks_internal, kb.chunks_confidential, kb.chunks_restricted
    TO demo_readonly, support_agent, analyst, compliance_officer, kb_server;

-- Writer grants: the writer works through the parent table; rows are routed to partitions.
GRANT SELECT, INSERT, UPDATE, DELETE ON kb.documents, kb.chunks TO kb_ingest;
GRANT SELECT, INSERT ON kb.ingest_log TO kb_ingest;

ALTER TABLE kb.documents ENABLE ROW LEVEL SECURITY;
ALTER TABLE kb.documents FORCE ROW LEVEL SECURITY;
ALTER TABLE kb.chunks ENABLE ROW LEVEL SECURITY;
ALTER TABLE kb.chunks FORCE ROW LEVEL SECURITY;
ALTER TABLE kb.ingest_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE kb.ingest_log FORCE ROW LEVEL SECURITY;

CREATE POLICY documents_within_ceiling ON kb.documents FOR SELECT
    TO demo_readonly, support_agent, analyst, compliance_officer
    USING (classification <= kb.role_ceiling());
CREATE POLICY documents_writer ON kb.documents FOR ALL TO kb_ingest USING (true) WITH CHECK (true);

CREATE POLICY chunks_within_ceiling ON kb.chunks FOR SELECT
    TO demo_readonly, support_agent, analyst, compliance_officer
    USING (classification <= kb.role_ceiling());
CREATE POLICY chunks_writer ON kb.chunks FOR ALL TO kb_ingest USING (true) WITH CHECK (true);

CREATE POLICY ingest_log_writer ON kb.ingest_log FOR ALL TO kb_ingest USING (true) WITH CHECK (true);

-- The partitions: one classification each, readable by the roles whose ceiling reaches it.
ALTER TABLE kb.chunks_public ENABLE ROW LEVEL SECURITY;
ALTER TABLE kb.chunks_public FORCE ROW LEVEL SECURITY;
CREATE POLICY readers ON kb.chunks_public FOR SELECT
    TO demo_readonly, support_agent, analyst, compliance_officer USING (true);

ALTER TABLE kb.chunks_internal ENABLE ROW LEVEL SECURITY;
ALTER TABLE kb.chunks_internal FORCE ROW LEVEL SECURITY;
CREATE POLICY readers ON kb.chunks_internal FOR SELECT
    TO support_agent, analyst, compliance_officer USING (true);

ALTER TABLE kb.chunks_confidential ENABLE ROW LEVEL SECURITY;
ALTER TABLE kb.chunks_confidential FORCE ROW LEVEL SECURITY;
CREATE POLICY readers ON kb.chunks_confidential FOR SELECT
    TO analyst, compliance_officer USING (true);

ALTER TABLE kb.chunks_restricted ENABLE ROW LEVEL SECURITY;
ALTER TABLE kb.chunks_restricted FORCE ROW LEVEL SECURITY;
CREATE POLICY readers ON kb.chunks_restricted FOR SELECT
    TO compliance_officer USING (true);

-- What search reads: the four partitions as one relation. security_invoker makes each
-- partition's policy apply to the caller, not to the view's owner.
CREATE VIEW kb.searchable_chunks WITH (security_invoker = true) AS
          SELECT * FROM kb.chunks_public
UNION ALL SELECT * FROM kb.chunks_internal
UNION ALL SELECT * FROM kb.chunks_confidential
UNION ALL SELECT * FROM kb.chunks_restricted;
GRANT SELECT ON kb.searchable_chunks TO demo_readonly, support_agent, analyst, compliance_officer, kb_server;
