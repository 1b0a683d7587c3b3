package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// TestClaimCallFenced: a node's claims go in one batch (storetest's
// CallKeys holds them to Update's), and a lost node's claim is fenced:
// refused as node_lost, nothing of it stored, its prune with it.
func TestClaimCallFenced(t *testing.T) {
	ns := nodes(t, 2, 30*time.Second)
	a, b := ns[0], ns[1]
	ctx := context.Background()
	if _, ok := paddock.Store(a).(paddock.CallClaimer); !ok {
		t.Fatal("the PostgreSQL store claims keys without a batch")
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	if old, err := paddock.ClaimCall(ctx, a, &paddock.CallRecord{Key: "before", Request: "r", Owner: "a", CreatedAt: now.Add(-2 * time.Hour)}, time.Time{}); err != nil || old != nil {
		t.Fatalf("a claim: %+v %v", old, err)
	}
	markLost(t, a, b)
	_, err := paddock.ClaimCall(ctx, a, &paddock.CallRecord{Key: "k", Request: "r", Owner: "a", CreatedAt: now}, now.Add(-time.Hour))
	if !errors.Is(err, paddock.ErrFenced) || !paddock.IsCode(err, paddock.CodeNodeLost) {
		t.Fatalf("a lost node's claim: %v", err)
	}
	for key, want := range map[string]bool{"k": false, "before": true} {
		var rec *paddock.CallRecord
		if err := b.View(ctx, func(tx paddock.Tx) (err error) { rec, err = tx.CallKeys().Get(ctx, key); return err }); err != nil {
			t.Fatal(err)
		}
		if (rec != nil) != want {
			t.Fatalf("after the fenced claim, key %s's record: %+v", key, rec)
		}
	}
}
