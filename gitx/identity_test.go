package gitx_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestFingerprint: a fingerprint recognises its repository through the
// changes ordinary work makes, and refuses whatever else the path comes to
// hold.
func TestFingerprint(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	base := t.TempDir()
	repo := gittest.NewRepo(t, filepath.Join(base, "app"), map[string]string{"a.txt": "a\n"})
	gittest.Commit(t, repo, "second", map[string]string{"b.txt": "b\n"})
	inspect := func(path string) *gitx.Repo {
		t.Helper()
		r, err := g.Inspect(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	fp, err := g.Fingerprints().Fingerprint(ctx, inspect(repo))
	if err != nil {
		t.Fatal(err)
	}
	root := gittest.Git(t, repo, "rev-list", "--max-parents=0", "HEAD")
	if !strings.Contains(fp, root) {
		t.Fatalf("fingerprint %q does not name the root commit %s", fp, root)
	}
	check := func(path string, want bool, why string) {
		t.Helper()
		same, err := g.Fingerprints().CheckFingerprint(ctx, inspect(path), fp)
		if err != nil || same != want {
			t.Errorf("%s: CheckFingerprint = %t, %v; want %t", why, same, err, want)
		}
	}
	check(repo, true, "the same repository")

	// Ordinary work: new commits, a history rewritten down to a new
	// root on an orphan branch, an unrelated history merged in (a second
	// root). The first form of the fingerprint refused the last two.
	gittest.Commit(t, repo, "third", map[string]string{"c.txt": "c\n"})
	check(repo, true, "after a commit")
	gittest.Git(t, repo, "checkout", "--quiet", "--orphan", "fresh")
	gittest.Commit(t, repo, "a new root", nil)
	check(repo, true, "on an orphan branch")
	other := gittest.NewRepo(t, filepath.Join(base, "other"), map[string]string{"x": "y"})
	gittest.Git(t, repo, "checkout", "--quiet", "main")
	gittest.Git(t, repo, "pull", "--quiet", "--no-rebase", "--allow-unrelated-histories", "--no-edit", other, "main")
	check(repo, true, "with a second root merged in")

	// Another repository at the same path.
	if err := os.Rename(repo, repo+".old"); err != nil {
		t.Fatal(err)
	}
	gittest.NewRepo(t, repo, map[string]string{"a.txt": "a\n"})
	check(repo, false, "another repository with the same files")
	// The same history cloned again: another .git (the old one still
	// exists meanwhile, so its inode cannot be reused).
	os.RemoveAll(repo)
	gittest.Git(t, base, "clone", "--quiet", "--no-hardlinks", repo+".old", repo)
	check(repo, false, "a fresh clone of the same history")
	// The original, moved back: itself again.
	os.RemoveAll(repo)
	if err := os.Rename(repo+".old", repo); err != nil {
		t.Fatal(err)
	}
	check(repo, true, "the original moved back")
	// Its root commit gone (history rewritten and pruned) while .git stays.
	gittest.Git(t, repo, "checkout", "--quiet", "--orphan", "only")
	gittest.Commit(t, repo, "everything anew", nil)
	for _, b := range []string{"main", "fresh"} {
		gittest.Git(t, repo, "branch", "--quiet", "-D", b)
	}
	gittest.Git(t, repo, "reflog", "expire", "--expire=now", "--all")
	gittest.Git(t, repo, "gc", "--quiet", "--prune=now")
	check(repo, false, "its root commit pruned")

	// A malformed fingerprint is an error, not a verdict.
	if _, err := g.Fingerprints().CheckFingerprint(ctx, inspect(repo), "git-root:-x inode:1 dir:0"); err == nil {
		t.Error("a malformed fingerprint was checked")
	}
}

// TestLegacyFingerprint: a project declared with the first form of the
// fingerprint (every root commit and the path, hashed) is still recognised.
func TestLegacyFingerprint(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	repo := gittest.NewRepo(t, filepath.Join(t.TempDir(), "app"), map[string]string{"a.txt": "a\n"})
	r, err := g.Inspect(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	root := gittest.Git(t, repo, "rev-list", "--max-parents=0", "HEAD")
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s", root, r.CommonDir))
	legacy := hex.EncodeToString(h[:])[:32]
	if same, err := g.Fingerprints().CheckFingerprint(ctx, r, legacy); err != nil || !same {
		t.Fatalf("legacy fingerprint: %t, %v", same, err)
	}
	other := gittest.NewRepo(t, filepath.Join(t.TempDir(), "other"), map[string]string{"b": "b\n"})
	ro, _ := g.Inspect(ctx, other)
	if same, err := g.Fingerprints().CheckFingerprint(ctx, ro, legacy); err != nil || same {
		t.Fatalf("legacy fingerprint of another repository: %t, %v", same, err)
	}
}
