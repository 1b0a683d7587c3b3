-- paddock state, version 14 (as SQLite's): the principals (named people
-- and services, each with a role and the projects it is scoped to, and
-- the local uid that maps to it, if any), their bearer tokens (the hash of
-- each, never the token), and each project's approval policy.
--
-- A principal's projects are a JSON array; NULL is every project. A
-- token goes with its principal. A project's approval_policy is a JSON
-- paddock.ApprovalPolicy; NULL is the default policy.
CREATE TABLE principals (
	name       text COLLATE "C" PRIMARY KEY,
	kind       text NOT NULL,
	role       text NOT NULL,
	projects   jsonb,
	uid        bigint UNIQUE,
	created_at timestamptz NOT NULL,
	created_by text NOT NULL DEFAULT ''
);

CREATE TABLE tokens (
	id           text COLLATE "C" PRIMARY KEY,
	principal    text COLLATE "C" NOT NULL REFERENCES principals(name) ON DELETE CASCADE,
	hash         text NOT NULL,
	created_at   timestamptz NOT NULL,
	expires_at   timestamptz,
	revoked_at   timestamptz,
	last_used_at timestamptz
);
CREATE INDEX tokens_principal ON tokens(principal, created_at);

ALTER TABLE projects ADD COLUMN approval_policy jsonb;
