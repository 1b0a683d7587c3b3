package sqlite

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// synchronousIn is the synchronous setting the transaction tx runs under:
// 1 NORMAL, 2 FULL.
func synchronousIn(ctx context.Context, t *testing.T, tx paddock.Tx) int {
	t.Helper()
	var v int
	if err := tx.(*Tx).queryRow(ctx, "PRAGMA synchronous").Scan(&v); err != nil {
		t.Error(err)
	}
	return v
}

// TestLazyCommits: UpdateLazy commits without an fsync (synchronous
// NORMAL) and Update with one (FULL), whichever came before; a batch that
// holds an Update is committed as one, whatever else it holds; and what
// UpdateLazy committed is read back.
func TestLazyCommits(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	claim := func(tx paddock.Tx, key string) error {
		old, err := tx.CallKeys().Claim(ctx, &paddock.CallRecord{Key: key, Request: "r", Owner: "o", CreatedAt: time.Now()})
		if err == nil && old != nil {
			t.Errorf("%s claimed before", key)
		}
		return err
	}
	const normal, full = 1, 2
	for i, lazy := range []bool{true, true, false, true, false, false} {
		var got int
		fn := func(tx paddock.Tx) error {
			got = synchronousIn(ctx, t, tx)
			return claim(tx, "k"+string(rune('a'+i)))
		}
		want := full
		if lazy {
			want, err = normal, s.UpdateLazy(ctx, fn)
		} else {
			err = s.Update(ctx, fn)
		}
		if err != nil || got != want {
			t.Fatalf("commit %d (lazy %v): synchronous %d, want %d (%v)", i, lazy, got, want, err)
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

	// Batches: the leader held in a first Update while others queue.
	batch := func(lazies ...bool) []int {
		hold, held := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Update(ctx, func(tx paddock.Tx) error { close(held); <-hold; return nil })
		}()
		<-held
		got := make([]int, len(lazies))
		for i, lazy := range lazies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fn := func(tx paddock.Tx) error { got[i] = synchronousIn(ctx, t, tx); return nil }
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
		close(hold)
		wg.Wait()
		return got
	}
	if got := batch(true, false, true); got[0] != full || got[1] != full || got[2] != full {
		t.Errorf("a batch with an Update in it: synchronous %v, want FULL for all", got)
	}
	if got := batch(true, true); got[0] != normal || got[1] != normal {
		t.Errorf("a batch of UpdateLazy only: synchronous %v, want NORMAL", got)
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
