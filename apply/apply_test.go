package apply

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// noStaged fails if a staged file of an apply or an undo is left in root.
func noStaged(t *testing.T, root string) {
	t.Helper()
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.Contains(fi.Name(), ".paddock-") {
			t.Fatalf("left %s", p)
		}
		return nil
	})
}

// TestNeverThroughALink: a link in the working tree on the way to a path
// the change set writes, there before the apply (refused, nothing written)
// or swapped in before the commit (rolled back, *Mismatch), is never
// written through, and the tree is left as it was.
func TestNeverThroughALink(t *testing.T) {
	t.Parallel()
	before := map[string]node{"README.md": {"100644", "hello\n"}, ".git/hooks/keep": {"100644", ""}}
	after := map[string]node{"README.md": {"100644", "approved\n"}, ".git/hooks/keep": {"100644", ""}, "ci-hooks/post-checkout": {"100755", "#!/bin/sh\n"}}
	for _, when := range []string{"before", "commit"} {
		t.Run(when, func(t *testing.T) {
			s := newSetup(t, before, after, nil)
			hooks := filepath.Join(s.root, ".git", "hooks")
			link := func() {
				if err := os.Symlink(".git/hooks", filepath.Join(s.root, "ci-hooks")); err != nil {
					t.Fatal(err)
				}
			}
			if when == "before" {
				link()
			}
			digest, lines := gittest.TreeDigest(t, s.root)
			s.a.Hook = func(point string) {
				if point == when {
					link()
				}
			}
			if when == "commit" {
				// What the tree is after the link came and the apply was
				// rolled back: the link, and the rest as before.
				link()
				digest, lines = gittest.TreeDigest(t, s.root)
				os.Remove(filepath.Join(s.root, "ci-hooks"))
			}
			_, err := s.a.Apply(t.Context(), s.c)
			var mm *Mismatch
			switch when {
			case "before":
				if !paddock.IsCode(err, paddock.CodeConflict) || !strings.Contains(err.Error(), "ci-hooks is a symbolic link") {
					t.Fatalf("apply: %v", err)
				}
				if _, err := os.Stat(s.a.journalPath(s.c.RunID)); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("a refused apply left its journal: %v", err)
				}
			case "commit":
				if !errors.As(err, &mm) || !strings.Contains(mm.Error(), "ci-hooks is a symbolic link") {
					t.Fatalf("apply: %v", err)
				}
			}
			if _, err := os.Lstat(filepath.Join(hooks, "post-checkout")); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("the apply wrote through the link")
			}
			noStaged(t, s.root)
			gittest.RequireIdentical(t, s.root, digest, lines)
			if _, err := s.a.Undo(s.c.RunID); !paddock.IsCode(err, paddock.CodeConflict) {
				t.Fatalf("undo of an apply that did not happen: %v", err)
			}
		})
	}
}

// TestMismatchRollsBack: a writer that changes a file between the commit
// and the verification makes the apply roll back to the tree as it was,
// and say which path did not hold what was approved.
func TestMismatchRollsBack(t *testing.T) {
	t.Parallel()
	before := map[string]node{"README.md": {"100644", "hello\n"}, "gone.txt": {"100644", "gone\n"}}
	after := map[string]node{"README.md": {"100644", "approved\n"}, "cmd/new.go": {"100644", "package main\n"}}
	s := newSetup(t, before, after, nil)
	digest, lines := gittest.TreeDigest(t, s.root)
	s.a.Hook = func(point string) {
		if point == "verify" {
			os.WriteFile(filepath.Join(s.root, "cmd", "new.go"), []byte("package evil\n"), 0o644)
		}
	}
	_, err := s.a.Apply(t.Context(), s.c)
	var mm *Mismatch
	if !errors.As(err, &mm) || len(mm.Bad) != 1 || !strings.HasPrefix(mm.Bad[0], "cmd/new.go holds blob") {
		t.Fatalf("apply: %v", err)
	}
	noStaged(t, s.root)
	gittest.RequireIdentical(t, s.root, digest, lines)
	if _, err := s.a.Undo(s.c.RunID); !paddock.IsCode(err, paddock.CodeConflict) {
		t.Fatalf("undo of a rolled back apply: %v", err)
	}
	s.a.Hook = nil
	if _, err := s.a.Apply(t.Context(), s.c); err != nil {
		t.Fatalf("nothing in the way any more: %v", err)
	}
}

// fakeGit is a base and a merge: what a 3-way apply asks of gitx.Git.
type fakeGit struct {
	base   []byte
	merged []byte
	err    error
}

func (g *fakeGit) FileAt(ctx context.Context, gitDir, rev, path string) ([]byte, error) {
	return g.base, nil
}

func (g *fakeGit) MergeFile(ctx context.Context, base, ours, theirs []byte) ([]byte, error) {
	if !bytes.Equal(base, g.base) {
		return nil, errors.New("not the base")
	}
	return g.merged, g.err
}

// TestThreeWay: a file the user changed since the base is refused, merged
// with ThreeWay, refused again if the merge fails; undo gives back the
// user's version.
func TestThreeWay(t *testing.T) {
	t.Parallel()
	base := "one\ntwo\n"
	user := "ONE\ntwo\n"
	before := map[string]node{"notes.txt": {"100644", base}}
	after := map[string]node{"notes.txt": {"100644", "one\nTWO\n"}}
	s := newSetup(t, before, after, nil)
	os.WriteFile(filepath.Join(s.root, "notes.txt"), []byte(user), 0o644)
	g := &fakeGit{base: []byte(base), merged: []byte("ONE\nTWO\n")}
	s.a.Git = g

	if _, err := s.a.Apply(t.Context(), s.c); !paddock.IsCode(err, paddock.CodeConflict) || !strings.Contains(err.Error(), "notes.txt changed since the base") {
		t.Fatalf("without ThreeWay: %v", err)
	}
	s.c.ThreeWay = true
	g.err = errors.New("conflict")
	if _, err := s.a.Apply(t.Context(), s.c); !paddock.IsCode(err, paddock.CodeConflict) || !strings.Contains(err.Error(), "changed in the same lines") {
		t.Fatalf("a merge that fails: %v", err)
	}
	g.err = nil
	done, err := s.a.Apply(t.Context(), s.c)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(s.root, "notes.txt")); string(b) != "ONE\nTWO\n" || len(done.Merged) != 1 || done.Merged[0] != "notes.txt" {
		t.Fatalf("merged %q, %+v", b, done)
	}
	if _, err := s.a.Undo(s.c.RunID); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(s.root, "notes.txt")); string(b) != user {
		t.Fatalf("undo gave back %q", b)
	}
}

// TestNeverAppliedFromContent: whatever the labels say, a path under .git
// and a link into .git are never applied, judged from the frozen content;
// a link whose frozen target is not its blob is refused too.
func TestNeverAppliedFromContent(t *testing.T) {
	t.Parallel()
	after := map[string]node{"ok.txt": {"100644", "ok\n"}, "ci-hooks": {"120000", ".git/hooks"}, "fine": {"120000", "ok.txt"}}
	s := newSetup(t, nil, after, nil)
	cs := &paddock.ChangeSet{Entries: append(s.c.Entries,
		paddock.ChangeEntry{Path: ".git/config", Op: paddock.OpCreate, NewMode: "100644", NewBlob: blobOf("ok\n")},
		paddock.ChangeEntry{Path: "lost", Op: paddock.OpCreate, NewMode: "120000", NewBlob: blobOf("not kept")},
	)}
	got := s.a.NeverApplied(s.c.RunID, cs, confine.DefaultPolicy())
	if len(got) != 3 || !strings.HasPrefix(got[0], "ci-hooks: ") || !strings.HasPrefix(got[1], ".git/config: ") || got[2] != "lost: the link's frozen target cannot be read" {
		t.Fatalf("never applied: %q", got)
	}
}
