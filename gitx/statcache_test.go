package gitx

import (
	"path/filepath"
	"testing"
)

// TestStatCacheWriteLimit: a file hashed or seeded now is kept only when
// its ctime and mtime are before the limit (a change in the same tick of
// the clock would leave its stat data as it is), and an entry the cache
// already held as it is stays, whatever the limit.
func TestStatCacheWriteLimit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "stat")
	old := &wfile{path: "old", mode: "100644", oid: "aa", st: fileStat{Ino: 1, Size: 1, Mtime: 100, Ctime: 100}}
	c := &statCache{file: file, format: "sha1", entries: map[string]cached{}}
	if _, err := c.write([]*wfile{old}, 200); err != nil {
		t.Fatal(err)
	}
	files := []*wfile{
		old,
		{path: "ctime-at", mode: "100644", oid: "bb", st: fileStat{Ino: 2, Size: 1, Mtime: 100, Ctime: 300}},
		{path: "mtime-at", mode: "100644", oid: "cc", st: fileStat{Ino: 3, Size: 1, Mtime: 300, Ctime: 100}},
		{path: "before", mode: "100644", oid: "dd", st: fileStat{Ino: 4, Size: 1, Mtime: 299, Ctime: 299}},
		{path: "unhashed", mode: "100644", st: fileStat{Ino: 5, Size: 1, Mtime: 1, Ctime: 1}},
	}
	c = loadStatCache(file, "sha1")
	if _, err := c.write(files, 300); err != nil {
		t.Fatal(err)
	}
	got := loadStatCache(file, "sha1").entries
	for p, want := range map[string]bool{"old": true, "ctime-at": false, "mtime-at": false, "before": true, "unhashed": false} {
		if _, ok := got[p]; ok != want {
			t.Errorf("%s kept: %v, want %v", p, ok, want)
		}
	}
	// An entry the cache held, though its times are past the limit now.
	c = loadStatCache(file, "sha1")
	if _, err := c.write(files, 50); err != nil {
		t.Fatal(err)
	}
	if got := loadStatCache(file, "sha1").entries; len(got) != 2 || got["old"].oid != "aa" || got["before"].oid != "dd" {
		t.Errorf("held entries after a write with an earlier limit: %v", got)
	}
}
