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
// (paddock.EventAppender) whose BEGIN, the node's fence, the inserts and
// the COMMIT are sent at once: one round trip, where Update takes three
// (BEGIN with the fence, each insert, COMMIT). Events that make a notice
// (paddock.NoticeOf) are appended through Update, as are those of a
// transaction that must read before it writes.
//
// Its errors say what Update's do, with one difference: once the batch
// has left, a connection that breaks before the answer leaves the
// outcome unknown (the server may have run it all, COMMIT too), so the
// error says the write may or may not have been stored. An answer of the
// server's own that refuses a statement before the COMMIT (the fence, an
// insert) means nothing was written: the rest of the transaction is not
// run, or rolled back.
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
	if err := ctx.Err(); err != nil {
		return nil, err // the caller left: nothing is sent
	}
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	n := s.node.Load()
	if n != nil {
		b.Queue(`SELECT paddock_fence($1, $2)`, n.cfg.ID, n.epoch)
	}
	for _, a := range args {
		b.Queue(appendEvent, a...)
	}
	b.Queue(`COMMIT`)
	// Sent on own: once the batch is on its way, the caller's leaving
	// does not cut it short (only the lease's end does), as Update's
	// commit. A batch cut short leaves its connection inside the
	// transaction; the pool closes such a connection.
	br := s.pool.SendBatch(own, b)
	err = readAppended(br, n != nil, out)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		return out, nil
	}
	return nil, s.appendFailed(own, n, err)
}

// readAppended reads AppendEvents' batch's answers, in their order, into
// out's seqs.
func readAppended(br pgx.BatchResults, fenced bool, out []*paddock.Event) error {
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	if fenced {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	for _, e := range out {
		if err := scanSeq(br.QueryRow(), e); err != nil {
			return err
		}
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("postgres: commit: %w", err)
	}
	return nil
}

// appendFailed is the error of an AppendEvents whose batch answered err:
// what Update says of the same failure, "nothing was written" only where
// the server's own answer says so.
func (s *Store) appendFailed(own context.Context, n *joined, err error) error {
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	refused := n != nil && errors.As(err, &pe) && pe.Code == fenceCode
	if refused {
		n.lost.Store(true)
	}
	switch {
	case paddock.IsCode(err, paddock.CodeNotFound):
		return err // no such run: its inserts inserted nothing
	case refused:
		return s.lapsed(own, fenced(n.cfg.ID), "nothing was written")
	case errors.As(err, &ce):
		return s.lapsed(own, err, "nothing was written") // no connection: nothing was sent
	case errors.As(err, &pe) && !connLost(err):
		return s.lapsed(own, wrap("append events", err), "nothing was written")
	}
	return s.lapsed(own, fmt.Errorf("postgres: append events: %w", err), "the write under way may or may not have been stored")
}

// updateOnly is a store whose events are appended through Update: it
// has only paddock.Store's methods.
type updateOnly struct{ paddock.Store }
