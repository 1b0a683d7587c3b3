package lifecycle_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestVerifyIgnoresWhatTheAgentShaped: verify runs the change set's bytes
// the way the merge queue does, so nothing the agent could shape without
// changing the diff decides the result (issue #29 item 3): `go env -w
// GOFLAGS=-run=^NONE$` in its home turned a failing Go test into "passed,
// 0 tests", and a planted build-cache entry made one pass. Here the
// project's test check passes only where the agent's shaping reaches it
// (its home's go env file, a file in a read-write cache, an ignored file
// beside the change set, a variable of its environment): it must fail,
// under the same hash, and a reviewer's verify of that hash must agree.
func TestVerifyIgnoresWhatTheAgentShaped(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make here")
	}
	e := newEnv(t)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	gittest.Commit(t, e.repo, "checks", map[string]string{
		"Makefile":   "test:\n\t@./fooled.sh\n",
		"fooled.sh":  "#!/bin/sh\n# passes only if something the agent shaped reaches the check\nfor f in \"$HOME/.config/go/env\" \"$HOME/.cache/go-build/planted\" ignored.txt; do\n  [ -e \"$f\" ] && echo \"fooled by $f\" && exit 0\ndone\n[ -n \"$AGENT_SET\" ] && echo fooled by AGENT_SET && exit 0\necho \"FAIL: nothing of the agent's here\"\nexit 1\n",
		".gitignore": "ignored.txt\n",
	})
	os.Chmod(filepath.Join(e.repo, "fooled.sh"), 0o755)
	gittest.Commit(t, e.repo, "exec bit", nil)
	e.project(t)
	withSandbox(t, e)
	if _, err := e.m.Projects.SetProject(ctx, "my-app", "test", paddock.SetProjectRequest{Caches: &[]string{"go-build:rw"}}); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []paddock.WorkspaceKind{paddock.KindOverlay, paddock.KindClone} {
		t.Run(string(kind), func(t *testing.T) {
			r := e.create(t, kind, "")
			// A change to the diff, so the check run holds a commit of it.
			if _, err := e.m.Broker.CallTool(ctx, r.ID, "write", json.RawMessage(`{"path":"doc.txt","content":"docs\n"}`)); err != nil {
				t.Fatal(err)
			}
			// What the agent shapes beside the diff.
			shape := "set -e; mkdir -p ~/.config/go ~/.cache/go-build; echo 'GOFLAGS=-run=^NONE$' > ~/.config/go/env; echo x > ~/.cache/go-build/planted; echo x > ignored.txt; ./fooled.sh"
			res, err := e.m.Broker.Exec(agentCtx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", shape}})
			if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout, "fooled by") {
				t.Fatalf("shaping the agent's run: %+v %v", res, err)
			}
			cs, err := e.m.Changes.ChangeSet(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.m.Verifier.Verify(agentCtx, r.ID, paddock.VerifyRequest{Checks: []string{"test"}})
			if err != nil {
				t.Fatal(err)
			}
			if got.Passed || got.Hash != cs.Hash || got.RanIn == nil || got.RanIn.Run == r.ID || got.RanIn.Home != "fresh" || !strings.Contains(got.Checks[0].Output, "FAIL: nothing") {
				t.Fatalf("verify, with the agent's run shaped: %+v %+v", got, got.RanIn)
			}
			if len(got.RanIn.Withheld) != 1 || got.RanIn.Withheld[0] != "go-build" {
				t.Errorf("the read-write cache is not named withheld: %+v", got.RanIn)
			}
			// The check run is gone.
			if ck, err := e.m.Run(ctx, got.RanIn.Run); err != nil || ck.State() == paddock.StateActive || ck.State() == paddock.StateReady {
				t.Errorf("the check run stays: %v %v", ck, err)
			}
			// A reviewer's verify of the same hash agrees.
			if _, err := e.m.Changes.Submit(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
			rv, err := e.m.Reviews.Review(ctx, r.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := e.m.Verifier.Verify(agentCtx, rv.ID, paddock.VerifyRequest{Checks: []string{"test"}})
			if err != nil {
				t.Fatal(err)
			}
			if theirs.Passed != got.Passed || theirs.RanIn == nil || theirs.RanIn.Base != got.RanIn.Base {
				t.Fatalf("the reviewer's verify %+v (%+v), the coder's %+v (%+v)", theirs, theirs.RanIn, got, got.RanIn)
			}
			e.m.Runs.Reject(ctx, rv.ID)
			e.m.Runs.Reject(ctx, r.ID)
		})
	}
}
