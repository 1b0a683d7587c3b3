package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestRedteam3QueueBranchChangedUnderTheRun: what the branch did to a
// file the run changes since the run's base (deleted it, made it a link,
// renamed it, changed its mode, made its directory a file) never lands
// silently: each comes back (held).
func TestRedteam3QueueBranchChangedUnderTheRun(t *testing.T) {
	home, repo := reviewDaemon(t)
	gittest.Commit(t, repo, "files", map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n", "d.txt": "d\n", "dir/e.txt": "e\n"})
	gittest.Git(t, repo, "branch", "release")
	approved := func(script string) string {
		id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
		cli(t, home, "exec", id, "--", "sh", "-c", script).must(t)
		cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
		cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
		return id
	}
	runs := map[string]string{
		"deleted":    approved(`printf 'a2\n' > a.txt`),
		"link":       approved(`printf 'b2\n' > b.txt`),
		"renamed":    approved(`printf 'c2\n' > c.txt`),
		"mode":       approved(`printf 'd2\n' > d.txt`),
		"dir a file": approved(`printf 'f\n' > dir/f.txt`),
	}
	wt := filepath.Join(t.TempDir(), "wt")
	gittest.Git(t, repo, "worktree", "add", "-q", wt, "release")
	gittest.Git(t, wt, "rm", "-q", "a.txt")
	os.Remove(filepath.Join(wt, "b.txt"))
	os.Symlink("/etc/passwd", filepath.Join(wt, "b.txt"))
	gittest.Git(t, wt, "mv", "c.txt", "c2.txt")
	os.Chmod(filepath.Join(wt, "d.txt"), 0o755)
	gittest.Git(t, wt, "rm", "-q", "-r", "dir")
	os.WriteFile(filepath.Join(wt, "dir"), []byte("now a file\n"), 0o644)
	gittest.Git(t, wt, "add", "-A")
	gittest.Git(t, wt, "commit", "-q", "-m", "the branch's own changes")
	gittest.Git(t, repo, "worktree", "remove", wt)
	tip := strings.TrimSpace(gittest.Git(t, repo, "rev-parse", "release"))
	for what, id := range runs {
		res := cli(t, home, "queue", "add", id, "--to", "release", "--wait=60s")
		t.Logf("%s: exit %d %s", what, res.code, strings.TrimSpace(res.err))
		if now := strings.TrimSpace(gittest.Git(t, repo, "rev-parse", "release")); now != tip {
			t.Errorf("%s: landed silently (%s)", what, gittest.Git(t, repo, "show", "--stat", "release"))
			tip = now
		}
	}
}
