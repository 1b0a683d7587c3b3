package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestMergeQueue: approved runs made at one base land one after the other
// on a branch that moves under them: each replayed onto the tip as it is,
// checked there with the manifest's check, landed by one compare-and-swap.
// A run whose check fails on the replay, one whose file the branch changed
// too (back for a look, then accepted), and one that overlaps the branch's
// own change come back instead; a landing can be undone while nothing
// landed after it; the checked-out branch is refused.
func TestMergeQueue(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, repo := reviewDaemon(t)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(home, "test-daemon.log"))
			t.Logf("the daemon's log:\n%s", b[max(0, len(b)-6000):])
		}
	})
	lines := ""
	for i := 1; i <= 12; i++ {
		lines += fmt.Sprintf("line %d\n", i)
	}
	// The check: `make test` fails when a file named broken is there.
	gittest.Commit(t, repo, "a check and a long file", map[string]string{"Makefile": "test:\n\ttest ! -e broken\n", "long.txt": lines})
	gittest.Git(t, repo, "branch", "release")
	current := strings.TrimSpace(gittest.Git(t, repo, "rev-parse", "--abbrev-ref", "HEAD"))

	approved := func(script string) string {
		t.Helper()
		id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
		cli(t, home, "exec", id, "--", "sh", "-c", script).must(t)
		cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
		cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
		return id
	}
	a := approved(`printf 'hello from a\n' > README.md`)
	b := approved(`printf 'new\n' > new.txt`)
	c := approved(`touch broken`)
	d := approved(`sed -i 's/^line 2$/line two/' long.txt`)
	e := approved(`sed -i 's/^line 11$/line eleven, from the run/' long.txt`)
	unapproved := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)

	cli(t, home, "queue", "add", a, "--to", current).wantCode(t, exitConflict, "checked out")
	cli(t, home, "queue", "add", a, "--to", "nowhere").wantCode(t, exitNotFound, "no branch")
	cli(t, home, "queue", "add", unapproved, "--to", "release").wantCode(t, exitConflict, "submit it first")
	cli(t, home, "queue", "add", a).wantCode(t, exitUsage, "--to")
	cli(t, home, "queue", "list").wantCode(t, exitUsage, "unknown queue verb")
	cli(t, home, "queue", "ls", "--project", "nosuch").wantCode(t, exitNotFound, "nosuch")

	// a lands; b was made at the same base and lands on the moved tip,
	// approved as it is: the branch did not touch its file.
	land := func(id string) paddock.QueueEntry {
		t.Helper()
		return decode[paddock.QueueEntry](t, cli(t, home, "queue", "add", id, "--to", "release", "--wait=60s", "--json"))
	}
	ea := land(a)
	eb := land(b)
	if ea.State != paddock.QueueLanded || eb.State != paddock.QueueLanded || eb.Tip != ea.Commit || len(eb.Merged) != 0 {
		t.Fatalf("a: %+v\nb: %+v", ea, eb)
	}
	if got := gittest.Git(t, repo, "show", "release:README.md") + gittest.Git(t, repo, "show", "release:new.txt"); got != "hello from anew" {
		t.Fatalf("release holds %q", got)
	}
	if gittest.Git(t, repo, "rev-parse", "release") != eb.Commit {
		t.Fatal("release is not at b's commit")
	}
	// The checks' throwaway runs leave no snapshot of the commits they checked.
	for _, c := range []string{ea.Commit, eb.Commit} {
		if _, err := os.Stat(filepath.Join(home, "snapshots", "app", c)); !os.IsNotExist(err) {
			t.Errorf("the snapshot of checked commit %s is still there: %v", c, err)
		}
	}
	// A run landed through the queue is applied: it cannot land twice.
	cli(t, home, "apply", a).wantCode(t, exitConflict, "applied already")

	// c's check fails on the replay: it comes back, the branch unmoved,
	// and the project's store holds none of its replay (it was committed
	// into the queue's own: #29 item 2).
	objects, objectLines := gittest.TreeDigest(t, filepath.Join(repo, ".git", "objects"))
	cli(t, home, "queue", "add", c, "--to", "release", "--wait=60s").wantCode(t, exitConflict, "check test failed")
	gittest.RequireIdentical(t, filepath.Join(repo, ".git", "objects"), objects, objectLines)
	if gittest.Git(t, repo, "rev-parse", "release") != eb.Commit {
		t.Fatal("a failed check moved the branch")
	}

	// The branch changes long.txt's line 11 itself.
	wt := filepath.Join(t.TempDir(), "wt")
	gittest.Git(t, repo, "worktree", "add", "-q", wt, "release")
	gittest.Commit(t, wt, "the branch's own change", map[string]string{"long.txt": strings.Replace(lines, "line 11\n", "line eleven, from the branch\n", 1)})
	gittest.Git(t, repo, "worktree", "remove", wt)
	tip := strings.TrimSpace(gittest.Git(t, repo, "rev-parse", "release"))

	// d's change (line 2) merges with it, but what would land is not what
	// was approved: it comes back, with the diff to look at.
	cli(t, home, "queue", "add", d, "--to", "release", "--wait=60s").wantCode(t, exitConflict, "differs from what was approved")
	shown := decode[paddock.QueueEntry](t, cli(t, home, "queue", "show", d, "--json"))
	if shown.State != paddock.QueueReturned || shown.Tip != tip || len(shown.Merged) != 1 || !strings.Contains(shown.Diff, "+line two") || shown.Tree == "" {
		t.Fatalf("d came back as %+v", shown)
	}
	if out := cli(t, home, "queue", "ls").must(t).out; !strings.Contains(out, d) || !strings.Contains(out, "returned") {
		t.Fatalf("queue ls:\n%s", out)
	}
	ed := decode[paddock.QueueEntry](t, cli(t, home, "queue", "add", d, "--to", "release", "--accept", shown.Tree, "--wait=60s", "--json"))
	if ed.State != paddock.QueueLanded || ed.Tree != shown.Tree {
		t.Fatalf("d accepted: %+v", ed)
	}
	if got := gittest.Git(t, repo, "show", "release:long.txt"); !strings.Contains(got, "line two\n") || !strings.Contains(got, "line eleven, from the branch\n") {
		t.Fatalf("release's long.txt:\n%s", got)
	}

	// e overlaps the branch's own change: a conflict, nothing merged.
	cli(t, home, "queue", "add", e, "--to", "release", "--wait=60s").wantCode(t, exitConflict, "conflicts")
	cli(t, home, "queue", "rm", e).must(t)
	if out := cli(t, home, "queue", "ls").must(t).out; strings.Contains(out, e) {
		t.Fatalf("a removed entry is listed:\n%s", out)
	}

	// Undo d: the branch goes back to the tip it landed on.
	cli(t, home, "queue", "undo", d).must(t)
	if got := strings.TrimSpace(gittest.Git(t, repo, "rev-parse", "release")); got != tip {
		t.Fatalf("after the undo release is at %s, want %s", got, tip)
	}
	cli(t, home, "queue", "undo", b).wantCode(t, exitConflict, "moved on")
	ev := cli(t, home, "events", d, "--json").must(t).out
	for _, want := range []string{paddock.EventQueueAdded, paddock.EventQueueTesting, paddock.EventQueueReturned, paddock.EventQueueLanded, paddock.EventQueueUndone} {
		if !strings.Contains(ev, want) {
			t.Errorf("no %s event on d", want)
		}
	}
	if all := decode[[]paddock.QueueEntry](t, cli(t, home, "queue", "ls", "--all", "--json")); len(all) < 6 {
		t.Fatalf("queue ls --all: %d entries", len(all))
	}
}
