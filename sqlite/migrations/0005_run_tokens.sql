-- paddock state, version 5: a bootstrapped run's bearer token, as a sha256
-- hash (the token itself is never stored).
ALTER TABLE runs ADD COLUMN token_hash TEXT;
CREATE UNIQUE INDEX runs_token_hash ON runs(token_hash) WHERE token_hash IS NOT NULL;
