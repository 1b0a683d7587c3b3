package paddock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// commitFails is a Store whose writes run and then fail at their commit,
// on a Tx whose call keys hold held (nil: none).
type commitFails struct {
	Store
	held *CallRecord
}

func (s commitFails) Update(_ context.Context, fn func(Tx) error) error {
	if err := fn(keysTx{keys: heldKeys{held: s.held}}); err != nil {
		return err
	}
	return errors.New("the commit failed")
}

type keysTx struct {
	Tx
	keys CallKeys
}

func (t keysTx) CallKeys() CallKeys { return t.keys }

type heldKeys struct {
	CallKeys
	held *CallRecord
}

func (k heldKeys) Claim(context.Context, *CallRecord) (*CallRecord, error) { return k.held, nil }
func (k heldKeys) Prune(context.Context, time.Time) (int64, error)         { return 1, nil }

// TestClaimCallHeldKeyCommitFailed: a claim that finds its key held says
// so, with no error, though its commit failed: an error would have its
// caller give the key back (lifecycle's Calls forgets a claim that may
// have been stored), and with it the holder's claim, whose call would
// then be made again. A claim of a free key whose commit failed says so.
func TestClaimCallHeldKeyCommitFailed(t *testing.T) {
	ctx := context.Background()
	held := &CallRecord{Key: "k", Request: "r", Owner: "this daemon"}
	for _, prune := range []time.Time{{}, time.Now()} {
		got, err := ClaimCall(ctx, commitFails{held: held}, &CallRecord{Key: "k", Request: "r", Owner: "this daemon"}, prune)
		if err != nil || got != held {
			t.Fatalf("a held key, the commit failed (prune %v): %+v %v", !prune.IsZero(), got, err)
		}
	}
	if got, err := ClaimCall(ctx, commitFails{}, &CallRecord{Key: "k"}, time.Time{}); err == nil || got != nil {
		t.Fatalf("a free key, the commit failed: %+v %v", got, err)
	}
}
