package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/paddock-dev/paddock"
)

// Notices returns up to limit notices after id after, with their events'
// data and their runs' projects.
func (t *Tx) Notices(ctx context.Context, after int64, limit int) ([]*paddock.Notice, error) {
	if limit <= 0 {
		limit = 1000
	}
	rows, err := t.query(ctx, `SELECT n.id, n.type, n.run_id, n.seq, n.time, r.project, e.data
		FROM notices n JOIN events e ON e.run_id = n.run_id AND e.seq = n.seq JOIN runs r ON r.id = n.run_id
		WHERE n.id > ? ORDER BY n.id LIMIT ?`, after, limit)
	if err != nil {
		return nil, wrap("list notices", err)
	}
	defer rows.Close()
	out := []*paddock.Notice{}
	for rows.Next() {
		n := &paddock.Notice{}
		var ts string
		var data sql.NullString
		if err := rows.Scan(&n.ID, &n.Type, &n.RunID, &n.Seq, &ts, &n.Project, &data); err != nil {
			return nil, wrap("list notices", err)
		}
		n.Time = parseTime(ts)
		if data.Valid {
			n.Data = json.RawMessage(data.String)
		}
		out = append(out, n)
	}
	return out, wrap2("list notices", rows.Err())
}

// Webhooks is the webhooks' delivery state in this transaction.
func (t *Tx) Webhooks() paddock.Webhooks { return webhooks{t} }

// webhooks is paddock.Webhooks on a Tx.
type webhooks struct{ t *Tx }

func (w webhooks) Lease(ctx context.Context, name, owner string, now, until time.Time) (*paddock.WebhookCursor, bool, error) {
	tx, ctx := w.t.tx, w.t.ctx(ctx)
	if _, err := tx.ExecContext(ctx, `INSERT INTO webhooks (name, delivered)
		SELECT ?, COALESCE(MAX(id), 0) FROM notices WHERE true ON CONFLICT (name) DO NOTHING`, name); err != nil {
		return nil, false, wrap("lease webhook", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE webhooks SET lease_owner = ?, lease_until = ?
		WHERE name = ? AND (lease_owner IN ('', ?) OR lease_until IS NULL OR lease_until < ?)`,
		owner, fmtTime(until), name, owner, fmtTime(now)); err != nil {
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
	var until sql.NullString
	err := w.t.queryRow(ctx, `SELECT delivered, lease_owner, lease_until FROM webhooks WHERE name = ?`, name).
		Scan(&c.Delivered, &c.LeaseOwner, &until)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no webhook %q has a cursor", name)
	}
	if err != nil {
		return nil, wrap("get webhook cursor", err)
	}
	c.LeaseUntil = parseOptTime(until)
	return c, nil
}

func (w webhooks) Advance(ctx context.Context, name, owner string, delivered int64) error {
	res, err := w.t.exec(ctx, `UPDATE webhooks SET delivered = MAX(delivered, ?) WHERE name = ? AND lease_owner = ?`,
		delivered, name, owner)
	if err != nil {
		return wrap("advance webhook", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return wrap("advance webhook", err)
	} else if n == 0 {
		return paddock.Errorf(paddock.CodeConflict, "webhook %s: %s does not hold its lease", name, owner)
	}
	return nil
}

func (w webhooks) RecordAttempt(ctx context.Context, a *paddock.WebhookAttempt) error {
	tx, ctx := w.t.tx, w.t.ctx(ctx)
	err := tx.QueryRowContext(ctx, `INSERT INTO webhook_attempts (webhook, notice, attempt, time, status, error, delivered)
		SELECT ?1, ?2, COALESCE(MAX(attempt), 0) + 1, ?3, ?4, ?5, ?6 FROM webhook_attempts WHERE webhook = ?1 AND notice = ?2
		RETURNING attempt`, a.Webhook, a.Notice, fmtTime(a.Time), a.Status, a.Error, a.Delivered).Scan(&a.Attempt)
	if err != nil {
		return wrap("record webhook attempt", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM webhook_attempts WHERE webhook = ?1 AND (notice, attempt) <= (
		SELECT notice, attempt FROM webhook_attempts WHERE webhook = ?1 ORDER BY notice DESC, attempt DESC LIMIT 1 OFFSET ?2)`,
		a.Webhook, paddock.WebhookAttemptsKept); err != nil {
		return wrap("prune webhook attempts", err)
	}
	return nil
}

func (w webhooks) Attempts(ctx context.Context, name string, limit int) ([]*paddock.WebhookAttempt, error) {
	if limit <= 0 || limit > paddock.WebhookAttemptsKept {
		limit = paddock.WebhookAttemptsKept
	}
	rows, err := w.t.query(ctx, `SELECT notice, attempt, time, status, error, delivered FROM (
		SELECT notice, attempt, time, status, error, delivered FROM webhook_attempts WHERE webhook = ?
		ORDER BY notice DESC, attempt DESC LIMIT ?)
		ORDER BY notice, attempt`, name, limit)
	if err != nil {
		return nil, wrap("list webhook attempts", err)
	}
	defer rows.Close()
	out := []*paddock.WebhookAttempt{}
	for rows.Next() {
		a := &paddock.WebhookAttempt{Webhook: name}
		var ts string
		if err := rows.Scan(&a.Notice, &a.Attempt, &ts, &a.Status, &a.Error, &a.Delivered); err != nil {
			return nil, wrap("list webhook attempts", err)
		}
		a.Time = parseTime(ts)
		out = append(out, a)
	}
	return out, wrap2("list webhook attempts", rows.Err())
}
