package gitx_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestUncommitted counts what a checkout holds beyond HEAD, renames once,
// ignored files never, and leaves the repository byte-identical (no index
// refresh).
func TestUncommitted(t *testing.T) {
	ctx := context.Background()
	g, err := gitx.New(ctx)
	if err != nil {
		t.Skipf("git unavailable: %v", err)
	}
	repo := gittest.NewRepo(t, t.TempDir(), map[string]string{"a.txt": "a\n", "b.txt": "b\n", ".gitignore": "build/\n"})
	if n, err := g.Uncommitted(ctx, repo); err != nil || n != 0 {
		t.Fatalf("clean checkout: %d, %v", n, err)
	}
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("changed\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "new.txt"), []byte("new\n"), 0o644)
	os.MkdirAll(filepath.Join(repo, "build"), 0o755)
	os.WriteFile(filepath.Join(repo, "build", "out"), []byte("ignored\n"), 0o644)
	gittest.Git(t, repo, "mv", "b.txt", "c.txt")
	before, lines := gittest.TreeDigest(t, repo)
	if n, err := g.Uncommitted(ctx, repo); err != nil || n != 3 {
		t.Fatalf("a modification, a rename and an untracked file: %d, %v", n, err)
	}
	gittest.RequireIdentical(t, repo, before, lines)
}
