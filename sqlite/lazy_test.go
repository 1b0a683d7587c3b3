package sqlite

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// TestLazyCommits: UpdateLazy commits without a sync of the WAL and
// Update with one, whichever came before; a batch that holds an Update is
// synced, whatever else it holds; and what UpdateLazy committed is read
// back.
func TestLazyCommits(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.syncs {
		t.Fatal("the store does not sync its WAL itself: not in WAL mode")
	}
	var mode int
	if err := s.write.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&mode); err != nil || mode != 1 {
		t.Fatalf("the write connection's synchronous is %d (%v), want 1 (NORMAL): the store syncs", mode, err)
	}
	claim := func(tx paddock.Tx, key string) error {
		old, err := tx.CallKeys().Claim(ctx, &paddock.CallRecord{Key: key, Request: "r", Owner: "o", CreatedAt: time.Now()})
		if err == nil && old != nil {
			t.Errorf("%s claimed before", key)
		}
		return err
	}
	for i, lazy := range []bool{true, true, false, true, false, false} {
		before := s.synced.Load()
		fn := func(tx paddock.Tx) error { return claim(tx, "k"+string(rune('a'+i))) }
		want := int64(1)
		if lazy {
			want, err = 0, s.UpdateLazy(ctx, fn)
		} else {
			err = s.Update(ctx, fn)
		}
		if got := s.synced.Load() - before; err != nil || got != want {
			t.Fatalf("commit %d (lazy %v): %d syncs, want %d (%v)", i, lazy, got, want, err)
		}
	}
	if err := s.View(ctx, func(tx paddock.Tx) error {
		for _, k := range []string{"ka", "kb", "kd"} {
			if rec, err := tx.CallKeys().Get(ctx, k); err != nil || rec == nil {
				t.Errorf("%s committed lazily is not read back: %v %v", k, rec, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Batches: the leader held in a first Update while others queue; the
	// syncs counted are the queued batch's.
	batch := func(lazies ...bool) int64 {
		hold, held := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Update(ctx, func(tx paddock.Tx) error { close(held); <-hold; return nil })
		}()
		<-held
		for _, lazy := range lazies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fn := func(tx paddock.Tx) error { return nil }
				if lazy {
					s.UpdateLazy(ctx, fn)
				} else {
					s.Update(ctx, fn)
				}
			}()
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			s.mu.Lock()
			n := len(s.queue)
			s.mu.Unlock()
			if n == len(lazies) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d updates queued", n, len(lazies))
			}
			time.Sleep(time.Millisecond)
		}
		before := s.synced.Load()
		close(hold)
		wg.Wait()
		return s.synced.Load() - before - 1 // the leader's own
	}
	if got := batch(true, false, true); got != 1 {
		t.Errorf("a batch with an Update in it: %d syncs, want 1", got)
	}
	if got := batch(true, true); got != 0 {
		t.Errorf("a batch of UpdateLazy only: %d syncs, want none", got)
	}
}

// TestFailedSyncStopsWrites: a sync of the WAL that fails fails its
// batch's Updates, and every later write, rather than go on writing
// what might not reach the disk.
func TestFailedSyncStopsWrites(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fn := func(tx paddock.Tx) error { return nil }
	if err := s.Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
	// The WAL gone from its path: the store's sync cannot open it.
	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateLazy(ctx, fn); err != nil {
		t.Fatalf("a lazy write needs no sync: %v", err)
	}
	err = s.Update(ctx, fn)
	if err == nil || !strings.Contains(err.Error(), "perhaps not on disk") {
		t.Fatalf("an Update whose sync failed: %v, want an error that says it may not be on disk", err)
	}
	for _, w := range []func(context.Context, func(paddock.Tx) error) error{s.Update, s.UpdateLazy} {
		if err := w(ctx, fn); err == nil {
			t.Error("a write after a failed sync was taken")
		}
	}
}

// TestLazyCommitSurvivesAKill: a claim UpdateLazy committed is there
// after the process that made it is killed (SIGKILL) at once, as the
// daemon's crash would.
func TestLazyCommitSurvivesAKill(t *testing.T) {
	if dir := os.Getenv("PADDOCK_LAZY_CHILD"); dir != "" {
		ctx := context.Background()
		s, err := Open(ctx, filepath.Join(dir, "state.db"))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.UpdateLazy(ctx, func(tx paddock.Tx) error {
			_, err := tx.CallKeys().Claim(ctx, &paddock.CallRecord{Key: "claimed", Request: "r", Owner: "o", CreatedAt: time.Now()})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("claimed\n")
		time.Sleep(time.Minute) // killed here
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLazyCommitSurvivesAKill$", "-test.v")
	cmd.Env = append(os.Environ(), "PADDOCK_LAZY_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "claimed" {
	}
	if sc.Text() != "claimed" {
		t.Fatal("the child ended without claiming")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.View(ctx, func(tx paddock.Tx) error {
		rec, err := tx.CallKeys().Get(ctx, "claimed")
		if err == nil && rec == nil {
			t.Error("the claim committed lazily is gone after its process was killed")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
