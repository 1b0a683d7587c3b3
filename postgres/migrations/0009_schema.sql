-- paddock state on PostgreSQL, version 9: the schema SQLite reaches through
-- its migrations 0001 to 0009, in one step (there was no PostgreSQL store
-- before it). Later versions are numbered as SQLite's are, so that the two
-- schemas stay one logical schema.
--
-- Times are timestamptz (SQLite keeps RFC 3339 text); settings and stored
-- definitions are jsonb; payloads handed back byte for byte (an event's data,
-- a job's request) keep their text. Keys compare and sort byte-wise
-- (COLLATE "C"), as SQLite's BINARY does, whatever the database's locale.
CREATE TABLE projects (
	name              text COLLATE "C" PRIMARY KEY,
	root              text NOT NULL UNIQUE,
	fingerprint       text NOT NULL,
	created_at        timestamptz NOT NULL,
	protected         jsonb,            -- a JSON array of patterns; NULL = default
	attribution_allow jsonb,            -- a JSON array of rule names; NULL = none
	caches            jsonb,            -- a JSON array of {name, mode, path}; NULL = none
	checks            jsonb             -- a JSON array of {name, command}; NULL = none
);

CREATE TABLE runs (
	id              text COLLATE "C" PRIMARY KEY,
	project         text COLLATE "C" NOT NULL REFERENCES projects(name) ON DELETE CASCADE,
	created_at      timestamptz NOT NULL,
	removed_at      timestamptz,
	last_seq        bigint NOT NULL DEFAULT 0,
	access          text NOT NULL DEFAULT 'write',
	secrets         jsonb,              -- the names a run declared; values are never stored
	token_hash      text,               -- sha256 of the bearer token; the token is never stored
	include_ignored boolean NOT NULL DEFAULT false,
	agent           jsonb,              -- the definition the run was made with; NULL before version 9
	agent_hash      text NOT NULL DEFAULT ''
);
CREATE INDEX runs_project ON runs(project);
CREATE UNIQUE INDEX runs_token_hash ON runs(token_hash) WHERE token_hash IS NOT NULL;

CREATE TABLE workspaces (
	id             text COLLATE "C" PRIMARY KEY,
	run_id         text COLLATE "C" NOT NULL UNIQUE REFERENCES runs(id) ON DELETE CASCADE,
	kind           text NOT NULL,
	root           text NOT NULL,
	fingerprint    text NOT NULL,
	base_ref       text NOT NULL,
	base_revision  text NOT NULL,
	branch         text NOT NULL DEFAULT '',
	state          text NOT NULL,
	cleanup_policy text NOT NULL,
	reason         text NOT NULL DEFAULT '',
	created_at     timestamptz NOT NULL,
	updated_at     timestamptz NOT NULL,
	retained_at    timestamptz,
	checkpoint     jsonb
);
CREATE INDEX workspaces_state ON workspaces(state);

CREATE TABLE events (
	run_id text COLLATE "C" NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	seq    bigint NOT NULL,
	time   timestamptz NOT NULL,
	type   text NOT NULL,
	data   json,                        -- kept as written, not normalized
	PRIMARY KEY (run_id, seq)
);

CREATE TABLE locks (
	project     text COLLATE "C" PRIMARY KEY REFERENCES projects(name) ON DELETE CASCADE,
	run_id      text COLLATE "C" NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	acquired_at timestamptz NOT NULL
);

-- At most one job of a run runs at a time; the daemon instance that runs a
-- job owns it and renews its lease.
CREATE TABLE jobs (
	id          text COLLATE "C" PRIMARY KEY,
	run_id      text COLLATE "C" NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	kind        text NOT NULL,
	state       text NOT NULL,
	owner       text NOT NULL,
	lease_until timestamptz,
	request     text NOT NULL,          -- JSON, kept as written
	created_at  timestamptz NOT NULL,
	ended_at    timestamptz,
	exit_code   integer,
	reason      text NOT NULL DEFAULT ''
);
CREATE INDEX jobs_run ON jobs(run_id);
CREATE UNIQUE INDEX jobs_one_running ON jobs(run_id) WHERE state = 'running';

CREATE TABLE agents (
	name       text COLLATE "C" PRIMARY KEY,
	hash       text NOT NULL,
	definition jsonb NOT NULL,
	source     text NOT NULL DEFAULT '', -- the TOML it was read from
	updated_at timestamptz NOT NULL
);

-- As in SQLite, a run's requests do not cascade with it.
CREATE TABLE access_requests (
	run_id     text COLLATE "C" NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	id         text COLLATE "C" NOT NULL,
	state      text NOT NULL,
	body       jsonb NOT NULL,           -- the request
	created_at timestamptz NOT NULL,
	PRIMARY KEY (run_id, id)
);
