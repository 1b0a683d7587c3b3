-- paddock state, version 15: the calls made with an idempotency key
-- (paddock.CallRecord), so that a call made again with the same key is
-- done once and answered with the first answer. key is the caller's key
-- scoped to the caller (a hash); request is a hash of the call; owner
-- the daemon instance that runs it; status and answer are set when it is
-- done. Records are kept for paddock.CallKeyTerm.
CREATE TABLE call_keys (
	key        TEXT PRIMARY KEY,
	request    TEXT NOT NULL,
	owner      TEXT NOT NULL,
	done       INTEGER NOT NULL DEFAULT 0,
	status     INTEGER NOT NULL DEFAULT 0,
	answer     BLOB,
	created_at TEXT NOT NULL
);
CREATE INDEX call_keys_created ON call_keys(created_at);
