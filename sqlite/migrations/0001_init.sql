-- paddock state, version 1: projects, runs, workspaces, events, locks.
CREATE TABLE projects (
	name        TEXT PRIMARY KEY,
	root        TEXT NOT NULL UNIQUE,
	fingerprint TEXT NOT NULL,
	created_at  TEXT NOT NULL
);

CREATE TABLE runs (
	id         TEXT PRIMARY KEY,
	project    TEXT NOT NULL REFERENCES projects(name) ON DELETE CASCADE,
	created_at TEXT NOT NULL,
	removed_at TEXT,
	last_seq   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_project ON runs(project);

CREATE TABLE workspaces (
	id             TEXT PRIMARY KEY,
	run_id         TEXT NOT NULL UNIQUE REFERENCES runs(id) ON DELETE CASCADE,
	kind           TEXT NOT NULL,
	root           TEXT NOT NULL,
	fingerprint    TEXT NOT NULL,
	base_ref       TEXT NOT NULL,
	base_revision  TEXT NOT NULL,
	branch         TEXT NOT NULL DEFAULT '',
	state          TEXT NOT NULL,
	cleanup_policy TEXT NOT NULL,
	reason         TEXT NOT NULL DEFAULT '',
	created_at     TEXT NOT NULL,
	updated_at     TEXT NOT NULL,
	retained_at    TEXT,
	checkpoint     TEXT
);
CREATE INDEX workspaces_state ON workspaces(state);

CREATE TABLE events (
	run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	seq    INTEGER NOT NULL,
	time   TEXT NOT NULL,
	type   TEXT NOT NULL,
	data   TEXT,
	PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE locks (
	project     TEXT PRIMARY KEY REFERENCES projects(name) ON DELETE CASCADE,
	run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	acquired_at TEXT NOT NULL
);
