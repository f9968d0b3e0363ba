-- 014: the audit record says which of the chunks an answer carried were flagged as looking like instructions
-- to an AI (injection_suspect): an auditor asking "what did the caller's model read, and was it warned?" had
-- only the citations, and the flag of each lived in the chunks, which a later rescan may change.
--
-- The citations, not the chunks' ids: a record names what the caller was shown, in the caller's own terms.
-- Written, like the other columns, by kb_server and the four reader logins (sql/010), and by nothing else.

ALTER TABLE kb.audit_log ADD COLUMN flagged text[] NOT NULL DEFAULT '{}';
GRANT INSERT (flagged) ON kb.audit_log
    TO kb_server, kb_server_demo_readonly, kb_server_support_agent, kb_server_analyst, kb_server_compliance_officer;
