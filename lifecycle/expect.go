package lifecycle

import (
	"context"
	"hash/fnv"
	"sync"

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
func (kn *kernel) checkExpectNow(ctx context.Context) error {
	if exp := paddock.ExpectedSeq(ctx); exp == nil || exp.Checked {
		return nil
	}
	return kn.Store.View(ctx, func(tx paddock.Tx) error { return checkExpect(ctx, tx) })
}

func agentCall(ctx context.Context) bool { return paddock.AgentCall(ctx) }

// expectStripes serialise, per run, the calls that carry an expectation
// and act before they are recorded (a tool call, a command): the check
// and the record are then one step, so of several calls expecting the
// same seq exactly one acts. Striped by run id: nothing to forget when a
// run ends. (A call for a run of another node is forwarded to it.)
type expectStripes [64]sync.Mutex

type expectHeldKey struct{}

// holdExpect takes run id's stripe for a call whose ctx carries an
// unchecked expectation, and returns the call's context (which says the
// stripe is held: a call made within it does not take one again) and what
// releases it. A keyed call's claim made beside it (paddock.AwaitClaim)
// is waited for first, never with the stripe held: the claim may be
// waiting for another attempt of the call, which may hold the stripe; a
// call whose key is not its own is stopped then, with the claim's error.
func (kn *kernel) holdExpect(ctx context.Context, id string) (context.Context, func(), error) {
	if exp := paddock.ExpectedSeq(ctx); exp == nil || exp.Checked || ctx.Value(expectHeldKey{}) != nil {
		return ctx, func() {}, nil
	}
	if err := paddock.AwaitClaim(ctx); err != nil {
		return nil, nil, err
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	mu := &kn.expectMu[h.Sum32()%uint32(len(kn.expectMu))]
	mu.Lock()
	return context.WithValue(ctx, expectHeldKey{}, true), mu.Unlock, nil
}
