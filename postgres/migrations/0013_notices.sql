-- paddock state, version 13 (as SQLite's): the notices, an outbox of the
-- notable events (paddock.NoticeOf) that AppendEvent fills in the event's
-- own transaction; each webhook's cursor and lease; and its delivery
-- attempts, the latest paddock.WebhookAttemptsKept of each.
--
-- A notice's id comes from its bigserial's sequence, which hands out
-- numbers in the order they are asked for, not the order transactions
-- commit in: AppendEvent takes a transaction-level advisory lock
-- (noticeLock in notices.go) before it inserts one, so that notice ids are
-- taken and committed one transaction at a time, and a reader resuming
-- after id N never misses a lower id that commits later.
--
-- A notice goes with its run (its events go with it too): a reference to
-- the run, not to each event, so that deleting a run's events checks no
-- notice per event.
CREATE TABLE notices (
	id     bigserial PRIMARY KEY,
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
	id        bigserial PRIMARY KEY,
	webhook   text COLLATE "C" NOT NULL,
	notice    bigint NOT NULL,
	attempt   integer NOT NULL,
	time      timestamptz NOT NULL,
	status    integer NOT NULL DEFAULT 0,
	error     text NOT NULL DEFAULT '',
	delivered boolean NOT NULL
);
CREATE INDEX webhook_attempts_webhook ON webhook_attempts(webhook, id);
CREATE INDEX webhook_attempts_notice ON webhook_attempts(webhook, notice, attempt);
