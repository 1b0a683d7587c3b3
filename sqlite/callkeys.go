package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/paddock-dev/paddock"
)

// CallKeys is the records of keyed calls in this transaction.
func (t *Tx) CallKeys() paddock.CallKeys { return callKeys{t} }

// callKeys is paddock.CallKeys on a Tx.
type callKeys struct{ t *Tx }

func (k callKeys) Claim(ctx context.Context, c *paddock.CallRecord) (*paddock.CallRecord, error) {
	res, err := k.t.exec(ctx, `INSERT INTO call_keys (key, request, owner, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (key) DO NOTHING`, c.Key, c.Request, c.Owner, fmtTime(c.CreatedAt))
	if err != nil {
		return nil, wrap("claim call key", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, wrap("claim call key", err)
	} else if n == 1 {
		return nil, nil
	}
	old, err := k.Get(ctx, c.Key)
	if err == nil && old == nil {
		return nil, paddock.Errorf(paddock.CodeConflict, "the call key's record went while it was claimed")
	}
	return old, err
}

func (k callKeys) Get(ctx context.Context, key string) (*paddock.CallRecord, error) {
	rec := &paddock.CallRecord{Key: key}
	var created string
	err := k.t.queryRow(ctx, `SELECT request, owner, done, status, answer, created_at FROM call_keys WHERE key = ?`, key).
		Scan(&rec.Request, &rec.Owner, &rec.Done, &rec.Status, &rec.Answer, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("read call key", err)
	}
	rec.CreatedAt = parseTime(created)
	return rec, nil
}

func (k callKeys) Finish(ctx context.Context, key, owner string, status int, answer []byte) error {
	if answer == nil {
		answer = []byte{}
	}
	res, err := k.t.exec(ctx, `UPDATE call_keys SET done = 1, status = ?, answer = ? WHERE key = ? AND owner = ? AND done = 0`,
		status, answer, key, owner)
	if err != nil {
		return wrap("finish call key", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return wrap("finish call key", err)
	} else if n == 0 {
		return paddock.Errorf(paddock.CodeConflict, "the call key is not held by %s", owner)
	}
	return nil
}

func (k callKeys) Forget(ctx context.Context, key, owner string) error {
	_, err := k.t.exec(ctx, `DELETE FROM call_keys WHERE key = ? AND owner = ? AND done = 0`, key, owner)
	return wrap2("forget call key", err)
}

func (k callKeys) Prune(ctx context.Context, before time.Time) (int64, error) {
	res, err := k.t.exec(ctx, `DELETE FROM call_keys WHERE created_at < ?`, fmtTime(before))
	if err != nil {
		return 0, wrap("prune call keys", err)
	}
	n, err := res.RowsAffected()
	return n, wrap2("prune call keys", err)
}
