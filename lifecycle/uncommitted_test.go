package lifecycle_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestIncludeUncommitted: #30 item 7. A run made with include_uncommitted
// starts with the checkout's uncommitted changes (an edit, a new file, a
// removal; not an ignored file) in its base, so they are not the agent's
// and its change set holds only what the agent does; the project, its
// object store included, stays byte-identical; the run lands into the
// working tree, never on a branch. Clone and overlay alike.
func TestIncludeUncommitted(t *testing.T) {
	for _, kind := range []paddock.WorkspaceKind{paddock.KindClone, paddock.KindOverlay} {
		t.Run(string(kind), func(t *testing.T) {
			e := newEnv(t)
			e.project(t)
			withSandbox(t, e)
			ctx := context.Background()
			os.WriteFile(filepath.Join(e.repo, ".gitignore"), []byte("secret.env\n"), 0o644)
			gittest.Commit(t, e.repo, "ignore", nil)
			os.WriteFile(filepath.Join(e.repo, "README.md"), []byte("hello, edited and not committed\n"), 0o644)
			os.WriteFile(filepath.Join(e.repo, "draft.txt"), []byte("a draft\n"), 0o644)
			// A check the checkout declares, uncommitted: it passes only on
			// the person's draft and the agent's file together.
			os.WriteFile(filepath.Join(e.repo, "Makefile"), []byte("test:\n\ttest -f draft.txt && test -f agent.txt\n"), 0o644)
			os.Remove(filepath.Join(e.repo, "cmd", "main.go"))
			os.WriteFile(filepath.Join(e.repo, "secret.env"), []byte("TOKEN=x\n"), 0o600)
			before, lines := gittest.TreeDigest(t, e.repo)

			r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: string(kind), IncludeUncommitted: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.Workspace.Branch != "" {
				t.Fatalf("the run's base, a commit of no branch's, is shown on %s", r.Workspace.Branch)
			}
			res, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "cat README.md draft.txt; test -e cmd/main.go && echo MAIN; test -e secret.env && echo SECRET; git log --format=%s -1"}})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(res.Stdout, "hello, edited and not committed\na draft\n") || strings.Contains(res.Stdout, "MAIN") || strings.Contains(res.Stdout, "SECRET") {
				t.Fatalf("the run's base: %q (stderr %s)", res.Stdout, res.Stderr)
			}
			cs, err := e.m.Changes.ChangeSet(ctx, r.ID)
			if err != nil || len(cs.Entries) != 0 {
				t.Fatalf("the change set of a run that did nothing: %v %+v", err, cs)
			}
			if _, err := e.m.Broker.CallTool(ctx, r.ID, "write", json.RawMessage(`{"path":"agent.txt","content":"the agent's\n"}`)); err != nil {
				t.Fatal(err)
			}
			cs, err = e.m.Changes.ChangeSet(ctx, r.ID)
			if err != nil || len(cs.Entries) != 1 || cs.Entries[0].Path != "agent.txt" {
				t.Fatalf("the change set holds more than the agent's: %v %+v", err, cs)
			}
			if v, err := e.m.Verifier.Verify(ctx, r.ID, paddock.VerifyRequest{Checks: []string{"test"}}); err != nil || !v.Passed {
				t.Fatalf("verify on the checkout's draft and the agent's file: %v %+v", err, v)
			}
			sub, err := e.m.Changes.Submit(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			rv, err := e.m.Reviews.Review(ctx, r.ID, "")
			if err != nil {
				t.Fatalf("a review of the run: %v", err)
			}
			if res, err := e.m.Broker.Exec(ctx, rv.ID, paddock.ExecRequest{Argv: []string{"cat", "draft.txt", "agent.txt"}}); err != nil || res.Stdout != "a draft\nthe agent's\n" {
				t.Fatalf("the review run's view: %v %+v", err, res)
			}
			if _, err := e.m.Changes.Approve(ctx, r.ID, sub.Hash, "test"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.m.Changes.Apply(ctx, r.ID, "", e.m.Identity); !paddock.IsCode(err, paddock.CodeConflict) || !strings.Contains(err.Error(), "--to worktree") {
				t.Fatalf("an apply to a branch: %v", err)
			}
			if after, _ := gittest.TreeDigest(t, e.repo); after != before {
				t.Fatalf("the project changed:\n%s", lines)
			}
		})
	}
	e := newEnv(t)
	e.project(t)
	for _, req := range []paddock.CreateRunRequest{
		{Project: "my-app", Kind: "worktree", IncludeUncommitted: true},
		{Project: "my-app", Kind: "clone", Base: "HEAD~1", IncludeUncommitted: true},
	} {
		if _, err := e.m.Runs.Create(context.Background(), req); !paddock.IsCode(err, paddock.CodeBadRequest) {
			t.Errorf("%+v: %v, want bad_request", req, err)
		}
	}
}
