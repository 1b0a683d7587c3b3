-- paddock state, version 13 (as SQLite's): the notices, an outbox of the
-- notable events (paddock.NoticeOf) that AppendEvent fills in the event's
-- own transaction; each webhook's cursor and lease; and its delivery
-- attempts, the latest paddock.WebhookAttemptsKept of each.
--
-- A notice's id is the last one plus one, taken under a transaction-level
-- advisory lock (noticeLock in notices.go) held until the transaction
-- ends, so that notice ids are taken and committed one transaction at a
-- time, with no gap: a reader resuming after id N never misses a lower id
-- that commits later. No sequence: a role granted only the tables'
-- privileges writes them.
--
-- A notice goes with its run (its events go with it too): a reference to
-- the run, not to each event, so that deleting a run's events checks no
-- notice per event.
CREATE TABLE notices (
	id     bigint PRIMARY KEY,
	run_id text COLLATE "C" NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	seq    bigint NOT NULL,
	type   text NOT NULL,
	time   timestamptz NOT NULL
);
CREATE INDEX notices_event ON notices(run_id, seq);

CREATE TABLE webhooks (
	name        text COLLATE "C" PRIMARY KEY,
	delivered   bigint NOT NULL,
	lease_owner text NOT NULL DEFAULT '',
	lease_until timestamptz
);

CREATE TABLE webhook_attempts (
	webhook   text COLLATE "C" NOT NULL,
	notice    bigint NOT NULL,
	attempt   integer NOT NULL,
	time      timestamptz NOT NULL,
	status    integer NOT NULL DEFAULT 0,
	error     text NOT NULL DEFAULT '',
	delivered boolean NOT NULL,
	PRIMARY KEY (webhook, notice, attempt)
);
