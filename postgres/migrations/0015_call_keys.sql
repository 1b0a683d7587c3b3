-- paddock state, version 15 (as SQLite's): the calls made with an
-- idempotency key (paddock.CallRecord), so that a call made again with the
-- same key, on any node, is done once and answered with the first answer.
-- key is the caller's key scoped to the caller (a hash); request is a hash
-- of the call; owner the daemon instance that runs it; status and answer
-- are set when it is done. Records are kept for paddock.CallKeyTerm.
CREATE TABLE call_keys (
	key        text COLLATE "C" PRIMARY KEY,
	request    text NOT NULL,
	owner      text NOT NULL,
	done       boolean NOT NULL DEFAULT false,
	status     integer NOT NULL DEFAULT 0,
	answer     bytea,
	created_at timestamptz NOT NULL
);
CREATE INDEX call_keys_created ON call_keys(created_at);
