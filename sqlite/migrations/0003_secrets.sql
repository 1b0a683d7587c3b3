-- paddock state, version 3: the names of the secrets a run declared (a JSON
-- array). Values are never stored.
ALTER TABLE runs ADD COLUMN secrets TEXT;
