-- paddock state, version 13 (12 is PostgreSQL's nodes): the notices, an
-- outbox of the notable events (paddock.NoticeOf) that AppendEvent fills
-- in the event's own transaction, numbered in commit order (SQLite has one
-- writer); each webhook's cursor and lease; and its delivery attempts,
-- the latest paddock.WebhookAttemptsKept of each.
--
-- A notice goes with its run (its events go with it too): a reference to
-- the run, not to each event, so that deleting a run's events checks no
-- notice per event.
CREATE TABLE notices (
	id     INTEGER PRIMARY KEY AUTOINCREMENT,
	run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	seq    INTEGER NOT NULL,
	type   TEXT NOT NULL,
	time   TEXT NOT NULL
);
CREATE INDEX notices_event ON notices(run_id, seq);

CREATE TABLE webhooks (
	name        TEXT PRIMARY KEY,
	delivered   INTEGER NOT NULL,
	lease_owner TEXT NOT NULL DEFAULT '',
	lease_until TEXT
);

CREATE TABLE webhook_attempts (
	webhook   TEXT NOT NULL,
	notice    INTEGER NOT NULL,
	attempt   INTEGER NOT NULL,
	time      TEXT NOT NULL,
	status    INTEGER NOT NULL DEFAULT 0,
	error     TEXT NOT NULL DEFAULT '',
	delivered INTEGER NOT NULL,
	PRIMARY KEY (webhook, notice, attempt)
) WITHOUT ROWID;
