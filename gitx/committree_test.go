package gitx_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestCommitToBranchTypeChanges: every type change a change set carries
// commits as given, and a set of entries that git's index would take only
// by dropping a path the set does not name (a file under a file, a file
// under a link) makes no branch.
func TestCommitToBranchTypeChanges(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	repo := gittest.NewRepo(t, t.TempDir(), map[string]string{"f.txt": "f\n", "d/x.txt": "x\n", "keep.txt": "k\n"})
	os.Symlink("keep.txt", filepath.Join(repo, "lnk"))
	gittest.Commit(t, repo, "link", nil)
	base := gittest.Git(t, repo, "rev-parse", "HEAD")
	gitDir := filepath.Join(repo, ".git")
	blob := func(content string) (string, string) {
		p := filepath.Join(t.TempDir(), "blob")
		os.WriteFile(p, []byte(content), 0o644)
		return gittest.Git(t, repo, "hash-object", p), p
	}
	who := gitx.Identity{Name: "A", Email: "a@example.com"}
	inner, innerFile := blob("inner\n")
	target, targetFile := blob("f.txt")
	ok := []gitx.IndexEntry{
		{Path: "f.txt"}, {Path: "f.txt/inner.txt", Mode: "100644", Blob: inner, File: innerFile}, // file → directory
		{Path: "d/x.txt"}, {Path: "d", Mode: "120000", Blob: target, File: targetFile}, // directory → link
		{Path: "lnk"}, {Path: "lnk/inner.txt", Mode: "100755", Blob: inner, File: innerFile}, // link → directory
	}
	commit, err := g.CommitToBranch(ctx, gitDir, base, ok, "types", who, "types\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, repo, "ls-tree", "-r", commit); !strings.Contains(got, "100644 blob "+inner+"\tf.txt/inner.txt") ||
		!strings.Contains(got, "120000 blob "+target+"\td") || !strings.Contains(got, "100755 blob "+inner+"\tlnk/inner.txt") {
		t.Fatalf("tree:\n%s", got)
	}
	for name, entries := range map[string][]gitx.IndexEntry{
		"a file under a file":     {{Path: "keep.txt/x", Mode: "100644", Blob: inner, File: innerFile}},
		"a file under a link":     {{Path: "lnk/x", Mode: "100644", Blob: inner, File: innerFile}},
		"a file over a directory": {{Path: "d", Mode: "100644", Blob: inner, File: innerFile}},
	} {
		_, err := g.CommitToBranch(ctx, gitDir, base, entries, "bad", who, "bad\n")
		var te *gitx.TreeMismatchError
		if !errors.As(err, &te) {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(gitDir, "refs", "heads", "bad")); err == nil {
			t.Fatalf("%s: the branch was made", name)
		}
		t.Logf("%s: %v", name, err)
	}
}

// TestCommitTreeInto: a commit made into paddock's own object directory
// writes nothing into the project's repository (its objects, refs, index
// and files are byte-identical after), and is read only with WithObjects.
func TestCommitTreeInto(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	repo := gittest.NewRepo(t, t.TempDir(), map[string]string{"f.txt": "f\n"})
	base := gittest.Git(t, repo, "rev-parse", "HEAD")
	gitDir := filepath.Join(repo, ".git")
	digest, lines := gittest.TreeDigest(t, repo)
	content := filepath.Join(t.TempDir(), "new")
	os.WriteFile(content, []byte("unapproved secret\n"), 0o644)
	blob := strings.TrimSpace(gittest.Git(t, repo, "hash-object", content)) // not -w: nothing written
	store := filepath.Join(t.TempDir(), "objects")
	commit, err := g.CommitTreeInto(ctx, gitDir, store, base, []gitx.IndexEntry{{Path: "new.txt", Mode: "100644", Blob: blob, File: content}},
		gitx.Identity{Name: "R", Email: "r@example.com"}, "review\n")
	if err != nil {
		t.Fatal(err)
	}
	gittest.RequireIdentical(t, repo, digest, lines)
	if _, err := g.FileAt(ctx, gitDir, commit, "new.txt"); err == nil {
		t.Fatal("the review commit is readable from the project's own store")
	}
	b, err := g.FileAt(gitx.WithObjects(ctx, store), gitDir, commit, "new.txt")
	if err != nil || string(b) != "unapproved secret\n" {
		t.Fatalf("read through the store: %q %v", b, err)
	}
	if _, err := g.CommitTreeInto(ctx, gitDir, "relative/objects", base, nil, gitx.Identity{Name: "R", Email: "r@example.com"}, "x\n"); err == nil {
		t.Fatal("a relative object directory was taken")
	}
}

// TestCommitTreeWritesEveryObject: a commit into a repository's own store
// writes every object it names there, even under WithObjects of a store
// that holds them already (git would otherwise skip them, and the
// repository would name objects it lacks once that store is gone).
func TestCommitTreeWritesEveryObject(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	repo := gittest.NewRepo(t, t.TempDir(), map[string]string{"f.txt": "f\n"})
	base := gittest.Git(t, repo, "rev-parse", "HEAD")
	gitDir := filepath.Join(repo, ".git")
	content := filepath.Join(t.TempDir(), "new")
	os.WriteFile(content, []byte("landed\n"), 0o644)
	blob := strings.TrimSpace(gittest.Git(t, repo, "hash-object", content))
	who := gitx.Identity{Name: "Q", Email: "q@example.com", When: time.Unix(1700000000, 0)}
	entries := []gitx.IndexEntry{{Path: "new.txt", Mode: "100644", Blob: blob, File: content}}
	store := filepath.Join(t.TempDir(), "objects")
	trial, err := g.CommitTreeInto(ctx, gitDir, store, base, entries, who, "land\n")
	if err != nil {
		t.Fatal(err)
	}
	landed, err := g.CommitTree(gitx.WithObjects(ctx, store), gitDir, base, entries, who, "land\n")
	if err != nil || landed != trial {
		t.Fatalf("the landed commit %s, the trial %s: %v", landed, trial, err)
	}
	os.RemoveAll(store)
	if out := gittest.Git(t, repo, "cat-file", "-p", landed+":new.txt"); out != "landed" {
		t.Fatalf("the landed commit's file: %q", out)
	}
}
