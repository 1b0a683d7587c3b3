package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/lifecycle"
)

// A daemon that has seen many runs keeps nothing in memory for those that
// are gone: each run here writes through the broker (provenance), one in ten of
// them are approved and applied (the landing lock), and all are cleaned
// up; then no service holds an entry for any of them.
func TestCleanedRunsLeaveNothingInMemory(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	const runs = 120
	var ids []string
	for i := range runs {
		r := e.create(t, paddock.KindClone, "") // a clone run tracks its base tree whole
		ids = append(ids, r.ID)
		args := json.RawMessage(fmt.Sprintf(`{"path":"f%d.txt","content":"x"}`, i))
		if _, err := e.m.Broker.CallTool(ctx, r.ID, "write", args); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			cs, err := e.m.Changes.Submit(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.m.Changes.Approve(ctx, r.ID, cs.Hash, "a"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.m.Changes.Apply(ctx, r.ID, "paddock/"+r.ID, gitx.Identity{Name: "t", Email: "t@example.com"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The test sees what it counts: the runs' tracking state is there
	// while they live (once the looks after their calls are done).
	lifecycle.SettleEffects(e.m, ids...)
	if n := lifecycle.RunMemory(e.m)["provenance states"]; n != runs {
		t.Fatalf("%d runs tracked before cleanup, want %d", n, runs)
	}
	for _, id := range ids {
		if _, err := e.m.Runs.Reject(ctx, id); err != nil {
			t.Fatal(err)
		}
		if r, err := e.m.Run(ctx, id); err != nil || r.State() != paddock.StateCleaned {
			t.Fatalf("run %s: %v, %v", id, r.State(), err)
		}
	}
	for what, n := range lifecycle.RunMemory(e.m) {
		if n != 0 {
			t.Errorf("%d runs left in %s after cleanup", n, what)
		}
	}
}

// A call that was still tracking its effects when its run was cleaned up
// (it waited for the journal's lock) makes no state again for the gone
// run.
func TestLateTrackingMakesNoStateForACleanedRun(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	r := e.create(t, paddock.KindClone, "")
	if _, err := e.m.Broker.CallTool(ctx, r.ID, "write", json.RawMessage(`{"path":"a.txt","content":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Runs.Reject(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	lifecycle.TrackEffects(ctx, e.m, r, 99) // r as the late call saw it: live
	if n := lifecycle.RunMemory(e.m)["provenance states"]; n != 0 {
		t.Fatalf("%d runs' provenance state after a late call on a cleaned run", n)
	}
}
