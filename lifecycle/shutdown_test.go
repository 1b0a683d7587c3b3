package lifecycle_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
)

// TestStopWithIdleRunsStartsNoSandbox: #30 item 8. A graceful stop
// checkpoints every active run; an overlay run whose sandbox was given back
// (idle) is checkpointed without reading its layer, which would start a
// sandbox for each; one whose sandbox runs is read as before. After the
// restart, a person's call names the one command that resumes it, and
// the resume (which reads the layer then) finds the run's files.
func TestStopWithIdleRunsStartsNoSandbox(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	var ids []string
	for i := 0; i < 3; i++ {
		r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "overlay"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "echo kept > kept.txt"}}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	for _, id := range ids[1:] {
		e.m.Harnesses.Release(id) // given back, as an idle one is
	}
	logs := &lockedBuffer{}
	e.m.Harnesses.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := e.m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "harness started") {
		t.Fatalf("the stop started a sandbox:\n%s", logs)
	}
	for i, id := range ids {
		r, _ := e.m.Run(ctx, id)
		cp := r.Workspace.Checkpoint
		unread := cp != nil && cp.Digest == "" && strings.Contains(cp.Reason, "not read")
		if r.State() != paddock.StateCheckpointed || cp == nil || unread != (i > 0) {
			t.Fatalf("run %d after the stop: %s %+v", i, r.State(), cp)
		}
	}
	e.reopen(t)
	withSandbox(t, e)
	if _, err := e.m.Broker.CallTool(ctx, ids[1], "read", json.RawMessage(`{"path":"kept.txt"}`)); !paddock.IsCode(err, paddock.CodeConflict) || !strings.Contains(err.Error(), "paddock resume "+ids[1]) {
		t.Fatalf("a person's read of a run the restart checkpointed: %v", err)
	}
	if rr, err := e.m.Runs.Resume(ctx, ids[1]); err != nil || rr.Drift {
		t.Fatalf("the resume: %v %+v", err, rr)
	}
	res, err := e.m.Broker.CallTool(ctx, ids[1], "read", json.RawMessage(`{"path":"kept.txt"}`))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res); !strings.Contains(string(b), "kept") {
		t.Fatalf("the read: %s", b)
	}
	r, _ := e.m.Run(ctx, ids[1])
	evs, _ := e.m.Runs.Events(ctx, ids[1], 0, 0)
	b, _ := json.Marshal(evs)
	if r.State() != paddock.StateActive || !strings.Contains(string(b), `"by":"operator"`) || strings.Contains(string(b), `"drift":true`) {
		t.Fatalf("after the person's call: %s\n%s", r.State(), b)
	}
}
