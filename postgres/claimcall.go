package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/paddock-dev/paddock"
)

// ClaimCall claims c's key (paddock.CallClaimer): the BEGIN, the node's
// fence, the prune of the records made before prune (unless it is
// zero), the claim and the key's record are sent at once, and the COMMIT
// once their answers are in, as AppendEvents sends its events: two round
// trips before a keyed call is made, where Update took three, and four
// for a key already held. The COMMIT waits for the answers on purpose
// (AppendEvents says why): an error before it means nothing was claimed.
func (s *Store) ClaimCall(ctx context.Context, c *paddock.CallRecord, prune time.Time) (*paddock.CallRecord, error) {
	ctx, own, done, err := s.bound(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	b, n := s.fencedBatch()
	if !prune.IsZero() {
		b.Queue(`DELETE FROM call_keys WHERE created_at < $1`, prune.UTC())
	}
	b.Queue(`INSERT INTO call_keys (key, request, owner, created_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (key) DO NOTHING`, c.Key, c.Request, c.Owner, c.CreatedAt.UTC())
	// The key's record, as this transaction sees it after the claim: the
	// call's own when it was claimed, the other attempt's when it was not.
	b.Queue(`SELECT request, owner, done, status, answer, created_at FROM call_keys WHERE key = $1`, c.Key)
	br := s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	old, err := readClaim(br, n != nil, !prune.IsZero(), c.Key)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("postgres: claim call key: %w", cerr)
	}
	if err != nil {
		tx.Rollback(own)
		return nil, s.notWritten(ctx, n, err)
	}
	if old == nil {
		// Claimed: committed whatever happens to the caller meanwhile
		// (own: only the lease's end cuts it short), as Update's.
		if err := tx.Commit(own); err != nil {
			return nil, s.lapsed(own, fmt.Errorf("postgres: commit: %w", err), "the write under way may or may not have been stored")
		}
		return nil, nil
	}
	// Held already: nothing of the call's was written, whatever becomes
	// of the COMMIT (a prune with it is let go): as paddock.ClaimCall
	// says, an error would have the caller give the key back, and with it
	// the holder's claim.
	tx.Commit(own)
	return old, nil
}

// readClaim reads ClaimCall's batch's answers, in their order: nil when
// the key was claimed, else the record that holds it.
func readClaim(br pgx.BatchResults, fenced, pruned bool, key string) (*paddock.CallRecord, error) {
	if err := readFenced(br, fenced); err != nil {
		return nil, err
	}
	if pruned {
		if _, err := br.Exec(); err != nil {
			return nil, wrap("prune call keys", err)
		}
	}
	tag, err := br.Exec()
	if err != nil {
		return nil, wrap("claim call key", err)
	}
	rec := &paddock.CallRecord{Key: key}
	err = br.QueryRow().Scan(&rec.Request, &rec.Owner, &rec.Done, &rec.Status, &rec.Answer, &rec.CreatedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, paddock.Errorf(paddock.CodeConflict, "the call key's record went while it was claimed")
	case err != nil:
		return nil, wrap("read call key", err)
	case tag.RowsAffected() == 1:
		return nil, nil
	}
	rec.CreatedAt = rec.CreatedAt.UTC()
	return rec, nil
}

var _ paddock.CallClaimer = (*Store)(nil)
