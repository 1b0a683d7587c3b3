package changeset_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestRevTreeAgainstCheckout: a revision's names and files read from git
// (gitx.RevTree) are what a checkout of it holds (DirTree reads one), for the
// top, nested directories asked for together, a directory that is a file
// or missing, names that differ only in case or normalisation, and a link.
func TestRevTreeAgainstCheckout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, err := gitx.New(ctx)
	if err != nil {
		t.Skipf("git unavailable: %v", err)
	}
	repo := gittest.NewRepo(t, filepath.Join(t.TempDir(), "repo"), map[string]string{
		"README.md": "a\n", "readme.md": "b\n", "caf\u00e9.txt": "c\n", "cafe\u0301.txt": "d\n",
		"a/D": "x\n", "a/b/c": "y\n", "a/b/e/f": "z\n", ".envrc": "source a/D\n", "-x:y/.envrc": "dotenv\n",
	})
	if err := os.Symlink("a", filepath.Join(repo, "link")); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, repo, "add", "link")
	gittest.Git(t, repo, "commit", "-qm", "link")
	rev := gittest.Git(t, repo, "rev-parse", "HEAD")
	checkout := filepath.Join(t.TempDir(), "checkout")
	if err := os.MkdirAll(checkout, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := g.ExportTree(ctx, filepath.Join(repo, ".git"), rev, checkout); err != nil {
		t.Fatal(err)
	}
	trees := map[string]changeset.Tree{"git": g.Tree(ctx, filepath.Join(repo, ".git"), rev), "checkout": changeset.DirTree(checkout),
		"snapshot": changeset.SnapshotTree(checkout)}
	dirs := []string{"", "a", "a/b", "a/b/e", "README.md", "missing", "link", "a/missing"}
	want := map[string][]string{
		"":      {"-x:y", ".envrc", "README.md", "a", "caf\u00e9.txt", "cafe\u0301.txt", "link", "readme.md"},
		"a":     {"D", "b"},
		"a/b":   {"c", "e"},
		"a/b/e": {"f"},
	}
	for _, ns := range want {
		slices.Sort(ns)
	}
	// One directory first: the rounds below find it kept and the
	// directories below it not (a listing of a/b/ must add nothing to a).
	if _, err := trees["git"].Names([]string{"a"}); err != nil {
		t.Fatal(err)
	}
	for name, tree := range trees {
		// Twice, the second in another order and with a directory more:
		// git's answers for a commit are kept (gitx's namesMemo), and
		// what the first caller does to its answer changes nothing kept.
		for round, ask := range [][]string{dirs, append(slices.Clone(dirs[3:]), "a/b/e/f", "", "a", "a/b")} {
			got, err := tree.Names(ask)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, ns := range got {
				slices.Sort(ns)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s, round %d: names %v, want %v", name, round, got, want)
			}
			for _, ns := range got {
				clear(ns)
			}
		}
		if b, err := tree.File(".envrc"); err != nil || string(b) != "source a/D\n" {
			t.Errorf("%s: .envrc %q %v", name, b, err)
		}
		if b, err := tree.File("-x:y/.envrc"); err != nil || string(b) != "dotenv\n" {
			t.Errorf("%s: -x:y/.envrc %q %v", name, b, err)
		}
		for _, p := range []string{"missing", "a/missing", "link/D", "a", "link"} {
			if b, err := tree.File(p); err == nil {
				t.Errorf("%s: %s read as %q", name, p, b)
			} else if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: %s: %v, want it not to exist", name, p, err)
			}
		}
	}
}

// TestSnapshotTreeKeepsNames: a snapshot's names are read once and kept
// (what a change set asks for again is not read again), a directory it
// lacks stays lacking, and DirTree, which reads the project's own work
// tree, keeps nothing.
func TestSnapshotTreeKeepsNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, p := range []string{"a/x", "a/y", "b/z"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	snap, live := changeset.SnapshotTree(dir), changeset.DirTree(dir)
	ask := []string{"a", "b", "empty", "missing"}
	first, err := snap.Names(ask)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"a": {"x", "y"}, "b": {"z"}, "empty": {}}
	if !reflect.DeepEqual(sortedNames(first), want) {
		t.Fatalf("names %v, want %v", first, want)
	}
	// The directory changes under it (a snapshot never does): the names
	// kept are answered, which shows they were not read again.
	if err := os.WriteFile(filepath.Join(dir, "a", "new"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "missing"), 0o755); err != nil {
		t.Fatal(err)
	}
	again, err := snap.Names(append(ask, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sortedNames(again), want) {
		t.Errorf("asked again: %v, want what was kept: %v", again, want)
	}
	now, err := live.Names(ask)
	if err != nil {
		t.Fatal(err)
	}
	if got := sortedNames(now); !slices.Contains(got["a"], "new") || got["missing"] == nil {
		t.Errorf("DirTree kept what it read: %v", got)
	}
}

func sortedNames(m map[string][]string) map[string][]string {
	for _, ns := range m {
		slices.Sort(ns)
	}
	return m
}

// TestSnapshotTreeBounded: the names kept are bounded; a call that asks
// for more directories than the bound keeps none of them, and one that
// would overflow what is kept starts again. (Not parallel: it empties what
// SnapshotTree keeps, which TestSnapshotTreeKeepsNames relies on.)
func TestSnapshotTreeBounded(t *testing.T) {
	defer changeset.KeepSnapshotDirs(4)()
	dir := t.TempDir()
	var all []string
	for i := range 6 {
		d := string(rune('a' + i))
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		all = append(all, d)
	}
	snap := changeset.SnapshotTree(dir)
	if got, err := snap.Names(all); err != nil || len(got) != 6 {
		t.Fatalf("names of six directories: %v %v", got, err)
	}
	if n := changeset.SnapshotDirsKept(); n != 0 {
		t.Errorf("six directories asked for at once, over a bound of 4: %d kept, want none", n)
	}
	if _, err := snap.Names(all[:3]); err != nil {
		t.Fatal(err)
	}
	if n := changeset.SnapshotDirsKept(); n != 3 {
		t.Errorf("three directories asked for: %d kept, want 3", n)
	}
	if _, err := snap.Names(all[3:5]); err != nil {
		t.Fatal(err)
	}
	if n := changeset.SnapshotDirsKept(); n != 2 {
		t.Errorf("three kept, then two more than the bound holds: %d kept, want 2 (started again)", n)
	}
}
