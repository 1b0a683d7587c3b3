-- paddock state, version 9: agent definitions, the copy a run was made
-- with, the access requests (grants) of runs, and a project's verify
-- overrides (a JSON array of {name, command}; NULL = none).
ALTER TABLE projects ADD COLUMN checks TEXT;
ALTER TABLE runs ADD COLUMN agent TEXT;            -- JSON of the definition; NULL for runs made before
ALTER TABLE runs ADD COLUMN agent_hash TEXT NOT NULL DEFAULT '';
CREATE TABLE agents (
	name       TEXT PRIMARY KEY,
	hash       TEXT NOT NULL,
	definition TEXT NOT NULL,                   -- JSON
	source     TEXT NOT NULL DEFAULT '',        -- the TOML it was read from
	updated_at TEXT NOT NULL
);
CREATE TABLE access_requests (
	run_id     TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	id         TEXT NOT NULL,
	state      TEXT NOT NULL,
	body       TEXT NOT NULL,                   -- JSON of the request
	created_at TEXT NOT NULL,
	PRIMARY KEY (run_id, id)
);
