-- paddock state, version 13 (as SQLite's): the notices, an outbox of the
-- notable events (paddock.NoticeOf) that AppendEvent fills in the event's
-- own transaction; each webhook's cursor and lease; and its delivery
-- attempts, the latest paddock.WebhookAttemptsKept of each.
--
-- A notice's id comes from its bigserial's sequence, which hands out
-- numbers in the order they are asked for, not the order transactions
-- commit in: AppendEvent takes a transaction-level advisory lock
-- (noticeLock in tx.go) before it inserts one, so that notice ids are
-- taken and committed one transaction at a time, and a reader resuming
-- after id N never misses a lower id that commits later.
CREATE TABLE notices (
	id     bigserial PRIMARY KEY,
	run_id text COLLATE "C" NOT NULL,
	seq    bigint NOT NULL,
	type   text NOT NULL,
	time   timestamptz NOT NULL,
	FOREIGN KEY (run_id, seq) REFERENCES events(run_id, seq) ON DELETE CASCADE
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
