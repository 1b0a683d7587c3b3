package gitx_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestDiffPathsAgreesWithTheWholeTree: DiffPaths given the paths an
// overlay's upper layer names (one file each, as many as changed) answers
// what DiffWorkTree does, with an index of the paths alone and with a
// whole index of base (what it uses for many paths), and whether base's
// files come from its checkout or from git: a file modified, deleted,
// created, rewritten unchanged, made a directory, a directory made a
// file, a mode and a link changed.
func TestDiffPathsAgreesWithTheWholeTree(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	dir := t.TempDir()
	work := gittest.NewRepo(t, filepath.Join(dir, "work"), map[string]string{
		"a.txt": "a\n", "b.txt": "b\n", "dir/c.txt": "c\n", "dir/d.txt": "d\n", "f": "f\n", "g/h.txt": "h\n", "exec.sh": "#!/bin/sh\n", "keep.txt": "keep\n",
	})
	if err := os.Symlink("a.txt", filepath.Join(work, "link")); err != nil {
		t.Fatal(err)
	}
	gittest.Commit(t, work, "link", nil)
	base := gittest.Git(t, work, "rev-parse", "HEAD")
	lower := filepath.Join(dir, "lower")
	gittest.Git(t, work, "worktree", "add", "--quiet", "--detach", lower, base)
	os.Remove(filepath.Join(lower, ".git")) // a checkout of base, as an overlay's lower layer is

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	w := func(p string) string { return filepath.Join(work, p) }
	must(os.WriteFile(w("a.txt"), []byte("a, changed\n"), 0o644))
	must(os.Remove(w("b.txt")))
	must(os.WriteFile(w("new.txt"), []byte("new\n"), 0o644))
	must(os.WriteFile(w("dir/c.txt"), []byte("c\n"), 0o644))
	must(os.Remove(w("f")))
	must(os.MkdirAll(w("f"), 0o755))
	must(os.WriteFile(w("f/inner.txt"), []byte("inner\n"), 0o644))
	must(os.RemoveAll(w("g")))
	must(os.WriteFile(w("g"), []byte("g is a file\n"), 0o644))
	must(os.Chmod(w("exec.sh"), 0o755))
	must(os.Remove(w("link")))
	must(os.Symlink("keep.txt", w("link")))
	paths := []string{"a.txt", "b.txt", "dir/c.txt", "exec.sh", "f", "g", "link", "new.txt"}

	gitDir := filepath.Join(work, ".git")
	want, err := g.DiffWorkTree(ctx, gitDir, work, base, gitx.DiffOptions{Cache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(want.Raw, []byte{0}) / 2; n != 9 { // a b new exec f f/inner g g/h link
		t.Fatalf("DiffWorkTree: %d entries:\n%q", n, want.Raw)
	}
	// DiffWorkTree itself, with an index of the changes alone (what it
	// uses for few) and with a whole index of base.
	whole, err := g.DiffWorkTreeWholeIndex(ctx, gitDir, work, base, gitx.DiffOptions{Cache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(whole.Raw, want.Raw) || !bytes.Equal(whole.Diff, want.Diff) {
		t.Errorf("DiffWorkTree with a whole index differs:\n%q\n---\n%q", whole.Raw, want.Raw)
	}
	for _, baseFiles := range []string{lower, ""} {
		for name, diff := range map[string]func(context.Context, string, string, string, []string, gitx.DiffOptions) (*gitx.Snapshot, error){
			"an index of the paths": g.DiffPaths, "a whole index": g.DiffPathsWholeIndex,
		} {
			got, err := diff(ctx, gitDir, work, base, paths, gitx.DiffOptions{Cache: t.TempDir(), BaseFiles: baseFiles})
			if err != nil {
				t.Fatalf("%s (base's files from %q): %v", name, baseFiles, err)
			}
			if !bytes.Equal(got.Raw, want.Raw) || !bytes.Equal(got.Diff, want.Diff) {
				t.Errorf("%s (base's files from %q) differs from DiffWorkTree:\n%q\n---\n%q\n%s", name, baseFiles, got.Raw, want.Raw, got.Diff)
			}
		}
	}
}

// TestDiffCheckSeesSizes: DiffOptions.Check is given the size of each
// file as the diff read it, by DiffWorkTree and DiffPaths alike: a file's
// length, a link's target's, nothing for a path it did not read (a file
// deleted).
func TestDiffCheckSeesSizes(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	work := gittest.NewRepo(t, filepath.Join(t.TempDir(), "work"), map[string]string{"a.txt": "a\n", "gone.txt": "gone\n"})
	base := gittest.Git(t, work, "rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(work, "a.txt"), []byte("twelve bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(work, "gone.txt"))
	if err := os.Symlink("a-target-of-21-bytes!", filepath.Join(work, "link")); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"a.txt": 12, "link": 21, "gone.txt": -1}
	called := 0
	check := func(name string) func([]byte, []gitx.Withheld, func(string) (int64, bool)) error {
		return func(raw []byte, _ []gitx.Withheld, size func(string) (int64, bool)) error {
			called++
			for p, w := range want {
				n, ok := size(p)
				if (w < 0 && ok) || (w >= 0 && (!ok || n != w)) {
					t.Errorf("%s: size(%s) = %d, %t; want %d", name, p, n, ok, w)
				}
			}
			return nil
		}
	}
	gitDir := filepath.Join(work, ".git")
	if _, err := g.DiffWorkTree(ctx, gitDir, work, base, gitx.DiffOptions{Check: check("DiffWorkTree")}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.DiffPaths(ctx, gitDir, work, base, []string{"a.txt", "gone.txt", "link"}, gitx.DiffOptions{Check: check("DiffPaths")}); err != nil {
		t.Fatal(err)
	}
	if called != 2 {
		t.Fatalf("Check called %d times, want once by each", called)
	}
}

// TestGrownAfterTheWalkIsChanged: a file that grows between the walk that
// weighed it (what DiffOptions.Check sees) and its hashing makes the diff
// a conflict (compute it again), never a blob bigger than what the limits
// weighed.
func TestGrownAfterTheWalkIsChanged(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	work := gittest.NewRepo(t, filepath.Join(t.TempDir(), "work"), map[string]string{"a.txt": "a\n"})
	base := gittest.Git(t, work, "rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(work, "a.txt"), []byte("small\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitx.SetTestHookBeforeHash(func(p string) {
		if p == "a.txt" {
			os.WriteFile(filepath.Join(work, "a.txt"), bytes.Repeat([]byte("big "), 1<<16), 0o644)
		}
	})
	defer gitx.SetTestHookBeforeHash(nil)
	checked := false
	_, err := g.DiffWorkTree(ctx, filepath.Join(work, ".git"), work, base, gitx.DiffOptions{Check: func([]byte, []gitx.Withheld, func(string) (int64, bool)) error {
		checked = true
		return nil
	}})
	if !paddock.IsCode(err, paddock.CodeConflict) || checked {
		t.Fatalf("a file grown after the walk: %v (checked: %t), want a conflict before any check", err, checked)
	}
}

// TestDiffPathsHolds: a directory is listed to find an embedded
// repository's or a .gitignore's names unless the caller says it cannot
// hold them (DiffOptions.Holds); then it is taken at its word, and one
// whose names it does not know is listed as always.
func TestDiffPathsHolds(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	work := gittest.NewRepo(t, filepath.Join(t.TempDir(), "work"), map[string]string{"a.txt": "a\n"})
	base := gittest.Git(t, work, "rev-parse", "HEAD")
	for p, body := range map[string]string{
		"repo/HEAD": "ref: refs/heads/main\n", "repo/config": "[core]\n", "repo/note.txt": "planted\n",
		"ign/.gitignore": "*.log\n", "ign/debug.log": "noise\n", "ign/keep.txt": "kept\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	paths := []string{"repo/HEAD", "repo/config", "repo/note.txt", "ign/.gitignore", "ign/debug.log", "ign/keep.txt"}
	diff := func(holds func(string) ([]string, bool)) (entries, withheld []string) {
		t.Helper()
		snap, err := g.DiffPaths(ctx, filepath.Join(work, ".git"), work, base, paths, gitx.DiffOptions{Holds: holds})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range strings.Split(string(snap.Raw), "\x00") {
			if rec != "" && !strings.HasPrefix(rec, ":") {
				entries = append(entries, rec)
			}
		}
		for _, w := range snap.Withheld {
			withheld = append(withheld, w.Path)
		}
		slices.Sort(entries)
		slices.Sort(withheld)
		return entries, withheld
	}
	// Listed: repo looks like a repository (withheld), ign's rules hold.
	listed := func(string) ([]string, bool) { return nil, false }
	wantEntries, wantWithheld := []string{"ign/.gitignore", "ign/keep.txt"}, []string{"repo/HEAD", "repo/config", "repo/note.txt"}
	for name, holds := range map[string]func(string) ([]string, bool){
		"no Holds": nil,
		"unknown":  listed,
		"the true names": func(dir string) ([]string, bool) {
			ns, err := os.ReadDir(filepath.Join(work, dir))
			if err != nil {
				return nil, false
			}
			var out []string
			for _, n := range ns {
				out = append(out, n.Name())
			}
			return out, true
		},
	} {
		if e, w := diff(holds); !slices.Equal(e, wantEntries) || !slices.Equal(w, wantWithheld) {
			t.Errorf("%s: entries %v withheld %v, want %v and %v", name, e, w, wantEntries, wantWithheld)
		}
	}
	// Said to hold nothing of the kind: not listed, so neither is found.
	e, w := diff(func(string) ([]string, bool) { return []string{"note.txt"}, true })
	if want := []string{"ign/.gitignore", "ign/debug.log", "ign/keep.txt", "repo/HEAD", "repo/config", "repo/note.txt"}; !slices.Equal(e, want) || len(w) != 0 {
		t.Errorf("taken at its word: entries %v withheld %v, want %v and none", e, w, want)
	}
}

// TestDiffPathsHoldsNotForWholeWalks: a directory walked whole (a path
// of the diff's that is a directory) is decided by the listing it walks,
// whatever Holds says of it: what Holds says was read before, and a
// command may have made the directory a repository's layout since.
func TestDiffPathsHoldsNotForWholeWalks(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	work := gittest.NewRepo(t, filepath.Join(t.TempDir(), "work"), map[string]string{"a.txt": "a\n"})
	base := gittest.Git(t, work, "rev-parse", "HEAD")
	for p, body := range map[string]string{"O/sub/a": "a\n", "O/sub/HEAD": "ref: refs/heads/main\n", "O/sub/config": "[core]\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// What the upper layer held when it was read: O/sub had a alone.
	stale := func(dir string) ([]string, bool) {
		switch dir {
		case "":
			return []string{"O", "a.txt"}, true
		case "O":
			return []string{"sub"}, true
		case "O/sub":
			return []string{"a"}, true
		}
		return nil, false
	}
	snap, err := g.DiffPaths(ctx, filepath.Join(work, ".git"), work, base, []string{"O"}, gitx.DiffOptions{Holds: stale})
	if err != nil {
		t.Fatal(err)
	}
	var withheld []string
	for _, w := range snap.Withheld {
		withheld = append(withheld, w.Path)
	}
	slices.Sort(withheld)
	if want := []string{"O/sub/HEAD", "O/sub/a", "O/sub/config"}; !slices.Equal(withheld, want) {
		t.Errorf("withheld %v, want %v: the layout found by the walk's own listing", withheld, want)
	}
}

// TestShortListingIsNotBase: a kept listing of base that a crash left
// short (the kept files are never synced) is not taken for base's whole:
// an index made of it would show the files it lacks deleted. It is
// listed again, and the diff holds the change alone.
func TestShortListingIsNotBase(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	dir := t.TempDir()
	work := gittest.NewRepo(t, filepath.Join(dir, "work"), map[string]string{"a.txt": "a\n", "b.txt": "b\n", "dir/c.txt": "c\n"})
	base := gittest.Git(t, work, "rev-parse", "HEAD")
	lower := filepath.Join(dir, "lower")
	gittest.Git(t, work, "worktree", "add", "--quiet", "--detach", lower, base)
	os.Remove(filepath.Join(lower, ".git"))
	if err := os.WriteFile(filepath.Join(work, "a.txt"), []byte("a, changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, short := range []string{"", "100644 blob " + strings.Repeat("0", 40) + "\ta.txt\x00"} {
		cache := t.TempDir()
		if err := os.WriteFile(filepath.Join(cache, "base-"+base+".tree"), []byte(short), 0o600); err != nil {
			t.Fatal(err)
		}
		gitx.ForgetBases()
		snap, err := g.DiffPathsWholeIndex(ctx, filepath.Join(work, ".git"), work, base, []string{"a.txt"}, gitx.DiffOptions{Cache: cache, BaseFiles: lower})
		if err != nil {
			t.Fatalf("short listing %q: %v", short, err)
		}
		if want := ":100644 100644 "; !strings.HasPrefix(string(snap.Raw), want) || strings.Count(string(snap.Raw), "\x00") != 2 || !strings.Contains(string(snap.Raw), "\x00a.txt\x00") {
			t.Errorf("short listing %q: the diff holds %q, want a.txt changed alone", short, snap.Raw)
		}
	}
}

// TestShortKeptIndexIsNotBase: a kept index of base a crash left short
// (never synced) is made again by git, not copied into a diff that git
// stages (a name only git judges): the diff is the one made before.
func TestShortKeptIndexIsNotBase(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	dir := t.TempDir()
	work := gittest.NewRepo(t, filepath.Join(dir, "work"), map[string]string{"a.txt": "a\n", "b.txt": "b\n", "dir/c.txt": "c\n", "z.txt": "z\n"})
	base := gittest.Git(t, work, "rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(work, "back\\slash"), []byte("n\n"), 0o644); err != nil { // git stages it
		t.Fatal(err)
	}
	cache := t.TempDir()
	first, err := g.DiffWorkTreeWholeIndex(ctx, filepath.Join(work, ".git"), work, base, gitx.DiffOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(cache, "base-"+base+".index")
	whole, err := os.ReadFile(kept)
	if err != nil {
		t.Fatalf("no kept index: %v", err)
	}
	for _, n := range []int{0, 100, len(whole) - 30} {
		if err := os.WriteFile(kept, whole[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		snap, err := g.DiffWorkTreeWholeIndex(ctx, filepath.Join(work, ".git"), work, base, gitx.DiffOptions{Cache: cache})
		if err != nil {
			t.Fatalf("kept index cut to %d of %d bytes: %v", n, len(whole), err)
		}
		if !bytes.Equal(snap.Raw, first.Raw) || !bytes.Equal(snap.Diff, first.Diff) {
			t.Errorf("kept index cut to %d: raw %q, want %q", n, snap.Raw, first.Raw)
		}
	}
}
