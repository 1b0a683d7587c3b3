package lifecycle

import (
	"context"
	"os"
	"path/filepath"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/workspace"
)

// A run may start with the uncommitted changes of the project's checkout
// (#30 item 7: paddock run --include-uncommitted): its base is then a
// commit of them onto HEAD, written into an object store of the run's own
// (the project's borrowed, read-only), as a review run's is. Nothing is
// written into the project; the store goes with the run. Such a run is
// applied into the working tree, never to a branch, which would carry the
// person's uncommitted work into the project's history.

// uncommittedObjects is the object store of run id's base, when it holds
// the checkout's uncommitted changes.
func (m *Manager) uncommittedObjects(id string) string {
	return filepath.Join(m.auxDir(id), "base-objects")
}

// includeUncommitted commits the uncommitted changes of project p's
// checkout onto *base (its HEAD) into run id's own store, sets *base to that
// commit, and returns ctx under which git reads the store. With nothing
// uncommitted, nothing changes.
func (m *Manager) includeUncommitted(ctx context.Context, id string, kind paddock.WorkspaceKind, ref string, p *paddock.Project, gitDir string, base *string) (context.Context, error) {
	switch {
	case kind == paddock.KindWorktree || kind == paddock.KindOperatorDir:
		return ctx, paddock.Errorf(paddock.CodeBadRequest, "include_uncommitted: a %s run is the project's own checkout or the operator's directory; use clone or overlay", kind)
	case ref != "HEAD":
		return ctx, paddock.Errorf(paddock.CodeBadRequest, "include_uncommitted starts from HEAD, where the checkout's changes are, not from %s", ref)
	}
	store := m.uncommittedObjects(id)
	who := gitx.Identity{Name: "paddock", Email: "paddock@paddock.invalid", When: now()}
	commit, n, err := m.Git.CommitUncommittedInto(ctx, p.Root, gitDir, store, *base, who,
		"The uncommitted changes of "+p.Root+", the base of run "+id+"\n")
	if err != nil {
		os.RemoveAll(m.auxDir(id))
		return ctx, internal("committing the checkout's uncommitted changes for the run failed", err)
	}
	if n == 0 {
		os.RemoveAll(m.auxDir(id))
		return ctx, nil
	}
	*base = commit
	return gitx.WithObjects(ctx, store), nil
}

// borrowBase gives run r's own git (a clone's) the store of its base,
// when its base holds the checkout's uncommitted changes, and puts its
// HEAD on that commit.
func (m *Manager) borrowBase(r *paddock.Run) error {
	store := m.uncommittedObjects(r.ID)
	dir := m.runGitDir(r)
	if dir == "" || !exists(store) {
		return nil
	}
	if err := workspace.AddAlternate(dir, workspace.ObjectsInView(store)); err != nil {
		return internal("giving the run's git its base failed", err)
	}
	if err := workspace.DetachHead(dir, r.ID, r.Workspace.BaseRevision); err != nil {
		m.log().Warn("the run's HEAD stays on its branch", "run", r.ID, "err", err)
	}
	return nil
}
