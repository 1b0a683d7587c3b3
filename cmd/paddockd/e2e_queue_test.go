package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// The tests below were red team 3's attacks on the merge queue as it
// landed (the report of branch red3): one that fails is a finding.

// TestQueueMovesABranchCheckedOutElsewhere: the queue refuses the
// branch checked out in the project's main working tree, and asks only
// there (landable reads HEAD): a branch checked out in a linked `git
// worktree` is moved by update-ref under that worktree's files (its
// index and files then say the landing's reverse is a local change), and
// `queue undo` moves a branch back with no check at all, even the one
// checked out in the main working tree now. Both must be refused, as
// the checked-out branch is.
func TestQueueMovesABranchCheckedOutElsewhere(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, repo := reviewDaemon(t)
	gittest.Git(t, repo, "branch", "release")
	gittest.Git(t, repo, "branch", "other")
	wt := filepath.Join(t.TempDir(), "wt")
	gittest.Git(t, repo, "worktree", "add", "-q", wt, "release")
	t.Cleanup(func() { gittest.Git(t, repo, "worktree", "remove", "--force", wt) })

	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf 'from the queue\n' > README.md`).must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
	before := strings.TrimSpace(gittest.Git(t, repo, "rev-parse", "release"))
	res := cli(t, home, "queue", "add", id, "--to", "release", "--wait=60s")
	if after := strings.TrimSpace(gittest.Git(t, repo, "rev-parse", "release")); after != before {
		st := gittest.Git(t, wt, "status", "--porcelain")
		t.Errorf("the queue moved release, checked out in the linked worktree %s, under its files (exit %d); git status there now:\n%s", wt, res.code, st)
	}

	// Undo: land on "other", then check it out; undo must not move it.
	id2 := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id2, "--", "sh", "-c", `printf 'two\n' > two.txt`).must(t)
	cs2 := decode[paddock.ChangeSet](t, cli(t, home, "submit", id2, "--json"))
	cli(t, home, "approve", id2, "--hash", cs2.Hash).must(t)
	cli(t, home, "queue", "add", id2, "--to", "other", "--wait=60s").must(t)
	gittest.Git(t, repo, "checkout", "-q", "other")
	landed := strings.TrimSpace(gittest.Git(t, repo, "rev-parse", "other"))
	cli(t, home, "queue", "undo", id2)
	if now := strings.TrimSpace(gittest.Git(t, repo, "rev-parse", "other")); now != landed {
		t.Errorf("queue undo moved branch other, checked out in the project's working tree, under its files; git status:\n%s", gittest.Git(t, repo, "status", "--porcelain"))
	}
}

// TestQueueAndApplyLandTwice: the queue checks that a run was
// not applied when its entry is added and when its turn comes, then runs
// the project's checks (as long as they take) and moves the branch
// without looking again. A `paddock apply` of the same run meanwhile
// succeeds, and then the queue lands it as well: one approval, applied
// twice (and the submission records only the last). One of the two must
// be refused.
func TestQueueAndApplyLandTwice(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, repo := reviewDaemon(t)
	gittest.Commit(t, repo, "a slow check", map[string]string{"Makefile": "test:\n\tsleep 4\n"})
	gittest.Git(t, repo, "branch", "release")
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf 'once\n' > once.txt`).must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
	cli(t, home, "queue", "add", id, "--to", "release").must(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		e := decode[paddock.QueueEntry](t, cli(t, home, "queue", "show", id, "--json"))
		if e.State == paddock.QueueTesting && e.TestRun != "" {
			break
		}
		if time.Now().After(deadline) || !strings.Contains("queued testing", e.State) {
			t.Fatalf("the entry never got to its check: %+v", e)
		}
		time.Sleep(50 * time.Millisecond)
	}
	applied := cli(t, home, "apply", id, "--to", "branch=direct")
	var final paddock.QueueEntry
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		final = decode[paddock.QueueEntry](t, cli(t, home, "queue", "show", id, "--json"))
		if final.State != paddock.QueueQueued && final.State != paddock.QueueTesting && final.State != paddock.QueueLanding {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the entry never finished: %+v", final)
		}
	}
	if applied.code == 0 && final.State == paddock.QueueLanded {
		t.Errorf("run %s was applied to branch direct and landed on release by the queue: one approval, two landings (release: %s)",
			id, strings.TrimSpace(gittest.Git(t, repo, "log", "--oneline", "-1", "release")))
	}
}

// TestQueueCheckRunsTheAgentsRecipe: `paddock verify` runs the
// manifest's checks with the base's recipes (a Makefile the agent edits
// is staged back), so an agent cannot make its own check pass. The
// queue's check runs in a read run made at the replayed commit, and reads
// the manifest and the recipes there: the change set's own Makefile. A
// run that breaks the check (touch broken) and rewrites the recipe
// (test: true) fails `paddock verify`, and lands through the queue, whose
// whole point is that a landing passed the branch's checks. The queue
// must check with the recipes of the branch's tip, as verify does with
// the base's.
func TestQueueCheckRunsTheAgentsRecipe(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, repo := reviewDaemon(t)
	gittest.Commit(t, repo, "a check", map[string]string{"Makefile": "test:\n\ttest ! -e broken\n"})
	gittest.Git(t, repo, "branch", "release")
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `touch broken && printf 'test:\n\ttrue\n' > Makefile`).must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	if v := cli(t, home, "verify", id); v.code == 0 {
		t.Fatalf("verify passed a run that breaks the check; the premise is gone:\n%s", v.out)
	}
	cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
	res := cli(t, home, "queue", "add", id, "--to", "release", "--wait=60s")
	if res.code == 0 {
		t.Errorf("the queue landed a run whose check fails with the branch's recipe: it ran the change set's own Makefile (release: %s)",
			gittest.Git(t, repo, "ls-tree", "--name-only", "release"))
	}
}

// TestQueueKilledDuringItsCheck: a daemon killed with -9 while a
// queue entry is being checked: the next one queues the entry again and
// lands it, once; the throwaway read run the cut check was made in is
// given back, not left as a live run holding a workspace.
func TestQueueKilledDuringItsCheck(t *testing.T) {
	t.Parallel() // its own daemon and state
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	os.MkdirAll(home, 0o700)
	os.WriteFile(filepath.Join(home, "paddock.toml"), []byte("apply_name = \"Ada\"\napply_email = \"ada@example.com\"\n"), 0o600)
	d := startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	gittest.Commit(t, repo, "a slow check", map[string]string{"Makefile": "test:\n\tsleep 3\n"})
	gittest.Git(t, repo, "branch", "release")
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf 'once\n' > once.txt`).must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
	cli(t, home, "queue", "add", id, "--to", "release").must(t)
	var cut string
	for deadline := time.Now().Add(30 * time.Second); cut == ""; time.Sleep(50 * time.Millisecond) {
		e := decode[paddock.QueueEntry](t, cli(t, home, "queue", "show", id, "--json"))
		if e.State == paddock.QueueTesting && e.TestRun != "" {
			cut = e.TestRun
		}
		if time.Now().After(deadline) {
			t.Fatalf("the entry never got to its check: %+v", e)
		}
	}
	time.Sleep(500 * time.Millisecond) // inside make test
	d.kill9()
	startDaemon(t, home)
	var final paddock.QueueEntry
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		final = decode[paddock.QueueEntry](t, cli(t, home, "queue", "show", id, "--json"))
		if final.State != paddock.QueueQueued && final.State != paddock.QueueTesting && final.State != paddock.QueueLanding {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the entry never finished after the restart: %+v", final)
		}
	}
	if final.State != paddock.QueueLanded {
		t.Fatalf("after the restart: %+v", final)
	}
	if n := strings.Count(gittest.Git(t, repo, "log", "--format=%s", "release"), "land run "+id); n != 1 {
		t.Errorf("release holds %d landings of %s", n, id)
	}
	if st := runState(t, home, cut).State(); st != paddock.StateRejected && st != paddock.StateCleaned && st != paddock.StateCleanupPending {
		t.Errorf("the queue's test run %s, cut by the kill, is left %s", cut, st)
	}
}

// TestQueueDirectoryMadeAFile: the run adds dir/f.txt; the branch
// has since made dir a file. The replay takes dir/f.txt as untouched by
// the branch (ls-tree finds nothing there, at the base or the tip),
// stages it beside the file dir, and git or the commit's check refuses:
// the entry comes back as "internal error", which tells the person
// nothing. It is a conflict in dir/f.txt (the file dir is in the way)
// and must say so, as the other conflicts do.
func TestQueueDirectoryMadeAFile(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, repo := reviewDaemon(t)
	gittest.Commit(t, repo, "a directory", map[string]string{"dir/e.txt": "e\n"})
	gittest.Git(t, repo, "branch", "release")
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf 'f\n' > dir/f.txt`).must(t)
	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
	wt := filepath.Join(t.TempDir(), "wt")
	gittest.Git(t, repo, "worktree", "add", "-q", wt, "release")
	gittest.Git(t, wt, "rm", "-q", "-r", "dir")
	os.WriteFile(filepath.Join(wt, "dir"), []byte("now a file\n"), 0o644)
	gittest.Git(t, wt, "add", "-A")
	gittest.Git(t, wt, "commit", "-q", "-m", "dir is a file now")
	gittest.Git(t, repo, "worktree", "remove", wt)
	res := cli(t, home, "queue", "add", id, "--to", "release", "--wait=60s")
	if res.code == 0 {
		t.Fatalf("landed: %s", gittest.Git(t, repo, "ls-tree", "-r", "--name-only", "release"))
	}
	e := decode[paddock.QueueEntry](t, cli(t, home, "queue", "show", id, "--json"))
	if e.State != paddock.QueueReturned || !strings.Contains(e.Reason, "dir") || strings.Contains(e.Reason, "internal") {
		t.Errorf("came back as %s, %q: not a conflict that names dir/f.txt", e.State, e.Reason)
	}
}
