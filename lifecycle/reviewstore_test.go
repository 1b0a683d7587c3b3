package lifecycle_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestReviewWritesNothingIntoTheProject: a review run sees the change set
// under review as a commit, yet that commit (unapproved content) is in
// no store of the project's: after review and reject the repository is
// byte-identical, .git/objects included, and another run of the project
// cannot read the reviewed content from the object store every run shares
// (issue #29 item 2: a run printed another run's secret with git
// cat-file). The reviewer's checks are read from the reviewed run's base,
// never from the change set under review.
func TestReviewWritesNothingIntoTheProject(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// The base's checks: a Makefile's test.
	gittest.Commit(t, e.repo, "checks", map[string]string{"Makefile": "test:\n\ttrue\n"})
	e.project(t)
	withSandbox(t, e)
	for _, kind := range []paddock.WorkspaceKind{paddock.KindOverlay, paddock.KindClone, paddock.KindWorktree} {
		t.Run(string(kind), func(t *testing.T) {
			coder := e.create(t, kind, "")
			if _, err := e.m.Broker.CallTool(ctx, coder.ID, "write", json.RawMessage(`{"path":"creds.txt","content":"token=unapproved-`+string(kind)+`\n"}`)); err != nil {
				t.Fatal(err)
			}
			// The change set's own recipe for the checks, which a review
			// must not take.
			if _, err := e.m.Broker.CallTool(ctx, coder.ID, "write", json.RawMessage(`{"path":"Makefile","content":"test:\n\ttrue\nlint:\n\techo planted\n"}`)); err != nil {
				t.Fatal(err)
			}
			cs, err := e.m.Changes.Submit(ctx, coder.ID)
			if err != nil {
				t.Fatal(err)
			}
			digest, lines := gittest.TreeDigest(t, e.repo)
			rv, err := e.m.Reviews.Review(ctx, coder.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			gittest.RequireIdentical(t, e.repo, digest, lines)
			out := sh(t, e.m, rv.ID, `cat creds.txt; git rev-parse HEAD HEAD~1; git cat-file -p HEAD:creds.txt; git status --porcelain`)
			want := "token=unapproved-" + string(kind) + "\n" + rv.ReviewOf.Commit + "\n" + coder.Workspace.BaseRevision + "\ntoken=unapproved-" + string(kind) + "\n"
			if out != want {
				t.Fatalf("the reviewer's view:\n%q\nwant\n%q", out, want)
			}
			if rv.ReviewOf.Base != coder.Workspace.BaseRevision || rv.ReviewOf.Hash != cs.Hash {
				t.Fatalf("review of: %+v", rv.ReviewOf)
			}
			// The reviewer's checks are the base's, as the coder's are.
			cc, err1 := e.m.Broker.Capabilities(ctx, coder.ID)
			rc, err2 := e.m.Broker.Capabilities(ctx, rv.ID)
			if err1 != nil || err2 != nil || strings.Join(cc.Checks, ",") != "test" || strings.Join(rc.Checks, ",") != "test" {
				t.Fatalf("the reviewer's checks %v, the coder's %v (%v %v)", rc.Checks, cc.Checks, err1, err2)
			}
			// Another run of the project: the commit is nowhere it can read.
			other := e.create(t, paddock.KindClone, "")
			res, err := e.m.Broker.Exec(ctx, other.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "git cat-file -p " + rv.ReviewOf.Commit + ":creds.txt; git fsck --lost-found 2>/dev/null | grep -c commit || true"}})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(res.Stdout, "unapproved") {
				t.Fatalf("another run read the reviewed content from the shared store:\n%s", res.Stdout)
			}
			if err := exec.Command("git", "-C", e.repo, "cat-file", "-e", rv.ReviewOf.Commit+"^{commit}").Run(); err == nil {
				t.Fatal("the project's store holds the review commit")
			}
			if _, err := e.m.Runs.Reject(ctx, rv.ID); err != nil {
				t.Fatal(err)
			}
			gittest.RequireIdentical(t, e.repo, digest, lines)
			if _, err := e.m.Runs.Reject(ctx, coder.ID); err != nil {
				t.Fatal(err)
			}
		})
	}
}
