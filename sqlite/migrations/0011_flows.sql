-- paddock state, version 11: workflows' flows, each kept whole as a
-- document (its state, runs and log), written with its version.
CREATE TABLE flows (
	id TEXT PRIMARY KEY,
	project TEXT NOT NULL REFERENCES projects(name) ON DELETE CASCADE,
	version INTEGER NOT NULL,
	doc TEXT NOT NULL,
	created_at TEXT NOT NULL
);
CREATE INDEX flows_project ON flows(project, created_at);
