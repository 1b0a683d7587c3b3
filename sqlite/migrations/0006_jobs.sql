-- paddock state, version 6: jobs, the bounded executions inside a run.
-- At most one job of a run runs at a time; the daemon instance that runs a
-- job owns it and renews its lease.
CREATE TABLE jobs (
	id          TEXT PRIMARY KEY,
	run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	kind        TEXT NOT NULL,
	state       TEXT NOT NULL,
	owner       TEXT NOT NULL,
	lease_until TEXT,
	request     TEXT NOT NULL,
	created_at  TEXT NOT NULL,
	ended_at    TEXT,
	exit_code   INTEGER,
	reason      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX jobs_run ON jobs(run_id);
CREATE UNIQUE INDEX jobs_one_running ON jobs(run_id) WHERE state = 'running';
