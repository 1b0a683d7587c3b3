package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// testCallKeys: a key is claimed once (a second claim returns the first
// record and changes nothing); only its owner finishes it, once, and the
// answer is kept byte for byte; a forgotten key (its call did nothing)
// may be claimed again, a done one is never forgotten; records older than
// the bound are pruned.
//
// It runs twice: claiming in a transaction, and through paddock.ClaimCall
// (a store's own, in fewer round trips, where it has one), whose prune
// is tried too.
func testCallKeys(t *testing.T, open Opener) {
	t.Run("Claim", func(t *testing.T) {
		testCallKeysClaimed(t, open, func(t *testing.T, s paddock.Store, c *paddock.CallRecord) (old *paddock.CallRecord) {
			update(t, s, func(tx paddock.Tx) (err error) {
				old, err = tx.CallKeys().Claim(context.Background(), c)
				return err
			})
			return old
		})
	})
	t.Run("ClaimCall", func(t *testing.T) {
		testCallKeysClaimed(t, open, func(t *testing.T, s paddock.Store, c *paddock.CallRecord) *paddock.CallRecord {
			old, err := paddock.ClaimCall(context.Background(), s, c, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			return old
		})
		// Its prune: the records made before the bound go, in the
		// claim's transaction, and a key held is still told.
		s, _ := fresh(t, open)
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		for _, c := range []*paddock.CallRecord{{Key: "old", Request: "r", Owner: "n", CreatedAt: now.Add(-2 * time.Hour)},
			{Key: "new", Request: "r", Owner: "n", CreatedAt: now}} {
			if old, err := paddock.ClaimCall(ctx, s, c, time.Time{}); err != nil || old != nil {
				t.Fatalf("claim %s: %+v %v", c.Key, old, err)
			}
		}
		old, err := paddock.ClaimCall(ctx, s, &paddock.CallRecord{Key: "new", Request: "r2", Owner: "m", CreatedAt: now}, now.Add(-time.Hour))
		if err != nil || old == nil || old.Request != "r" || old.Owner != "n" {
			t.Fatalf("a held key's claim, with a prune: %+v %v", old, err)
		}
		if old, err := paddock.ClaimCall(ctx, s, &paddock.CallRecord{Key: "old", Request: "r2", Owner: "m", CreatedAt: now}, now.Add(-time.Hour)); err != nil || old != nil {
			t.Fatalf("a key made before the bound, claimed again with a prune: %+v %v", old, err)
		}
	})
}

func testCallKeysClaimed(t *testing.T, open Opener, claimIn func(*testing.T, paddock.Store, *paddock.CallRecord) *paddock.CallRecord) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	claim := func(key, req, owner string, at time.Time) *paddock.CallRecord {
		t.Helper()
		return claimIn(t, s, &paddock.CallRecord{Key: key, Request: req, Owner: owner, CreatedAt: at})
	}
	if old := claim("k1", "req-a", "node-1", now); old != nil {
		t.Fatalf("a new key's claim found %+v", old)
	}
	get := func(key string) (rec *paddock.CallRecord) {
		t.Helper()
		if err := s.View(ctx, func(tx paddock.Tx) (err error) { rec, err = tx.CallKeys().Get(ctx, key); return err }); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	if rec := get("k1"); rec == nil || rec.Request != "req-a" || rec.Owner != "node-1" || rec.Done || !rec.CreatedAt.Equal(now) {
		t.Fatalf("a claimed key's record: %+v", rec)
	}
	if rec := get("nothing"); rec != nil {
		t.Fatalf("a key never claimed: %+v", rec)
	}
	old := claim("k1", "req-b", "node-2", now.Add(time.Second))
	if old == nil || old.Request != "req-a" || old.Owner != "node-1" || old.Done || !old.CreatedAt.Equal(now) {
		t.Fatalf("a second claim: %+v", old)
	}
	wantCode(t, s.Update(ctx, func(tx paddock.Tx) error {
		return tx.CallKeys().Finish(ctx, "k1", "node-2", 200, []byte("x"))
	}), paddock.CodeConflict)
	answer := []byte("{\"ok\":true}\n\x00\xff")
	update(t, s, func(tx paddock.Tx) error { return tx.CallKeys().Finish(ctx, "k1", "node-1", 201, answer) })
	wantCode(t, s.Update(ctx, func(tx paddock.Tx) error {
		return tx.CallKeys().Finish(ctx, "k1", "node-1", 500, nil)
	}), paddock.CodeConflict)
	// A done call is never forgotten.
	update(t, s, func(tx paddock.Tx) error { return tx.CallKeys().Forget(ctx, "k1", "node-1") })
	old = claim("k1", "req-a", "node-1", now)
	if old == nil || !old.Done || old.Status != 201 || string(old.Answer) != string(answer) {
		t.Fatalf("a done call's record: %+v", old)
	}
	// A call that did nothing is forgotten by its owner only.
	claim("k2", "req", "node-1", now)
	update(t, s, func(tx paddock.Tx) error { return tx.CallKeys().Forget(ctx, "k2", "node-2") })
	if old := claim("k2", "req", "node-2", now); old == nil || old.Owner != "node-1" {
		t.Fatalf("another owner forgot the key: %+v", old)
	}
	update(t, s, func(tx paddock.Tx) error { return tx.CallKeys().Forget(ctx, "k2", "node-1") })
	if old := claim("k2", "req", "node-2", now); old != nil {
		t.Fatalf("a forgotten key is still claimed: %+v", old)
	}
	// An empty answer is kept as one.
	update(t, s, func(tx paddock.Tx) error { return tx.CallKeys().Finish(ctx, "k2", "node-2", 204, nil) })
	if old := claim("k2", "req", "node-2", now); old == nil || !old.Done || old.Status != 204 || len(old.Answer) != 0 {
		t.Fatalf("an empty answer: %+v", old)
	}
	claim("k3", "req", "node-1", now.Add(-2*time.Hour))
	var n int64
	update(t, s, func(tx paddock.Tx) (err error) {
		n, err = tx.CallKeys().Prune(ctx, now.Add(-time.Hour))
		return err
	})
	if n != 1 {
		t.Fatalf("pruned %d, want 1", n)
	}
	if old := claim("k3", "req", "node-2", now); old != nil {
		t.Fatalf("a pruned key is still claimed: %+v", old)
	}
	if old := claim("k1", "req-a", "node-1", now); old == nil {
		t.Fatal("a key made after the bound was pruned")
	}
}
