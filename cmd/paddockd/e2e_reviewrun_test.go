package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestReviewVerb: paddock review, as an operator types it: a review run
// of the submitted change set, found again by hash, whose commands see
// the coder's work at HEAD, and which can never be approved.
func TestReviewVerb(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "app"), map[string]string{"README.md": "hello\n"})
	startDaemon(t, home)
	cli(t, home, "project", "add", repo, "--name", "app").must(t)
	coder := decode[paddock.Run](t, cli(t, home, "create", "--project", "app", "--json"))
	if r := cli(t, home, "review", coder.ID); r.code != exitConflict || !strings.Contains(r.err, "no submitted change set") {
		t.Fatalf("review before a submission: %d %s", r.code, r.err)
	}
	cli(t, home, "tool", coder.ID, "write", "--arg", "path=feature.txt", "--arg", "content=work").must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", coder.ID, "--json"))

	r := cli(t, home, "review", coder.ID).must(t)
	if !strings.Contains(r.out, "of run "+coder.ID+"'s change set "+cs.Hash) || !strings.Contains(r.out, "paddock mcp r-") {
		t.Fatalf("review's answer:\n%s", r.out)
	}
	rv := decode[paddock.Run](t, cli(t, home, "review", coder.ID, "--json"))
	if rv.ReviewOf == nil || rv.ReviewOf.Hash != cs.Hash || !strings.Contains(r.out, rv.ID) {
		t.Fatalf("the same hash gave another review run: %+v\n%s", rv, r.out)
	}
	if out := cli(t, home, "exec", rv.ID, "--", "sh", "-c", "cat feature.txt; git log -1 --format=%P").must(t).out; out != "work"+coder.Workspace.BaseRevision+"\n" {
		t.Fatalf("inside the review run: %q", out)
	}
	a := cli(t, home, "approve", rv.ID, "--hash", cs.Hash)
	if a.code != exitForbidden || !strings.Contains(a.err, "review_run") {
		t.Fatalf("approving a review run: %d %s", a.code, a.err)
	}
	if b := cli(t, home, "review", coder.ID, "--agent", "coder"); b.code != exitUsage || !strings.Contains(b.err, "read only") {
		t.Fatalf("a writing reviewer: %d %s", b.code, b.err)
	}
}
