-- 007: which version of the injection scanner flagged (or cleared) each chunk.
--
-- When the scanner's rules change, `kb rescan` re-scans the chunks stored by an older version and
-- rewrites their flags in place: the text, and so the embedding, is unchanged, so nothing is re-embedded.
-- Chunks stored before this column existed are version 0 (older than any scanner that records itself).

ALTER TABLE kb.chunks ADD COLUMN scanner_version integer NOT NULL DEFAULT 0 CHECK (scanner_version >= 0);
CREATE INDEX chunks_scanner_version ON kb.chunks (scanner_version);
