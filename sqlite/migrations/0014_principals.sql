-- paddock state, version 14: the principals (named people and services,
-- each with a role and the projects it is scoped to, and the local uid
-- that maps to it, if any), their bearer tokens (the hash of each, never
-- the token), and each project's approval policy.
--
-- A principal's projects are a JSON array; NULL is every project. A
-- token goes with its principal. A project's approval_policy is a JSON
-- paddock.ApprovalPolicy; NULL is the default policy.
CREATE TABLE principals (
	name       TEXT PRIMARY KEY,
	kind       TEXT NOT NULL,
	role       TEXT NOT NULL,
	projects   TEXT,
	uid        INTEGER UNIQUE,
	created_at TEXT NOT NULL,
	created_by TEXT NOT NULL DEFAULT ''
);

CREATE TABLE tokens (
	id           TEXT PRIMARY KEY,
	principal    TEXT NOT NULL REFERENCES principals(name) ON DELETE CASCADE,
	hash         TEXT NOT NULL,
	created_at   TEXT NOT NULL,
	expires_at   TEXT,
	revoked_at   TEXT,
	last_used_at TEXT
);
CREATE INDEX tokens_principal ON tokens(principal, created_at);

ALTER TABLE projects ADD COLUMN approval_policy TEXT;
