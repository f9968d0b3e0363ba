-- 012: kb.ingest_log records 'deferred': a message the Lambda worker handed back to the queue unstarted, because
-- its invocation had no time left to start it (ingest.worker.invocation_deadline). Not 'failed': nothing about the
-- file failed, and it is delivered again. But a hand-back still counts a receive: should a message reach the
-- dead-letter queue that way, this is the reason `kb aws status` shows for it.

ALTER TABLE kb.ingest_log DROP CONSTRAINT ingest_log_outcome_check;
ALTER TABLE kb.ingest_log ADD CONSTRAINT ingest_log_outcome_check
    CHECK (outcome IN ('ingested', 'unchanged', 'failed', 'withdrawn', 'deferred'));
