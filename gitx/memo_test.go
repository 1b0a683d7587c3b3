package gitx

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestMemoBounds: the memo keeps at most its limit of entries, the least
// recently used going first, keeps no value larger than the limit, and
// gives a value only for the file identity it was parsed from.
func TestMemoBounds(t *testing.T) {
	m := newMemo[string](10)
	id := fileStat{Ino: 1}
	m.put("a", id, 4, "A") // counts 5
	m.put("b", id, 4, "B")
	if _, ok := m.get("a", id); !ok { // a is now the most recently used
		t.Fatal("a not kept")
	}
	m.put("c", id, 4, "C") // 15 > 10: b goes
	if _, ok := m.get("b", id); ok {
		t.Error("b kept past the limit, though least recently used")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := m.get(k, id); !ok {
			t.Errorf("%s not kept", k)
		}
	}
	if _, ok := m.get("a", fileStat{Ino: 2}); ok {
		t.Error("a given for another file")
	}
	m.put("big", id, 11, "BIG")
	if _, ok := m.get("big", id); ok || m.total > m.limit {
		t.Errorf("a value over the limit kept (total %d)", m.total)
	}
	m.put("a", id, 2, "A2") // replaced: counted once (each value one more than it holds)
	if v, _ := m.get("a", id); v != "A2" || m.total != 8 {
		t.Errorf("after a replacement: %q, total %d, want A2 and 8", v, m.total)
	}
	// Empty values count too: however many, they stay in bounds.
	for i := range 100 {
		m.put(fmt.Sprint("empty", i), id, 0, "")
	}
	if len(m.items) > m.limit || m.total > m.limit {
		t.Errorf("%d values, %d counted, past the limit of %d", len(m.items), m.total, m.limit)
	}
}

// TestStatCacheMemoSeesTheFile: a stat cache changed on disk, even in
// place at the same size, is read again rather than taken from the memo.
func TestStatCacheMemoSeesTheFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "stat")
	c := &statCache{file: file, format: "sha1", entries: map[string]cached{}}
	f := &wfile{path: "a", mode: "100644", oid: "aa", st: fileStat{Ino: 1, Size: 1, Mtime: 100, Ctime: 100}}
	if _, err := c.write([]*wfile{f}, 200); err != nil {
		t.Fatal(err)
	}
	if got := loadStatCache(file, "sha1").entries["a"].oid; got != "aa" {
		t.Fatalf("first load: %q", got)
	}
	if got := loadStatCache(file, "sha1").entries["a"].oid; got != "aa" {
		t.Fatalf("from the memo: %q", got)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The same size, another id, written where it lies.
	i := len(statCacheMagic) + len("sha1\n") + len("a\x00100644\x00")
	copy(b[i:], "bb")
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := loadStatCache(file, "sha1").entries["a"].oid; got != "bb" {
		t.Fatalf("after the file changed in place: %q, want bb", got)
	}
	if got := loadStatCache(file, "sha256").entries; len(got) != 0 {
		t.Fatalf("read as another format: %v", got)
	}
}

// TestStatCacheSaveGainsOrWritesNothing: a save whose hashed files all
// changed within the clock's tick of the walk leaves the file as it is
// (the memo's copy stays good); one that gains an entry writes it.
func TestStatCacheSaveGainsOrWritesNothing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "stat")
	since := time.Now()
	old := since.Add(-time.Hour).UnixNano()
	held := &wfile{path: "held", mode: "100644", oid: "aa", st: fileStat{Ino: 1, Size: 1, Mtime: old, Ctime: old}}
	c := &statCache{file: file, format: "sha1", entries: map[string]cached{}}
	if _, err := c.write([]*wfile{held}, since.UnixNano()); err != nil {
		t.Fatal(err)
	}
	ino := func() uint64 {
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	before := ino()
	recent := &wfile{path: "recent", mode: "100644", oid: "bb", st: fileStat{Ino: 2, Size: 1, Mtime: since.UnixNano(), Ctime: since.UnixNano()}}
	c = loadStatCache(file, "sha1")
	c.dirty()
	c.save([]*wfile{held, recent}, since)
	if ino() != before {
		t.Fatal("the cache was written though it gained nothing")
	}
	settledFile := &wfile{path: "settled", mode: "100644", oid: "cc", st: fileStat{Ino: 3, Size: 1, Mtime: old, Ctime: old}}
	c = loadStatCache(file, "sha1")
	c.dirty()
	c.save([]*wfile{held, recent, settledFile}, since)
	if got := loadStatCache(file, "sha1").entries; len(got) != 2 || got["settled"].oid != "cc" || got["held"].oid != "aa" {
		t.Fatalf("after a save that gains an entry: %v", got)
	}
}
