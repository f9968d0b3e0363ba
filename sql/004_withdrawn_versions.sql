-- 004: withdrawn versions are kept, not deleted.
--
-- Withdrawing a version (its source object removed) marks it `withdrawn` and records when, and the status it
-- had then: pinned citations and point-in-time (as_of) reads still resolve to what was in force, while
-- default reads never serve it. Its chunks keep their content and vectors with is_effective = false, so they
-- stay out of the partial search indexes of 003. KB_WITHDRAWN_RETENTION_DAYS decides how long they are kept.
--
-- ADD VALUE cannot be used in the transaction that adds it, so the check below compares status as text.
ALTER TYPE kb.doc_status ADD VALUE IF NOT EXISTS 'withdrawn';

ALTER TABLE kb.documents
    ADD COLUMN withdrawn_at   timestamptz,
    ADD COLUMN withdrawn_from kb.doc_status,  -- the status it had when withdrawn (a draft was never in force)
    ADD CONSTRAINT documents_withdrawn_when
        CHECK ((status::text = 'withdrawn') = (withdrawn_at IS NOT NULL AND withdrawn_from IS NOT NULL));

-- Point-in-time reads pick, per doc code, the latest version effective by a date.
CREATE INDEX documents_doc_code_effective_date ON kb.documents (doc_code, effective_date DESC, version_key DESC);
