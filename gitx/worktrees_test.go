package gitx_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestWorktreesAddedAndRemovedAtOnce: worktrees of one repository added and
// removed from a dozen goroutines at once (runs created and cleaned, or
// adopted, side by side), ten times, all succeed. git does not take them at
// once: an add reads every worktree's record, a half-made one too ("failed
// to read .git/worktrees/R/commondir": 2 of 120 adds without gitx's lock).
func TestWorktreesAddedAndRemovedAtOnce(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	repo := gittest.NewRepo(t, t.TempDir(), map[string]string{"a.txt": "a\n"})
	res, err := g.Resolve(ctx, repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for round := range 10 {
		var wg sync.WaitGroup
		errs := make(chan error, 24)
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wt := filepath.Join(dir, fmt.Sprintf("wt-%d-%d", round, i))
				if err := g.WorktreeAdd(ctx, repo, wt, res.SHA); err != nil {
					errs <- err
					return
				}
				if i%2 == 1 { // half go again at once
					if err := os.RemoveAll(wt); err != nil {
						errs <- err
						return
					}
					if err := g.WorktreeRemove(ctx, repo, wt); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(repo, ".git", "worktrees")); len(left) != 60 {
		t.Fatalf("%d worktree records left, want the 60 kept", len(left))
	}
}
