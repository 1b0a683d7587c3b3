package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/paddock-dev/paddock"
)

// noticeLock is the advisory lock key a transaction takes, until it
// ends, before it inserts a notice, whose id is the last one plus one:
// under the lock, notices' ids are taken and committed in one order, with
// no gap, so a reader that resumes after id N never misses a lower id
// committed later. (A sequence would hand ids out in the order they are
// asked for, not the order their transactions commit in, and need its own
// grant.) Notices are rare (a submit, an approval, a job's end), so the
// lock serializes little.
const noticeLock int64 = 0x7061646f636b01

// appendNotice adds e's notice to the outbox, under noticeLock.
func (t *Tx) appendNotice(ctx context.Context, e *paddock.Event, typ string) error {
	if _, err := t.tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, noticeLock); err != nil {
		return wrap("take the notice lock", err)
	}
	// A statement of its own, after the lock: its snapshot holds every
	// notice committed before, the last id with them.
	if _, err := t.tx.Exec(ctx, `INSERT INTO notices (id, run_id, seq, type, time)
		SELECT COALESCE(MAX(id), 0) + 1, $1, $2, $3, $4 FROM notices`,
		e.RunID, e.Seq, typ, e.Time); err != nil {
		return wrap("append notice", err)
	}
	return nil
}

// Notices returns up to limit notices after id after, with their events'
// data and their runs' projects.
func (t *Tx) Notices(ctx context.Context, after int64, limit int) ([]*paddock.Notice, error) {
	if limit <= 0 {
		limit = 1000
	}
	return collect(ctx, t, "list notices", true, func(row scanner) (*paddock.Notice, error) {
		n := &paddock.Notice{}
		var data *string
		if err := row.Scan(&n.ID, &n.Type, &n.RunID, &n.Seq, &n.Time, &n.Project, &data); err != nil {
			return nil, err
		}
		n.Time = n.Time.UTC()
		if data != nil {
			n.Data = json.RawMessage(*data)
		}
		return n, nil
	}, `SELECT n.id, n.type, n.run_id, n.seq, n.time, r.project, e.data::text
		FROM notices n JOIN events e ON e.run_id = n.run_id AND e.seq = n.seq JOIN runs r ON r.id = n.run_id
		WHERE n.id > $1 ORDER BY n.id LIMIT $2`, after, limit)
}

// Webhooks is the webhooks' delivery state in this transaction.
func (t *Tx) Webhooks() paddock.Webhooks { return webhooks{t} }

// webhooks is paddock.Webhooks on a Tx.
type webhooks struct{ t *Tx }

func (w webhooks) Lease(ctx context.Context, name, owner string, now, until time.Time) (*paddock.WebhookCursor, bool, error) {
	tx := w.t.tx
	if _, err := tx.Exec(ctx, `INSERT INTO webhooks (name, delivered)
		SELECT $1, COALESCE(MAX(id), 0) FROM notices ON CONFLICT (name) DO NOTHING`, name); err != nil {
		return nil, false, wrap("lease webhook", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE webhooks SET lease_owner = $2, lease_until = $3
		WHERE name = $1 AND (lease_owner IN ('', $2) OR lease_until IS NULL OR lease_until < $4)`,
		name, owner, until.UTC(), now.UTC()); err != nil {
		return nil, false, wrap("lease webhook", err)
	}
	c, err := w.Cursor(ctx, name)
	if err != nil {
		return nil, false, err
	}
	return c, c.LeaseOwner == owner, nil
}

func (w webhooks) Cursor(ctx context.Context, name string) (*paddock.WebhookCursor, error) {
	c := &paddock.WebhookCursor{Name: name}
	var until *time.Time
	err := w.t.tx.QueryRow(ctx, `SELECT delivered, lease_owner, lease_until FROM webhooks WHERE name = $1`, name).
		Scan(&c.Delivered, &c.LeaseOwner, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no webhook %q has a cursor", name)
	}
	if err != nil {
		return nil, wrap("get webhook cursor", err)
	}
	c.LeaseUntil = fromOptTime(until)
	return c, nil
}

func (w webhooks) Advance(ctx context.Context, name, owner string, delivered int64) error {
	tag, err := w.t.tx.Exec(ctx, `UPDATE webhooks SET delivered = GREATEST(delivered, $3) WHERE name = $1 AND lease_owner = $2`,
		name, owner, delivered)
	if err != nil {
		return wrap("advance webhook", err)
	}
	if tag.RowsAffected() == 0 {
		return paddock.Errorf(paddock.CodeConflict, "webhook %s: %s does not hold its lease", name, owner)
	}
	return nil
}

func (w webhooks) RecordAttempt(ctx context.Context, a *paddock.WebhookAttempt) error {
	tx := w.t.tx
	// The webhook's cursor row, locked first (the insert's own snapshot
	// then sees every attempt committed before), numbers its attempts
	// one at a time across nodes.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM webhooks WHERE name = $1 FOR UPDATE`, a.Webhook); err != nil {
		return wrap("record webhook attempt", err)
	}
	err := tx.QueryRow(ctx, `INSERT INTO webhook_attempts (webhook, notice, attempt, time, status, error, delivered)
		SELECT $1, $2, COALESCE(MAX(attempt), 0) + 1, $3, $4, $5, $6 FROM webhook_attempts WHERE webhook = $1 AND notice = $2
		RETURNING attempt`, a.Webhook, a.Notice, a.Time.UTC(), a.Status, a.Error, a.Delivered).Scan(&a.Attempt)
	if err != nil {
		return wrap("record webhook attempt", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM webhook_attempts WHERE webhook = $1 AND (notice, attempt) <= (
		SELECT notice, attempt FROM webhook_attempts WHERE webhook = $1 ORDER BY notice DESC, attempt DESC LIMIT 1 OFFSET $2)`,
		a.Webhook, paddock.WebhookAttemptsKept); err != nil {
		return wrap("prune webhook attempts", err)
	}
	return nil
}

func (w webhooks) Attempts(ctx context.Context, name string, limit int) ([]*paddock.WebhookAttempt, error) {
	if limit <= 0 || limit > paddock.WebhookAttemptsKept {
		limit = paddock.WebhookAttemptsKept
	}
	return collect(ctx, w.t, "list webhook attempts", true, func(row scanner) (*paddock.WebhookAttempt, error) {
		a := &paddock.WebhookAttempt{Webhook: name}
		if err := row.Scan(&a.Notice, &a.Attempt, &a.Time, &a.Status, &a.Error, &a.Delivered); err != nil {
			return nil, err
		}
		a.Time = a.Time.UTC()
		return a, nil
	}, `SELECT notice, attempt, time, status, error, delivered FROM (
		SELECT notice, attempt, time, status, error, delivered FROM webhook_attempts WHERE webhook = $1
		ORDER BY notice DESC, attempt DESC LIMIT $2) a
		ORDER BY notice, attempt`, name, limit)
}
