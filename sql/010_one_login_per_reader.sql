-- 010: one database login per reader role, so a connection used for one role cannot become another.
--
-- Until now the server's one login, kb_server, was a member of all four reader roles. SET LOCAL ROLE
-- switched it per request, but membership is checked against the session user: on that connection
-- `SET ROLE compliance_officer` or `RESET ROLE; SET ROLE ...` worked from inside any request. No path
-- sent such SQL, but one future bug would have been a full read.
--
-- Now each reader role has its own login, kb_server_<role>, a member of that role and nothing else:
--
--   login                           may become
--   kb_server_demo_readonly         demo_readonly
--   kb_server_support_agent         support_agent
--   kb_server_analyst               analyst
--   kb_server_compliance_officer    compliance_officer
--
-- They are NOINHERIT like kb_server was: on its own a login sees zero rows, and a request still runs
-- SET LOCAL ROLE <its role> (kb_server.db.reader). The server keeps one pool per login and answers a
-- caller only on the pool of the caller's role. kb_server stays a login with no reader role: the
-- readiness check and the embedding-space check use it. The logins have no password here; the operator
-- of a managed PostgreSQL gives them the kb_server password (README, "Run it in production").

DO $$
DECLARE
    r text;
    login text;
BEGIN
    FOREACH r IN ARRAY ARRAY['demo_readonly', 'support_agent', 'analyst', 'compliance_officer'] LOOP
        login := 'kb_server_' || r;
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = login) THEN
            EXECUTE format('CREATE ROLE %I LOGIN NOINHERIT', login);
        END IF;
        IF EXISTS (SELECT FROM pg_roles WHERE rolname = login AND (rolsuper OR rolbypassrls)) THEN
            RAISE EXCEPTION 'login % is a superuser or bypasses row-level security: remove that first', login;
        END IF;
        EXECUTE format('ALTER ROLE %I NOINHERIT', login);
        EXECUTE format('GRANT %I TO %I', r, login);
        EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), login);
        EXECUTE format('GRANT USAGE ON SCHEMA kb TO %I', login);
        -- What kb_server itself could read outside a role switch, so a request's checks read the same.
        EXECUTE format('GRANT SELECT ON kb.schema_migrations, kb.embedding_space, kb.role_ceilings, kb.departments TO %I',
                       login);
        -- The audit record is written on the connection the call read with, after its transaction.
        EXECUTE format('GRANT INSERT (caller, role, transport, kind, operation, arguments, citations, doc_codes, '
                       'result_count, degraded, outcome, error, duration_ms) ON kb.audit_log TO %I', login);
    END LOOP;
    -- A login that is a member of another login's roles (granted by hand) could still escalate.
    IF EXISTS (SELECT FROM pg_auth_members m
               JOIN pg_roles l ON l.oid = m.member
               JOIN pg_roles g ON g.oid = m.roleid
               WHERE l.rolname LIKE 'kb\_server\_%' AND g.rolname <> substr(l.rolname, 11)) THEN
        RAISE EXCEPTION 'a kb_server_<role> login is a member of a role other than its own: revoke it first';
    END IF;
END $$;

ALTER POLICY audit_writer ON kb.audit_log
    TO kb_server, kb_server_demo_readonly, kb_server_support_agent, kb_server_analyst, kb_server_compliance_officer;

-- kb_server can no longer become a reader at all.
REVOKE demo_readonly, support_agent, analyst, compliance_officer FROM kb_server;
