-- paddock state, version 11 (as SQLite's): workflows' flows, each kept
-- whole as a document (its state, runs and log), written with its version.
CREATE TABLE flows (
	id text PRIMARY KEY,
	project text NOT NULL REFERENCES projects(name) ON DELETE CASCADE,
	version bigint NOT NULL,
	doc text NOT NULL,
	created_at timestamptz NOT NULL
);
CREATE INDEX flows_project ON flows(project, created_at);
