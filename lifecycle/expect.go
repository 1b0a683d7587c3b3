package lifecycle

import (
	"context"

	"github.com/paddock-dev/paddock"
)

// The seq rule's optimistic check: a client that acts on what it saw of a
// run may say so with the last seq it saw; if the run moved on since, the
// action is refused with conflict and changes nothing.

type expectKey struct{}

type expectation struct {
	run     string
	seq     int64
	checked bool
}

// WithExpectSeq returns ctx carrying the expectation that run's last event
// is seq. The first transaction that writes under ctx checks it, atomically
// with its write; tool calls and commands check it before they start.
func WithExpectSeq(ctx context.Context, run string, seq int64) context.Context {
	return context.WithValue(ctx, expectKey{}, &expectation{run: run, seq: seq})
}

// checkExpect verifies ctx's expectation, once, inside tx.
func checkExpect(ctx context.Context, tx paddock.Tx) error {
	exp, _ := ctx.Value(expectKey{}).(*expectation)
	if exp == nil || exp.checked {
		return nil
	}
	r, err := tx.Run(ctx, exp.run)
	if err != nil {
		return err
	}
	if r.LastSeq != exp.seq {
		return paddock.Errorf(paddock.CodeConflict, "run %s moved on: its last event is %d, not %d", exp.run, r.LastSeq, exp.seq).
			WithDetail("expect_seq", exp.seq).WithDetail("last_seq", r.LastSeq)
	}
	exp.checked = true
	return nil
}

// checkExpectNow verifies ctx's expectation before an action whose effects
// come before its record (a tool call, a command).
func (m *Manager) checkExpectNow(ctx context.Context) error {
	if exp, _ := ctx.Value(expectKey{}).(*expectation); exp == nil || exp.checked {
		return nil
	}
	return m.Store.View(ctx, func(tx paddock.Tx) error { return checkExpect(ctx, tx) })
}

type agentKey struct{}

// WithAgent marks ctx as a call from the run's own agent (its run token,
// or an MCP session serving it): a checkpointed run it calls is resumed
// for it, instead of stranding the agent after a daemon restart.
func WithAgent(ctx context.Context) context.Context {
	return context.WithValue(ctx, agentKey{}, true)
}

func agentCall(ctx context.Context) bool {
	v, _ := ctx.Value(agentKey{}).(bool)
	return v
}
