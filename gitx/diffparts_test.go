package gitx_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestDiffPartsAreOneDiff: a diff of a whole index cut into parts, each
// rendered by a git of its own, is the one git renders in one, entries
// and patch byte for byte, for DiffWorkTree and DiffPaths alike; with
// files made directories and directories made files (which no cut may
// part), deletions, a binary file, a link, modes and names that sort
// around '/'.
func TestDiffPartsAreOneDiff(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	dir := t.TempDir()
	files := map[string]string{"f": "f\n", "g/h.txt": "h\n", "g/i.txt": "i\n", "a-b": "x\n", "a.b": "x\n", "a/b": "x\n", "bin.dat": "\x00\x01\x02old\n"}
	for i := range 60 {
		files[fmt.Sprintf("d%d/f%02d.txt", i%7, i)] = strings.Repeat(fmt.Sprintf("line %d\n", i), 5)
	}
	for i := range 20 { // files to be made directories, and back
		files[fmt.Sprintf("p%02d", i)] = "p\n"
		files[fmt.Sprintf("q%02d/r", i)] = "q\n"
	}
	work := gittest.NewRepo(t, filepath.Join(dir, "work"), files)
	if err := os.Symlink("f", filepath.Join(work, "link")); err != nil {
		t.Fatal(err)
	}
	gittest.Commit(t, work, "link", nil)
	base := gittest.Git(t, work, "rev-parse", "HEAD")
	w := func(p string) string { return filepath.Join(work, p) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var paths []string
	change := func(p string) { paths = append(paths, p) }
	for i := range 60 {
		p := fmt.Sprintf("d%d/f%02d.txt", i%7, i)
		switch i % 4 {
		case 0:
			must(os.WriteFile(w(p), []byte("changed\n"), 0o644))
		case 1:
			must(os.Remove(w(p)))
		case 2:
			must(os.Chmod(w(p), 0o755))
		}
		change(p)
	}
	for i := range 20 {
		p, q := fmt.Sprintf("p%02d", i), fmt.Sprintf("q%02d", i)
		must(os.Remove(w(p)))
		must(os.MkdirAll(w(p), 0o755))
		must(os.WriteFile(w(p+"/x"), []byte("x\n"), 0o644))
		must(os.RemoveAll(w(q)))
		must(os.WriteFile(w(q), []byte("q\n"), 0o644))
		change(p)
		change(q)
	}
	must(os.Remove(w("f"))) // a file made a directory
	must(os.MkdirAll(w("f/x"), 0o755))
	must(os.WriteFile(w("f/x/inner.txt"), []byte("inner\n"), 0o644))
	must(os.RemoveAll(w("g"))) // a directory made a file
	must(os.WriteFile(w("g"), []byte("g\n"), 0o644))
	must(os.WriteFile(w("a-b"), []byte("y\n"), 0o644))
	must(os.WriteFile(w("a/b"), []byte("y\n"), 0o644))
	must(os.WriteFile(w("a.b"), []byte("y\n"), 0o644))
	must(os.WriteFile(w("bin.dat"), []byte("\x00\x01\x02new\n"), 0o644))
	must(os.Remove(w("link")))
	must(os.Symlink("a-b", w("link")))
	must(os.WriteFile(w("z new.txt"), []byte("new\n"), 0o644))
	for _, p := range []string{"f", "g", "a-b", "a/b", "a.b", "bin.dat", "link", "z new.txt"} {
		change(p)
	}
	gitDir := filepath.Join(work, ".git")
	want, err := g.DiffWorkTreeWholeIndex(ctx, gitDir, work, base, gitx.DiffOptions{Cache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(want.Raw, []byte{0}) / 2; n != 136 {
		t.Fatalf("%d entries", n)
	}
	for _, n := range []int{2, 3, 4} {
		var cut atomic.Int64
		restore := gitx.CutDiffs(n, func(parts int) { cut.Store(int64(parts)) })
		for name, diff := range map[string]func() (*gitx.Snapshot, error){
			"DiffWorkTree": func() (*gitx.Snapshot, error) {
				return g.DiffWorkTreeWholeIndex(ctx, gitDir, work, base, gitx.DiffOptions{Cache: t.TempDir()})
			},
			"DiffPaths": func() (*gitx.Snapshot, error) {
				return g.DiffPathsWholeIndex(ctx, gitDir, work, base, paths, gitx.DiffOptions{Cache: t.TempDir()})
			},
		} {
			cut.Store(0)
			var patch bytes.Buffer
			got, err := diff()
			if err != nil {
				t.Fatalf("%s in %d parts: %v", name, n, err)
			}
			patch.Write(got.Diff)
			if cut.Load() < 2 {
				t.Fatalf("%s: cut into %d parts, want 2 to %d", name, cut.Load(), n)
			}
			if !bytes.Equal(got.Raw, want.Raw) || !bytes.Equal(patch.Bytes(), want.Diff) {
				t.Fatalf("%s in %d parts differs from one diff:\n%q\n---\n%q\n%s\n---\n%s", name, n, got.Raw, want.Raw, patch.Bytes(), want.Diff)
			}
		}
		restore()
	}
}

// TestCutParts: a cut never parts a path from a directory above it (a
// file made a directory, a directory made a file, staged apart, would
// leave one index holding both), keeps every entry once and each part's
// entries in their order (removals first), and parts in path order.
func TestCutParts(t *testing.T) {
	rec := func(mode, p string) string { return mode + " 0123456789012345678901234567890123456789\t" + p + "\x00" }
	var info strings.Builder
	// Removals first, as stageWorkTree gives them.
	for _, p := range []string{"a", "c/d/e", "m"} {
		info.WriteString(rec("0", p))
	}
	for _, p := range []string{"a/b", "a.txt", "b", "c/d", "c-x", "m/n/o", "m/p", "z"} {
		info.WriteString(rec("100644", p))
	}
	all := info.String()
	for n := 1; n <= 6; n++ {
		parts := gitx.CutParts([]byte(all), n)
		if len(parts) > n || len(parts) < 1 {
			t.Fatalf("%d parts for n=%d", len(parts), n)
		}
		var seen []string
		var last []string // each part's paths
		for i, part := range parts {
			var ps []string
			for _, r := range strings.Split(strings.TrimSuffix(string(part), "\x00"), "\x00") {
				_, p, _ := strings.Cut(r, "\t")
				ps = append(ps, p)
			}
			// A part is info with the other parts' entries taken out.
			for j := 1; j < len(ps); j++ {
				if strings.Index(all, "\t"+ps[j-1]+"\x00") > strings.Index(all, "\t"+ps[j]+"\x00") {
					t.Fatalf("part %d out of info's order: %q", i, ps)
				}
			}
			if i > 0 {
				for _, p := range ps {
					for _, q := range last {
						if p <= q {
							t.Fatalf("n=%d: %q in part %d sorts before %q of an earlier part", n, p, i, q)
						}
						if strings.HasPrefix(p, q+"/") {
							t.Fatalf("n=%d: %q parted from the directory %q above it", n, p, q)
						}
					}
				}
			}
			last = append(last, ps...)
			seen = append(seen, ps...)
		}
		slices.Sort(seen)
		if len(seen) != 11 || len(slices.Compact(seen)) != 11 {
			t.Fatalf("n=%d: entries %q", n, seen)
		}
		if n >= 3 && len(parts) < 2 {
			t.Fatalf("n=%d: not cut at all", n)
		}
	}
}

// TestDiffPartsKeepPathOrder: a part whose git reports a path it was not
// given (update-index replaces the file a with the directory a/b it is
// given below it, and git then reports a deleted) would put it out of
// the other parts' order; the parts' answer is then refused, never one
// in another order than git's. DiffPaths given a/b but not a, which
// lifecycle never does (an overlay names the directory made anew).
func TestDiffPartsKeepPathOrder(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	work := gittest.NewRepo(t, filepath.Join(t.TempDir(), "w"), map[string]string{"a": "a\n", "a-x": "x\n"})
	base := gittest.Git(t, work, "rev-parse", "HEAD")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Remove(filepath.Join(work, "a")))
	must(os.MkdirAll(filepath.Join(work, "a"), 0o755))
	must(os.WriteFile(filepath.Join(work, "a", "b"), []byte("b\n"), 0o644))
	must(os.WriteFile(filepath.Join(work, "a-x"), []byte("X\n"), 0o644))
	gitDir := filepath.Join(work, ".git")
	paths := []string{"a/b", "a-x"}
	one, err := g.DiffPathsWholeIndex(ctx, gitDir, work, base, paths, gitx.DiffOptions{Cache: t.TempDir()})
	must(err)
	defer gitx.CutDiffs(2, nil)()
	two, err := g.DiffPathsWholeIndex(ctx, gitDir, work, base, paths, gitx.DiffOptions{Cache: t.TempDir()})
	if err == nil && !bytes.Equal(two.Raw, one.Raw) {
		t.Fatalf("in parts, git's entries in another order:\n%q\none git:\n%q", two.Raw, one.Raw)
	}
}

// TestCutPartsCostsWhatSortingDoes: the cuts are found in about the time
// the paths are sorted in, however the paths are laid out: here a file a
// made a directory a/x with thousands of deep paths sorting between a and
// a/ (a-…), which block every cut from a to a/x, beside as many paths
// with no such block (a ratio of two timings in one run; the first
// version, which looked at every later path for each cut it tried, took
// minutes).
func TestCutPartsCostsWhatSortingDoes(t *testing.T) {
	rec := func(mode, p string) string { return mode + " 0123456789012345678901234567890123456789\t" + p + "\x00" }
	deep := strings.Repeat("d/", 60)
	var blocked, plain strings.Builder
	blocked.WriteString(rec("0", "a"))
	for i := range 6000 {
		blocked.WriteString(rec("100644", fmt.Sprintf("a-%05d/%sf", i, deep)))
		plain.WriteString(rec("100644", fmt.Sprintf("b-%05d/%sf", i, deep)))
	}
	blocked.WriteString(rec("100644", "a/x"))
	plain.WriteString(rec("100644", "c"))
	timed := func(info string) time.Duration {
		start := time.Now()
		for range 3 {
			gitx.CutParts([]byte(info), 4)
		}
		return time.Since(start)
	}
	timed(plain.String()) // warm
	p, b := timed(plain.String()), timed(blocked.String())
	if parts := gitx.CutParts([]byte(blocked.String()), 4); len(parts) > 2 {
		t.Fatalf("%d parts: a cut between a and a/x", len(parts))
	}
	if b > 20*p+50*time.Millisecond {
		t.Fatalf("cutting blocked paths took %v, %.0f× as long as as many plain ones (%v)", b, float64(b)/float64(p), p)
	}
	t.Logf("blocked %v, plain %v", b, p)
}
