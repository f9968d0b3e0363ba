-- The server's and the writer's logins may read the migration ledger, so a server can tell at start-up
-- and on /readyz whether its database is migrated to the level it was built for (kb_core.db.readiness).
GRANT SELECT ON kb.schema_migrations TO kb_server, kb_ingest;
