package lifecycle_test

import (
	"bytes"
	"context"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/lifecycle"
)

// TestTreeLookMatchesWalk: a clone's look after each command, told by the
// kernel what changed (inotify), finds what a walk of the whole tree
// finds, after commands that make, write, link, rename and remove files
// and directories, and after random edits.
func TestTreeLookMatchesWalk(t *testing.T) {
	t.Parallel()
	e := watchedEnv(t)
	ctx := context.Background()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for _, kind := range []paddock.WorkspaceKind{paddock.KindClone, paddock.KindWorktree} {
		r := e.create(t, kind, "on_reject")
		scripts := []string{
			"true", "true", // the first look walks the tree, the second watches it
			"mkdir -p n/a/b && echo 1 > n/a/b/f && echo 2 > n/top",
			"mv n m && echo 3 >> m/a/b/f",
			"echo 4 >> m/a/b/f && mkdir -p m/a/c/d/e && echo 5 > m/a/c/d/e/g",
			"echo a > own",
			"ln own hard && echo 6 >> hard", // own changes: no event names it
			"echo 7 >> hard",
			"rm hard && echo 8 >> own",
			"ln own hard && echo 16 >> hard && rm hard", // a link made and gone: no event names own
			"chmod +x cmd/main.go && touch -d @0 docs/ü.txt",
			// Out of the watched tree and back (a worktree's .git is a file).
			"if [ -d .git ]; then mv cmd .git/away; else mv cmd away; fi",
			"if [ -d .git/away ]; then mv .git/away cmd2; else mv away cmd2; fi && echo 9 >> cmd2/main.go",
			"rm -rf m && mkdir m && echo 10 > m/f",
			"mv m/f m/g && mv m n",
			"rm -rf n && echo 11 > n",
			"rm -f link && mkdir link && echo 12 > link/in",
			// Directories turned into links: nothing is read through them.
			"mv cmd2 c3 && ln -s c3 cmd2",
			"mkdir -p a/b && echo 13 > a/b/f",
			"mv a/b a/c && ln -s c a/b && echo 14 > a/c/f",
			"mkdir -p sub && ln -s sub l && echo 15 > l/f",
			"rm -rf l && ln -s sub l",
			// Written through a mapping, then closed: told at the close.
			`command -v python3 >/dev/null || exit 0; python3 -c "import mmap; f=open('own','r+b'); m=mmap.mmap(f.fileno(),0); m[0:1]=b'X'; m.flush(); m.close(); f.close()"`,
		}
		fixed := len(scripts)
		for i := 0; i < 6; i++ {
			scripts = append(scripts, editScript(rng))
		}
		for i, script := range scripts {
			res, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"bash", "-c", script}})
			if err != nil {
				t.Fatalf("%s, command %d: %v", kind, i, err)
			}
			if i < fixed && res.ExitCode != 0 {
				t.Fatalf("%s, command %d: %s: exit %d: %s", kind, i, script, res.ExitCode, res.Stderr)
			}
			journal, walked, _, err := lifecycle.TreeLook(ctx, e.m, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(journal, walked) {
				t.Fatalf("%s (seed %d), after command %d:\n%s\nthe journal says %v\na walk finds     %v", kind, seed, i, script, journal, walked)
			}
		}
		if _, _, told, _ := lifecycle.TreeLook(ctx, e.m, r.ID); told < len(scripts)/2 {
			t.Errorf("%s: the kernel told %d looks of %d: the rest walked", kind, told, len(scripts))
		}
	}
}

// TestSmallTreeWalked: a tree of fewer than watchFrom files is walked at
// each look, never watched (the daemon's inotify instance is for large
// trees), and its looks find what the walk does.
func TestSmallTreeWalked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	r := e.create(t, paddock.KindClone, "on_reject")
	for _, script := range []string{"true", "echo 1 >> README.md", "mkdir -p a && echo 2 > a/b"} {
		if _, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"bash", "-c", script}}); err != nil {
			t.Fatal(err)
		}
	}
	journal, walked, told, err := lifecycle.TreeLook(ctx, e.m, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if told != 0 || !maps.Equal(journal, walked) || len(walked) != 2 {
		t.Fatalf("told %d looks; the journal says %v, a walk finds %v", told, journal, walked)
	}
}

// lookAfter runs each script in run id and returns what its journal
// says and what a walk finds after the last.
func lookAfter(t *testing.T, e *env, id string, scripts ...string) (journal, walked map[string]string) {
	t.Helper()
	ctx := context.Background()
	for _, s := range scripts {
		if _, err := e.m.Broker.Exec(ctx, id, paddock.ExecRequest{Argv: []string{"bash", "-c", s}}); err != nil {
			t.Fatal(err)
		}
	}
	journal, walked, _, err := lifecycle.TreeLook(ctx, e.m, id)
	if err != nil {
		t.Fatal(err)
	}
	return journal, walked
}

// TestTreeLookReadsNoHostFile: a directory of the run turned into a link
// to a directory of the host (which the sandbox cannot see) leads the
// daemon's look nowhere: what was known below the directory is gone, and
// no host file is read into the run's journal or kept among its versions.
func TestTreeLookReadsNoHostFile(t *testing.T) {
	t.Parallel()
	e := watchedEnv(t)
	host := t.TempDir()
	secret := []byte("host-only " + time.Now().String() + "\n")
	os.WriteFile(filepath.Join(host, "secret"), secret, 0o644)
	for _, kind := range []paddock.WorkspaceKind{paddock.KindClone, paddock.KindOverlay} {
		r := e.create(t, kind, "on_reject")
		journal, walked := lookAfter(t, e, r.ID, "true", "true", "mkdir d && echo x > d/secret", "rm -rf d && ln -s "+host+" d")
		if _, ok := journal["d/secret"]; ok || !maps.Equal(journal, walked) && kind == paddock.KindClone {
			t.Errorf("%s: the journal says %v, a walk finds %v", kind, journal, walked)
		}
		versions, _ := filepath.Glob(filepath.Join(e.state, "*", r.ID, "provenance", "*"))
		for _, v := range versions {
			if b, _ := os.ReadFile(v); bytes.Equal(b, secret) {
				t.Errorf("%s: the host's file was kept as %s", kind, v)
			}
		}
	}
}

// TestTreeLookFailedIsWalkedNext: a look that fails after the kernel
// told it what changed (its journal could not be written) has the next
// look walk: what it was told is not told again.
func TestTreeLookFailedIsWalkedNext(t *testing.T) {
	t.Parallel()
	e := watchedEnv(t)
	r := e.create(t, paddock.KindClone, "on_reject")
	lookAfter(t, e, r.ID, "true", "true", "echo a > own")
	journals, _ := filepath.Glob(filepath.Join(e.state, "*", r.ID, "provenance.jsonl"))
	if len(journals) != 1 {
		t.Fatalf("journals: %v", journals)
	}
	j := journals[0]
	if err := os.Rename(j, j+".aside"); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(j, 0o700) // the journal cannot be appended to
	lookAfter(t, e, r.ID, "echo b >> own")
	os.Remove(j)
	os.Rename(j+".aside", j)
	if journal, walked := lookAfter(t, e, r.ID, "true"); !maps.Equal(journal, walked) {
		t.Errorf("the journal says %v, a walk finds %v", journal, walked)
	}
}

// watchedEnv is a test's env whose runs' trees are all watched (watchFrom 0).
func watchedEnv(t *testing.T) *env {
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	lifecycle.WatchTreesFrom(e.m, 0)
	return e
}

// TestTreeWatchedAgainOnceWatchesFree: a run whose tree could not be
// watched (the daemon's watches spent by another run's tree) walks after
// each command, and is watched again once the other run has given its
// watches back: its looks are told by the kernel again, and still find
// what a walk finds.
func TestTreeWatchedAgainOnceWatchesFree(t *testing.T) {
	t.Parallel()
	e := watchedEnv(t)
	// Room for one run's tree, not two: 35 watches each (its directories,
	// and the guards of the agents' configuration paths).
	lifecycle.WatchBudget(e.m, 40, time.Nanosecond)
	ctx := context.Background()
	dirs := "mkdir -p d1 d2 d3 && echo a > d1/f"
	a := e.create(t, paddock.KindClone, "on_reject")
	lookAfter(t, e, a.ID, dirs, "echo 1 >> d1/f", "echo 2 >> d2/g")
	if _, _, told, err := lifecycle.TreeLook(ctx, e.m, a.ID); err != nil || told == 0 {
		t.Fatalf("the first run's looks are not told by the kernel (%d told): %v", told, err)
	}
	b := e.create(t, paddock.KindClone, "on_reject")
	lookAfter(t, e, b.ID, dirs, "echo 1 >> d1/f", "echo 2 >> d2/g")
	if _, _, told, err := lifecycle.TreeLook(ctx, e.m, b.ID); err != nil || told != 0 {
		t.Fatalf("the second run's tree was watched beyond the budget (%d told): %v", told, err)
	}
	if _, err := e.m.Runs.Reject(ctx, a.ID); err != nil { // on_reject: cleaned up, its watches given back
		t.Fatal(err)
	}
	// The next walk watches the tree again; the look after it is told.
	journal, walked := lookAfter(t, e, b.ID, "echo 3 >> d3/h", "mv d2 d4 && echo 4 >> d4/g", "rm d1/f")
	_, _, told, err := lifecycle.TreeLook(ctx, e.m, b.ID)
	if err != nil || told == 0 {
		t.Fatalf("the second run is not watched once the first gave its watches back (%d told): %v", told, err)
	}
	if !maps.Equal(journal, walked) {
		t.Fatalf("the journal says %v, a walk finds %v", journal, walked)
	}
}
