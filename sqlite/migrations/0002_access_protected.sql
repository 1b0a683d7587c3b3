-- paddock state, version 2: a run's workspace access (write, read, none) and a
-- project's protected-path policy (a JSON array of patterns; NULL = default).
ALTER TABLE runs ADD COLUMN access TEXT NOT NULL DEFAULT 'write';
ALTER TABLE projects ADD COLUMN protected TEXT;
