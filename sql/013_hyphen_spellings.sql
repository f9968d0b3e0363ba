-- 013: a word is found however its hyphens are written. The text parser keeps a hyphenated word whole
-- ('E-mail' is the lexeme 'e-mail', besides 'e' and 'mail'), so a question that says "emails" never matched a
-- chunk that says "E-mail" (nor "oncall" one that says "on-call"). The full-text leg adds to the question's
-- words the lexemes this role may read that are the same word with or without hyphens (src/kb_server/search.py).
--
-- Stored, not an index on the expression: under the row policy only a leakproof condition may use an index,
-- and replace() is not leakproof; an equality on a column is.
ALTER TABLE kb.lexeme_stats ADD COLUMN unhyphenated text GENERATED ALWAYS AS (replace(lexeme, '-', '')) STORED;
CREATE INDEX lexeme_stats_unhyphenated ON kb.lexeme_stats (unhyphenated);
