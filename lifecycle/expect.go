package lifecycle

import (
	"context"

	"github.com/paddock-dev/paddock"
)

// The seq rule and the agent's mark travel in the call's context (see
// paddock.WithExpectSeq and paddock.WithAgent); they are checked here.

// checkExpect verifies ctx's expectation, once, inside tx.
func checkExpect(ctx context.Context, tx paddock.Tx) error {
	exp := paddock.ExpectedSeq(ctx)
	if exp == nil || exp.Checked {
		return nil
	}
	r, err := tx.Run(ctx, exp.Run)
	if err != nil {
		return err
	}
	if r.LastSeq != exp.Seq {
		return paddock.Errorf(paddock.CodeConflict, "run %s moved on: its last event is %d, not %d", exp.Run, r.LastSeq, exp.Seq).
			WithDetail("expect_seq", exp.Seq).WithDetail("last_seq", r.LastSeq)
	}
	exp.Checked = true
	return nil
}

// checkExpectNow verifies ctx's expectation before an action whose effects
// come before its record (a tool call, a command).
func (m *Manager) checkExpectNow(ctx context.Context) error {
	if exp := paddock.ExpectedSeq(ctx); exp == nil || exp.Checked {
		return nil
	}
	return m.Store.View(ctx, func(tx paddock.Tx) error { return checkExpect(ctx, tx) })
}

func agentCall(ctx context.Context) bool { return paddock.AgentCall(ctx) }
