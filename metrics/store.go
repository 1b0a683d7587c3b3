package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/paddock-dev/paddock"
)

// Store wraps s: each write transaction is timed, its failures counted,
// and the events it appended counted by type once it committed (an event
// of a transaction rolled back, or retried, is not).
func (m *Metrics) Store(s paddock.Store) paddock.Store { return &store{Store: s, m: m} }

type store struct {
	paddock.Store
	m *Metrics
}

func (s *store) Update(ctx context.Context, fn func(paddock.Tx) error) error {
	return s.timed(ctx, fn, s.Store.Update)
}

// UpdateLazy commits as the store it wraps does (paddock.UpdateLazy:
// without waiting for the disk where it can, durably otherwise), timed
// and counted as Update is.
func (s *store) UpdateLazy(ctx context.Context, fn func(paddock.Tx) error) error {
	return s.timed(ctx, fn, func(ctx context.Context, fn func(paddock.Tx) error) error {
		return paddock.UpdateLazy(ctx, s.Store, fn)
	})
}

var _ paddock.LazyUpdater = (*store)(nil)

// timed runs fn through update, timing the transaction and counting its
// events once it committed.
func (s *store) timed(ctx context.Context, fn func(paddock.Tx) error, update func(context.Context, func(paddock.Tx) error) error) error {
	var tx *countingTx
	var fnErr error
	start := time.Now()
	err := update(ctx, func(inner paddock.Tx) error {
		tx = &countingTx{Tx: inner} // a retried transaction counts once
		fnErr = fn(tx)
		return fnErr
	})
	var events []string
	var states []paddock.WorkspaceState
	if tx != nil {
		events, states = tx.events, tx.states
	}
	// The caller's own error (a refusal, a file it could not read) rolled
	// the transaction back; the store did not fail.
	callers := err != nil && fnErr != nil && errors.Is(err, fnErr)
	s.m.update(time.Since(start), err, callers, events, states)
	return err
}

// ReadRun reads as the store it wraps does (one round trip where it can:
// paddock.ReadRun); a read is not timed.
func (s *store) ReadRun(ctx context.Context, id string, with paddock.RunWith) (*paddock.Run, *paddock.Project, []*paddock.AccessRequest, error) {
	return paddock.ReadRun(ctx, s.Store, id, with)
}

// ClaimCall claims as the store it wraps does (in fewer round trips
// where it can: paddock.ClaimCall), timed as Update is.
func (s *store) ClaimCall(ctx context.Context, c *paddock.CallRecord, prune time.Time) (*paddock.CallRecord, error) {
	start := time.Now()
	old, err := paddock.ClaimCall(ctx, s.Store, c, prune)
	s.m.update(time.Since(start), err, false, nil, nil)
	return old, err
}

var _ paddock.CallClaimer = (*store)(nil)

// AppendEvents appends as the store it wraps does (in fewer round trips
// where it can: paddock.AppendEvents), timed and counted as Update is.
func (s *store) AppendEvents(ctx context.Context, runID string, evs []paddock.EventDraft) ([]*paddock.Event, error) {
	start := time.Now()
	out, err := paddock.AppendEvents(ctx, s.Store, runID, evs)
	var events []string
	var states []paddock.WorkspaceState
	if err == nil {
		for _, d := range evs {
			events, states = counted(events, states, d.Type, d.Data)
		}
	}
	// A run that is not there is the caller's error, not the store's.
	s.m.update(time.Since(start), err, paddock.IsCode(err, paddock.CodeNotFound), events, states)
	return out, err
}

// counted adds an event appended (its type, and the state it moved its
// run to) to what a transaction appended.
func counted(events []string, states []paddock.WorkspaceState, typ string, data any) ([]string, []paddock.WorkspaceState) {
	events = append(events, typ)
	if d, ok := data.(paddock.TransitionData); ok && typ == paddock.TransitionEvent {
		states = append(states, d.To)
	}
	return events, states
}

// countingTx notes what a transaction appends.
type countingTx struct {
	paddock.Tx
	events []string
	states []paddock.WorkspaceState
}

func (t *countingTx) AppendEvent(ctx context.Context, runID, typ string, data any) (*paddock.Event, error) {
	e, err := t.Tx.AppendEvent(ctx, runID, typ, data)
	if err == nil {
		t.events, t.states = counted(t.events, t.states, typ, data)
	}
	return e, err
}
