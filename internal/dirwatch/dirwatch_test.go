package dirwatch

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// watchAll adds every directory below dir (at under in the tree) to t, as
// a caller's walk does.
func watchAll(t *testing.T, tr *Tree, dir, under string) {
	t.Helper()
	if err := addAll(tr, dir, under); err != nil {
		t.Fatal(err)
	}
}

// addAll is watchAll that returns the first error.
func addAll(tr *Tree, dir, under string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		rel, _ := filepath.Rel(dir, p)
		if rel = path.Join(under, filepath.ToSlash(rel)); rel == "." {
			rel = "" // the top
		}
		return tr.Add(fd, rel)
	})
}

func newWatcher(t *testing.T, budget int) *Watcher {
	t.Helper()
	w, err := NewWatcher(budget)
	if err != nil {
		t.Skipf("no inotify here: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func changes(t *testing.T, tr *Tree) Changes {
	t.Helper()
	ch, err := tr.Changes()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ch.Names)
	slices.Sort(ch.Trees)
	return ch
}

func TestChangesNameWhatChanged(t *testing.T) {
	w := newWatcher(t, 1000)
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		os.MkdirAll(filepath.Join(d, "x/y"), 0o755)
		os.WriteFile(filepath.Join(d, "x/y/f"), []byte("1"), 0o644)
		os.WriteFile(filepath.Join(d, ".git"), []byte("gitdir"), 0o644)
	}
	ta := w.Tree(func(rel string) bool { return rel == ".git" })
	tb := w.Tree(nil)
	watchAll(t, ta, a, "")
	watchAll(t, tb, b, "")
	if ch := changes(t, ta); len(ch.Names)+len(ch.Trees) != 0 || ch.All {
		t.Fatalf("nothing changed yet: %+v", ch)
	}

	os.WriteFile(filepath.Join(a, "x/y/f"), []byte("2"), 0o644)
	os.WriteFile(filepath.Join(a, ".git"), []byte("skipped"), 0o644)
	os.Chmod(filepath.Join(b, "x/y/f"), 0o755)
	if ch := changes(t, ta); !slices.Equal(ch.Names, []string{"x/y/f"}) || len(ch.Trees) != 0 {
		t.Fatalf("a: %+v", ch)
	}
	// b's event was read with a's, and kept for b.
	if ch := changes(t, tb); !slices.Equal(ch.Names, []string{"x/y/f"}) {
		t.Fatalf("b: %+v", ch)
	}

	// A directory renamed: both names are trees, and its old watches go
	// (a write in it is not reported under the old name).
	os.Rename(filepath.Join(a, "x"), filepath.Join(a, "z"))
	os.WriteFile(filepath.Join(a, "z/y/f"), []byte("3"), 0o644)
	ch := changes(t, ta)
	if !slices.Equal(ch.Trees, []string{"x", "z"}) || slices.Contains(ch.Names, "x/y/f") {
		t.Fatalf("rename: %+v", ch)
	}
	if n := ta.Watched(); n != 1 {
		t.Fatalf("%d watched after the rename, want the top only (the caller walks z again)", n)
	}
	watchAll(t, ta, filepath.Join(a, "z"), "z") // as the caller's walk of the tree z does
	os.WriteFile(filepath.Join(a, "z/y/f"), []byte("4"), 0o644)
	if ch := changes(t, ta); !slices.Equal(ch.Names, []string{"z/y/f"}) {
		t.Fatalf("after re-watching: %+v", ch)
	}

	// A file made and removed between two looks: perhaps a link,
	// written through; the tree is to be walked. A file removed that
	// was there before is not that.
	os.WriteFile(filepath.Join(a, "tmp"), nil, 0o644)
	os.Remove(filepath.Join(a, "tmp"))
	if ch := changes(t, ta); !ch.Transient {
		t.Fatalf("made and removed: %+v", ch)
	}
	os.Remove(filepath.Join(a, "z/y/f"))
	if ch := changes(t, ta); ch.Transient || !slices.Equal(ch.Names, []string{"z/y/f"}) {
		t.Fatalf("removed: %+v", ch)
	}

	// A directory another tree watches stays the other's.
	fd, err := unix.Open(filepath.Join(a, "z"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	other := w.Tree(nil)
	if err := other.Add(fd, ""); !errors.Is(err, ErrShared) {
		t.Fatalf("a directory of another tree's: %v", err)
	}
	unix.Close(fd)
	other.Close()
	os.WriteFile(filepath.Join(a, "z/g"), nil, 0o644)
	if ch := changes(t, ta); !slices.Contains(ch.Names, "z/g") {
		t.Fatalf("after another tree's refused watch: %+v", ch)
	}

	// The top itself removed: the whole tree is to be walked.
	os.RemoveAll(b)
	if ch := changes(t, tb); !ch.All {
		t.Fatalf("top removed: %+v", ch)
	}
	tb.Close()
	if _, err := tb.Changes(); err == nil {
		t.Fatal("a closed tree still answers")
	}
}

func TestOverflowAsksForAWalk(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Skip(err)
	}
	var queue int
	fmt.Sscan(string(b), &queue)
	if queue > 1<<16 {
		t.Skipf("the kernel queues %d events: too many to overflow in a test", queue)
	}
	w := newWatcher(t, 1000)
	d := t.TempDir()
	tr := w.Tree(nil)
	watchAll(t, tr, d, "")
	for i := 0; i <= queue/2+10; i++ { // a create and a close_write each
		if err := os.WriteFile(filepath.Join(d, fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if ch := changes(t, tr); !ch.All {
		t.Fatalf("%d names and no overflow", len(ch.Names))
	}
	if ch := changes(t, tr); ch.All {
		t.Fatal("the overflow is told once")
	}
}

func TestBudget(t *testing.T) {
	w := newWatcher(t, 2)
	d := t.TempDir()
	os.MkdirAll(filepath.Join(d, "a/b/c"), 0o755)
	tr := w.Tree(nil)
	if err := addAll(tr, d, ""); !errors.Is(err, ErrLimit) {
		t.Fatalf("a third watch on a budget of two: %v", err)
	}
	tr.Close()
	if n := tr.Watched(); n != 0 {
		t.Fatalf("%d watched after close", n)
	}
	if b := Budget(); b < 1 || b > 1<<16 {
		t.Fatalf("budget %d", b)
	}
}
