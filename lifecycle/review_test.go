package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestReviewRun: a review run's workspace is exactly the coder's
// submitted change set on its base, its git at a commit of it; the
// reviewer's builds see it, and nothing the reviewer does (a write tool,
// a shell writing files, git commit, git config) reaches the coder's run,
// its change set, the project or its refs. It is found again by hash,
// moves when the coder submits again, and can never submit, approve or
// apply.
func TestReviewRun(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	withSandbox(t, e)
	for _, kind := range []paddock.WorkspaceKind{paddock.KindOverlay, paddock.KindClone} {
		t.Run(string(kind), func(t *testing.T) {
			coder := e.create(t, kind, "")
			if _, err := e.m.Broker.CallTool(ctx, coder.ID, "write", json.RawMessage(`{"path":"feature.txt","content":"the coder's work\n"}`)); err != nil {
				t.Fatal(err)
			}
			if _, err := e.m.Broker.CallTool(ctx, coder.ID, "edit", json.RawMessage(`{"path":"README.md","old_string":"hello","new_string":"hello, reviewed"}`)); err != nil {
				t.Fatal(err)
			}
			if _, err := e.m.Reviews.Review(ctx, coder.ID, ""); !paddock.IsCode(err, paddock.CodeConflict) {
				t.Fatalf("a review of nothing submitted: %v", err)
			}
			cs, err := e.m.Changes.Submit(ctx, coder.ID)
			if err != nil {
				t.Fatal(err)
			}
			refs := gittest.Git(t, e.repo, "for-each-ref")
			head := gittest.Git(t, e.repo, "rev-parse", "HEAD")

			rv, err := e.m.Reviews.Review(ctx, coder.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			if rv.Access != paddock.AccessRead || rv.ReviewOf == nil || rv.ReviewOf.Run != coder.ID || rv.ReviewOf.Hash != cs.Hash || rv.Agent.Name != "reviewer" {
				t.Fatalf("the review run: %+v %+v", rv, rv.ReviewOf)
			}
			if again, err := e.m.Reviews.Review(ctx, coder.ID, ""); err != nil || again.ID != rv.ID {
				t.Fatalf("a second review of the same hash: %v %v", again, err)
			}
			// What the reviewer sees: the coder's bytes, HEAD at the commit
			// holding them, on the coder's base.
			out := sh(t, e.m, rv.ID, `cat feature.txt README.md; git rev-parse HEAD HEAD~1; git status --porcelain; git symbolic-ref -q HEAD || true`)
			want := "the coder's work\nhello, reviewed\n" + rv.ReviewOf.Commit + "\n" + coder.Workspace.BaseRevision + "\n"
			if out != want {
				t.Fatalf("the reviewer's view:\n%q\nwant\n%q", out, want)
			}
			// Write tools are refused; a shell's writes, a commit and a
			// config change evaporate with their command.
			if _, err := e.m.Broker.CallTool(ctx, rv.ID, "write", json.RawMessage(`{"path":"README.md","content":"approved by me"}`)); !paddock.IsCode(err, paddock.CodeForbidden) {
				t.Fatalf("a review run's write: %v", err)
			}
			sh(t, e.m, rv.ID, `echo mine > README.md; git config user.email reviewer@example.com; git commit -qam "self-approved" || true`)
			if out := sh(t, e.m, rv.ID, `cat README.md; git rev-parse HEAD; git config user.email`); out != "hello, reviewed\n"+rv.ReviewOf.Commit+"\nagent@paddock.invalid\n" {
				t.Fatalf("the reviewer's writes outlived their command:\n%s", out)
			}
			for what, err := range map[string]error{
				"submit":  func() error { _, err := e.m.Changes.Submit(ctx, rv.ID); return err }(),
				"approve": func() error { _, err := e.m.Changes.Approve(ctx, rv.ID, cs.Hash, "op"); return err }(),
				"apply": func() error {
					_, err := e.m.Changes.Apply(ctx, rv.ID, "", gitx.Identity{Name: "Op", Email: "op@example.com"})
					return err
				}(),
				"apply to the worktree": func() error {
					_, err := e.m.Changes.ApplyToWorktree(ctx, rv.ID, false)
					return err
				}(),
			} {
				var pe *paddock.Error
				if !errors.As(err, &pe) || pe.Rule != paddock.RuleReviewRun {
					t.Errorf("a review run's %s: %v", what, err)
				}
			}
			// Nothing moved: the coder's change set, the project, its refs.
			if now, err := e.m.Changes.ChangeSet(ctx, coder.ID); err != nil || now.Hash != cs.Hash {
				t.Fatalf("the coder's change set moved: %v %v", now, err)
			}
			if got := gittest.Git(t, e.repo, "for-each-ref"); got != refs {
				t.Fatalf("the project's refs changed:\n%s\nwas\n%s", got, refs)
			}
			if got := gittest.Git(t, e.repo, "rev-parse", "HEAD"); got != head {
				t.Fatal("the project's HEAD moved")
			}
			if b, _ := os.ReadFile(filepath.Join(e.repo, "README.md")); string(b) != "hello\n" {
				t.Fatalf("the checkout's README: %q", b)
			}

			// The coder submits again: the review moves to the new hash.
			if _, err := e.m.Broker.CallTool(ctx, coder.ID, "write", json.RawMessage(`{"path":"feature.txt","content":"the coder's second try\n"}`)); err != nil {
				t.Fatal(err)
			}
			cs2, err := e.m.Changes.Submit(ctx, coder.ID)
			if err != nil {
				t.Fatal(err)
			}
			if old, _ := e.m.Run(ctx, rv.ID); old.State() != paddock.StateRejected && old.State() != paddock.StateCleaned {
				t.Fatalf("the review of the older change set is %s", old.State())
			}
			rv2, err := e.m.Reviews.Review(ctx, coder.ID, "")
			if err != nil || rv2.ID == rv.ID || rv2.ReviewOf.Hash != cs2.Hash {
				t.Fatalf("after a new submission: %+v %v", rv2, err)
			}
			if out := sh(t, e.m, rv2.ID, `cat feature.txt`); out != "the coder's second try\n" {
				t.Fatalf("the moved review sees %q", out)
			}
			evs, _ := e.m.Runs.Events(ctx, coder.ID, 0, 1000)
			var started int
			for _, ev := range evs {
				if ev.Type == paddock.EventReviewStarted {
					started++
				}
			}
			if started != 2 {
				t.Errorf("review.started events on the coder's run: %d", started)
			}
			// A review run is never itself reviewed, and a writer never reviews.
			if _, err := e.m.Reviews.Review(ctx, rv2.ID, ""); !paddock.IsCode(err, paddock.CodeConflict) {
				t.Errorf("a review of a review: %v", err)
			}
			if _, err := e.m.Reviews.Review(ctx, coder.ID, "coder"); !paddock.IsCode(err, paddock.CodeBadRequest) || !strings.Contains(paddock.ErrorMessage(err), "read only") {
				t.Errorf("a review by a writing agent: %v", err)
			}
		})
	}
}
