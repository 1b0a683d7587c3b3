package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCheckpointsBesideCommits: no commit checkpoints (the writer's
// automatic checkpoint is off), the checkpointer copies the log into the
// database after commits, and Close leaves the log empty.
func TestCheckpointsBesideCommits(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var auto int
	if err := s.write.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("the writer's wal_autocheckpoint = %d, %v; want 0 (the checkpointer's work)", auto, err)
	}
	if _, err := s.write.ExecContext(ctx, "CREATE TABLE filler (b BLOB)"); err != nil {
		t.Fatal(err)
	}
	before := size(t, path)
	blob := []byte(strings.Repeat("x", 64<<10))
	for range 64 { // 4 MiB through the log, one commit each
		if _, err := s.write.ExecContext(ctx, "INSERT INTO filler VALUES (?)", blob); err != nil {
			t.Fatal(err)
		}
		s.ckpt.poke()
	}
	deadline := time.Now().Add(10 * time.Second)
	for size(t, path) < before+2<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("the database file is %d bytes after 4 MiB committed (%d before): the log was not checkpointed", size(t, path), before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := size(t, path+"-wal"); n != 0 {
		t.Fatalf("the log holds %d bytes after Close; want it checkpointed and truncated", n)
	}
}

func size(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
