package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/paddock-dev/paddock"
)

// CallKeys is the records of keyed calls in this transaction.
func (t *Tx) CallKeys() paddock.CallKeys { return callKeys{t} }

// callKeys is paddock.CallKeys on a Tx.
type callKeys struct{ t *Tx }

func (k callKeys) Claim(ctx context.Context, c *paddock.CallRecord) (*paddock.CallRecord, error) {
	tag, err := k.t.tx.Exec(ctx, `INSERT INTO call_keys (key, request, owner, created_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (key) DO NOTHING`, c.Key, c.Request, c.Owner, c.CreatedAt.UTC())
	if err != nil {
		return nil, wrap("claim call key", err)
	}
	if tag.RowsAffected() == 1 {
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
	err := k.t.tx.QueryRow(ctx, `SELECT request, owner, done, status, answer, created_at FROM call_keys WHERE key = $1`, key).
		Scan(&rec.Request, &rec.Owner, &rec.Done, &rec.Status, &rec.Answer, &rec.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("read call key", err)
	}
	rec.CreatedAt = rec.CreatedAt.UTC()
	return rec, nil
}

func (k callKeys) Finish(ctx context.Context, key, owner string, status int, answer []byte) error {
	if answer == nil {
		answer = []byte{}
	}
	tag, err := k.t.tx.Exec(ctx, `UPDATE call_keys SET done = true, status = $3, answer = $4 WHERE key = $1 AND owner = $2 AND NOT done`,
		key, owner, status, answer)
	if err != nil {
		return wrap("finish call key", err)
	}
	if tag.RowsAffected() == 0 {
		return paddock.Errorf(paddock.CodeConflict, "the call key is not held by %s", owner)
	}
	return nil
}

func (k callKeys) Forget(ctx context.Context, key, owner string) error {
	_, err := k.t.tx.Exec(ctx, `DELETE FROM call_keys WHERE key = $1 AND owner = $2 AND NOT done`, key, owner)
	return wrap("forget call key", err)
}

func (k callKeys) Prune(ctx context.Context, before time.Time) (int64, error) {
	tag, err := k.t.tx.Exec(ctx, `DELETE FROM call_keys WHERE created_at < $1`, before.UTC())
	if err != nil {
		return 0, wrap("prune call keys", err)
	}
	return tag.RowsAffected(), nil
}
