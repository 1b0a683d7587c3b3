package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/paddock-dev/paddock"
)

// AppendEvents appends evs to run runID in one transaction
// (paddock.EventAppender) whose BEGIN, the node's fence and the inserts
// are sent at once, and then its COMMIT: two round trips, where Update
// takes three and one more for each event after the first (BEGIN with
// the fence, each insert, COMMIT). The COMMIT waits for the answers
// before it, as Update's does, so that a failure before it means,
// surely, that nothing was written, and says so; one of the COMMIT may
// or may not have been stored. Events that make a notice
// (paddock.NoticeOf) are appended through Update.
func (s *Store) AppendEvents(ctx context.Context, runID string, evs []paddock.EventDraft) ([]*paddock.Event, error) {
	out := make([]*paddock.Event, len(evs))
	args := make([][]any, len(evs))
	for i, d := range evs {
		e, a, err := newEvent(runID, d.Type, d.Data)
		if err != nil {
			return nil, err
		}
		if _, notice := paddock.NoticeOf(d.Type, e.Data); notice {
			return paddock.AppendEvents(ctx, updateOnly{s}, runID, evs)
		}
		out[i], args[i] = e, a
	}
	ctx, own, done, err := s.bound(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	b, n := s.fencedBatch()
	for _, a := range args {
		b.Queue(appendEvent, a...)
	}
	br := s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	err = readAppended(br, n != nil, out)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("postgres: append events: %w", cerr)
	}
	if err != nil {
		tx.Rollback(own)
		return nil, s.notWritten(ctx, n, err)
	}
	// As Update's: whatever happens to the caller meanwhile (own: only
	// the lease's end cuts it short).
	if err := tx.Commit(own); err != nil {
		return nil, s.lapsed(own, fmt.Errorf("postgres: commit: %w", err), "the write under way may or may not have been stored")
	}
	return out, nil
}

// readAppended reads AppendEvents' batch's answers, in their order, into
// out's seqs.
func readAppended(br pgx.BatchResults, fenced bool, out []*paddock.Event) error {
	if err := readFenced(br, fenced); err != nil {
		return err
	}
	for _, e := range out {
		if err := scanSeq(br.QueryRow(), e); err != nil {
			return err
		}
	}
	return nil
}

// fencedBatch is a batch that begins a transaction and, for a joined
// node (n, nil if not joined), checks its lease first (the fence), as
// Update's BEGIN does; readFenced reads their answers.
func (s *Store) fencedBatch() (b *pgx.Batch, n *joined) {
	b = &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	if n = s.node.Load(); n != nil {
		b.Queue(`SELECT paddock_fence($1, $2)`, n.cfg.ID, n.epoch)
	}
	return b, n
}

// readFenced reads the answers of a fencedBatch's BEGIN and fence.
func readFenced(br pgx.BatchResults, fenced bool) error {
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	if fenced {
		if _, err := br.Exec(); err != nil {
			return wrap("check the node's lease", err) // PF001 stays in the chain
		}
	}
	return nil
}

// notWritten is the error of a write of node n (nil: not joined) that
// failed with err before its COMMIT was sent (Update's BEGIN with the
// fence, AppendEvents' batch): nothing was written. The fence's refusal
// (PF001) marks the node lost and says so; the lease's end says that.
func (s *Store) notWritten(ctx context.Context, n *joined, err error) error {
	var pe *pgconn.PgError
	refused := n != nil && errors.As(err, &pe) && pe.Code == fenceCode
	if refused {
		n.lost.Store(true) // whatever else ended the call meanwhile
	}
	switch {
	case errors.Is(context.Cause(ctx), errLapsed):
		return s.lapsed(ctx, err, "nothing was written")
	case ctx.Err() != nil:
		return ctx.Err()
	case refused:
		return s.lapsed(ctx, fenced(n.cfg.ID), "nothing was written")
	}
	return s.lapsed(ctx, err, "nothing was written")
}

// updateOnly is a store whose events are appended through Update: it
// has only paddock.Store's methods.
type updateOnly struct{ paddock.Store }
