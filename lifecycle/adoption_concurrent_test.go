package lifecycle_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/lifecycle"
)

// takeOnce is shared whose take is a compare-and-swap, as the shared
// store's is: a run is taken once, until it is given back.
type takeOnce struct {
	*shared
	mu    sync.Mutex
	taken map[string]bool
	takes map[string]int
}

func (c *takeOnce) TakeRun(ctx context.Context, id string, fn func(paddock.Tx) error) (string, error) {
	c.mu.Lock()
	if c.taken[id] {
		c.mu.Unlock()
		return "", paddock.Errorf(paddock.CodeConflict, "run %s is on this node already", id)
	}
	c.taken[id] = true
	c.takes[id]++
	c.mu.Unlock()
	from, err := c.shared.TakeRun(ctx, id, fn)
	if err != nil {
		c.mu.Lock()
		delete(c.taken, id)
		c.mu.Unlock()
	}
	return from, err
}

func (c *takeOnce) ReleaseRun(ctx context.Context, id, to string, fn func(paddock.Tx) error) error {
	c.mu.Lock()
	delete(c.taken, id)
	c.mu.Unlock()
	return c.shared.ReleaseRun(ctx, id, to, fn)
}

// TestConcurrentAdoptions: a node adopting a lost node's runs several at
// once (issue #35) calls Adopt for different runs at the same time, and
// an operator's adopt may come for a run an automatic adoption is taking.
// Worktree and clone runs of one project: their workspaces are made (and
// what is left of an earlier hold removed) with git on the same project
// repository at once. Every run is adopted once, a second adoption of the
// same run meanwhile is refused (conflict), and every run holds its
// checkpoint's files, not the leftover's.
func TestConcurrentAdoptions(t *testing.T) {
	e := newEnv(t)
	// Closed at the end: the adoptions' delayed checkpoints stop with it.
	t.Cleanup(func() { e.m.Close(context.Background()) })
	e.project(t)
	ctx := context.Background()
	c := &takeOnce{shared: e.shareCheckpoints(), taken: map[string]bool{}, takes: map[string]int{}}
	e.m.Cluster = c
	var runs []*paddock.Run
	for i := range 8 {
		kind := paddock.KindWorktree
		if i%2 == 1 {
			kind = paddock.KindClone
		}
		r := e.create(t, kind, "")
		root := r.Workspace.Root
		if err := os.WriteFile(filepath.Join(root, "work.txt"), []byte(fmt.Sprintf("run %d's work\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "README.md"), []byte(fmt.Sprintf("hello from %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		lifecycle.StoreCheckpoint(ctx, e.m, r.ID, "test")
		// Written after the checkpoint: lost with the node.
		if err := os.WriteFile(filepath.Join(root, "stale.txt"), []byte("after the checkpoint\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	type outcome struct {
		res *paddock.AdoptResult
		err error
	}
	out := make([][2]outcome, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		for k := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := e.m.Nodes.Adopt(ctx, r.ID, fmt.Sprintf("test %d", k))
				out[i][k] = outcome{res, err}
			}()
		}
	}
	wg.Wait()
	for i, r := range runs {
		var won *paddock.AdoptResult
		for _, o := range out[i] {
			switch {
			case o.err == nil && won == nil:
				won = o.res
			case o.err == nil:
				t.Errorf("run %s adopted twice at once", r.ID)
			case !paddock.IsCode(o.err, paddock.CodeConflict):
				t.Errorf("run %s (%s): %v", r.ID, r.Workspace.Kind, o.err)
			}
		}
		if c.takes[r.ID] != 1 {
			t.Errorf("run %s taken %d times", r.ID, c.takes[r.ID])
		}
		if won == nil {
			t.Errorf("run %s (%s) not adopted", r.ID, r.Workspace.Kind)
			continue
		}
		root := won.Run.Workspace.Root
		for name, want := range map[string]string{"work.txt": fmt.Sprintf("run %d's work\n", i), "README.md": fmt.Sprintf("hello from %d\n", i)} {
			if b, err := os.ReadFile(filepath.Join(root, name)); err != nil || string(b) != want {
				t.Errorf("run %s (%s): %s is %q %v, want %q", r.ID, r.Workspace.Kind, name, b, err, want)
			}
		}
		if _, err := os.Stat(filepath.Join(root, "stale.txt")); err == nil {
			t.Errorf("run %s (%s) holds the leftover's file", r.ID, r.Workspace.Kind)
		}
		if _, err := os.Stat(filepath.Join(e.state, "artifacts", r.ID, "adopting.json")); err == nil {
			t.Errorf("run %s: its adoption's marker is left", r.ID)
		}
	}
	// The project's own worktree records: one per worktree run adopted,
	// none left of the earlier holds, none broken.
	list := gittest.Git(t, e.repo, "worktree", "list", "--porcelain")
	if n := strings.Count(list, "worktree "); n != 1+len(runs)/2 || strings.Contains(list, "prunable") {
		t.Errorf("git worktree list: %d worktrees\n%s", n, list)
	}
}
