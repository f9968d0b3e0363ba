-- 005: the retrieval audit log: one record per tool call and resource read, append-only.
--
-- Who may do what (grants, enforced by PostgreSQL):
--   kb_server           INSERT only, of every column but the time and the id (the MCP server writes each
--                       record before its answer leaves)
--   compliance_officer  SELECT only (compliance staff read it: `kb audit`)
--   the owner           reads it and prunes it through kb.prune_audit_log() only
--   everyone else       nothing (the other reader roles and kb_ingest neither read nor write it)
-- No role is granted UPDATE, DELETE or TRUNCATE. Because the owner could still issue them, triggers
-- refuse UPDATE and TRUNCATE always, and DELETE unless it comes from kb.prune_audit_log() run by the owner
-- (which announces its cut-off in a transaction-local setting) and the row is older than that cut-off.

CREATE TABLE kb.audit_log (
    audit_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    caller        text NOT NULL,                 -- token name over HTTP; KB_STDIO_CALLER over stdio
    role          text NOT NULL,                 -- the reader role the request ran as
    transport     text NOT NULL CHECK (transport IN ('stdio', 'http', 'cli')),
    kind          text NOT NULL CHECK (kind IN ('tool', 'resource', 'maintenance')),
    operation     text NOT NULL,                 -- tool name, resource URI, or 'audit prune'
    arguments     jsonb NOT NULL DEFAULT '{}',   -- the query text included
    citations     text[] NOT NULL DEFAULT '{}',  -- the kb:// citations the answer carried
    doc_codes     text[] NOT NULL DEFAULT '{}',  -- the doc codes named by the arguments and the citations
    result_count  integer NOT NULL DEFAULT 0 CHECK (result_count >= 0),
    degraded      boolean NOT NULL DEFAULT false,
    outcome       text NOT NULL CHECK (outcome IN ('ok', 'error')),
    error         text,
    duration_ms   double precision NOT NULL CHECK (duration_ms >= 0)
);
CREATE INDEX audit_log_at ON kb.audit_log (at);
CREATE INDEX audit_log_caller ON kb.audit_log (caller, at);
CREATE INDEX audit_log_doc_codes ON kb.audit_log USING gin (doc_codes);

REVOKE ALL ON kb.audit_log FROM PUBLIC;
-- Column by column, so the server cannot choose a record's time or id (no back-dated records).
GRANT INSERT (caller, role, transport, kind, operation, arguments, citations, doc_codes, result_count, degraded,
              outcome, error, duration_ms) ON kb.audit_log TO kb_server;
GRANT SELECT ON kb.audit_log TO compliance_officer;

-- Row-level security as a second lock on reading: only the compliance role has a SELECT policy, and only
-- the server's login an INSERT policy. The owner (the operator) is not bound by it (not FORCEd): it owns
-- the table and may read it; its writes other than INSERT are stopped by the triggers below.
ALTER TABLE kb.audit_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY audit_readers ON kb.audit_log FOR SELECT TO compliance_officer USING (true);
CREATE POLICY audit_writer ON kb.audit_log FOR INSERT TO kb_server WITH CHECK (true);

CREATE FUNCTION kb.audit_log_is_append_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    cutoff text := current_setting('kb.audit_prune_before', true);
BEGIN
    IF TG_OP = 'DELETE'
       AND cutoff IS NOT NULL AND cutoff <> ''
       AND pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'USAGE')
       AND OLD.at < cutoff::timestamptz THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'kb.audit_log is append-only: % is not allowed (records are removed only by kb audit prune)',
        TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON kb.audit_log
    FOR EACH ROW EXECUTE FUNCTION kb.audit_log_is_append_only();
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON kb.audit_log
    FOR EACH ROW EXECUTE FUNCTION kb.audit_log_is_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON kb.audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION kb.audit_log_is_append_only();

-- The privileged prune path: deletes records older than `older_than` and returns how many. Only the owner
-- may run it (EXECUTE is revoked from everyone else, and the trigger checks the owner again).
CREATE FUNCTION kb.prune_audit_log(older_than interval) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
    cutoff timestamptz := now() - older_than;
    removed bigint;
BEGIN
    IF older_than < interval '1 day' THEN
        RAISE EXCEPTION 'audit records younger than a day are never pruned (asked: older than %)', older_than;
    END IF;
    PERFORM set_config('kb.audit_prune_before', cutoff::text, true);
    DELETE FROM kb.audit_log WHERE at < cutoff;
    GET DIAGNOSTICS removed = ROW_COUNT;
    PERFORM set_config('kb.audit_prune_before', '', true);
    RETURN removed;
END $$;
REVOKE ALL ON FUNCTION kb.prune_audit_log(interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION kb.audit_log_is_append_only() FROM PUBLIC;
