package fsat_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/paddock-dev/paddock/internal/fsat"
	"golang.org/x/sys/unix"
)

// TestStackFollowsNoLink: a directory reached through the stack is the
// tree's own; a link on the way, or a file where a directory is asked
// for, is not there; Names and Empty read a kept descriptor from its
// start, and it stays open for the next name.
func TestStackFollowsNoLink(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	for _, d := range []string{"a/b", "a/empty", "c"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "a/b/f"), []byte("f"), 0o644)
	os.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "a/out"))
	os.Symlink("b", filepath.Join(dir, "a/alias"))
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(root)
	var s fsat.Stack
	defer s.Close()
	for _, rel := range []string{"a/out", "a/alias", "file", "a/b/f", "nowhere"} {
		if _, err := s.Open(root, rel); !fsat.NotThere(err) {
			t.Errorf("Open(%q): %v, want not there", rel, err)
		}
	}
	fd, err := s.Open(root, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the second reads from the start again
		if ns, err := fsat.Names(fd); err != nil || !slices.Equal(ns, []string{"f"}) {
			t.Fatalf("Names(a/b): %v %v", ns, err)
		}
	}
	if fsat.Empty(fd) {
		t.Error("a/b is not empty")
	}
	if fd, err = s.Open(root, "a/empty"); err != nil || !fsat.Empty(fd) {
		t.Errorf("a/empty: %v", err)
	}
	if fd, name, err := s.Parent(root, "a/b/f"); err != nil || name != "f" || unix.Faccessat(fd, name, unix.R_OK, 0) != nil {
		t.Errorf("Parent(a/b/f): %q %v", name, err)
	}
	if fd, name, err := s.Parent(root, "file"); err != nil || name != "file" || fd != root {
		t.Errorf("Parent(file): %d %q %v, want the root", fd, name, err)
	}
	if _, _, err := s.Parent(root, "a/out/secret"); !fsat.NotThere(err) {
		t.Errorf("Parent(a/out/secret) through a link: %v", err)
	}
	if fd, err := fsat.OpenAt(root, "file", false); err != nil {
		t.Error(err)
	} else {
		unix.Close(fd)
	}
}

// TestWalkStats: every entry that is not a directory, below the top and
// below no skipped directory, once, with its own lstat data (a link's,
// not its target's), whatever the number of goroutines; a link to a
// directory is not followed.
func TestWalkStats(t *testing.T) {
	dir := t.TempDir()
	want := map[string]bool{}
	for i := range 300 {
		p := fmt.Sprintf("d%d/e%d/f%d.txt", i%7, i%13, i)
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		want[p] = true
	}
	os.MkdirAll(filepath.Join(dir, "skipped/deep"), 0o755)
	os.WriteFile(filepath.Join(dir, "skipped/deep/x"), nil, 0o644)
	os.Symlink("d1", filepath.Join(dir, "link"))
	want["link"] = true
	root, err := fsat.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(root)
	defer func(n int) { fsat.Walkers = n }(fsat.Walkers)
	for _, workers := range []int{1, 4} {
		fsat.Walkers = workers
		got, err := fsat.WalkStats(root, func(rel string) bool { return rel == "skipped" })
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, e := range got {
			if seen[e.Rel] || !want[e.Rel] {
				t.Fatalf("%d workers: %s twice, or not wanted", workers, e.Rel)
			}
			seen[e.Rel] = true
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(dir, e.Rel), &st); err != nil || st.Ino != e.St.Ino || st.Mode != e.St.Mode {
				t.Fatalf("%d workers: %s: %+v, lstat %+v (%v)", workers, e.Rel, e.St, st, err)
			}
		}
		if len(seen) != len(want) {
			t.Fatalf("%d workers: %d entries, want %d", workers, len(seen), len(want))
		}
	}
}
