package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// slowProvider is a workspace provider whose Prepare waits until told:
// a large clone, as far as everything else is concerned.
type slowProvider struct {
	paddock.WorkspaceProvider
	started, release chan struct{}
}

func (s *slowProvider) Prepare(ctx context.Context, p *paddock.Project, w *paddock.Workspace) error {
	close(s.started)
	<-s.release
	return s.WorkspaceProvider.Prepare(ctx, p, w)
}

// TestCreateDoesNotBlockOthers: while one run's workspace is being
// prepared (a clone of a large repository takes seconds), another run can
// be created, rejected and removed, and gc runs.
func TestCreateDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	slow := &slowProvider{WorkspaceProvider: e.m.Providers[paddock.KindClone], started: make(chan struct{}), release: make(chan struct{})}
	e.m.Providers[paddock.KindWorktree] = slow // the slow kind; clone stays quick
	done := make(chan error, 1)
	go func() {
		_, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "worktree"})
		done <- err
	}()
	<-slow.started
	others := make(chan error, 1)
	go func() {
		r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "clone"})
		if err == nil {
			_, err = e.m.Runs.Reject(ctx, r.ID)
		}
		if err == nil {
			_, err = e.m.Runs.Remove(ctx, r.ID)
		}
		if err == nil {
			_, err = e.m.GC(ctx, true)
		}
		others <- err
	}()
	select {
	case err := <-others:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		close(slow.release)
		t.Fatal("create, reject, rm and gc waited for another run's preparation")
	}
	close(slow.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
