package lifecycle

import (
	"context"
	"log/slog"
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

// uncommittedBase makes and finds such bases. The Manager makes one in
// NewManager with what it calls: git, where a run's auxiliary directory
// is, and its log.
type uncommittedBase struct {
	git *gitx.Git
	aux func(id string) string
	log func() *slog.Logger
}

// store is the object store of run id's base, when it holds the
// checkout's uncommitted changes.
func (u *uncommittedBase) store(id string) string {
	return filepath.Join(u.aux(id), "base-objects")
}

// has says whether run id's base holds the checkout's uncommitted changes.
func (u *uncommittedBase) has(id string) bool { return exists(u.store(id)) }

// include commits the uncommitted changes of project p's checkout onto
// *base (its HEAD) into run id's own store, sets *base to that commit, and
// returns ctx under which git reads the store. With nothing uncommitted,
// nothing changes.
func (u *uncommittedBase) include(ctx context.Context, id string, kind paddock.WorkspaceKind, ref string, p *paddock.Project, gitDir string, base *string) (context.Context, error) {
	switch {
	case kind == paddock.KindWorktree || kind == paddock.KindOperatorDir:
		return ctx, paddock.Errorf(paddock.CodeBadRequest, "include_uncommitted: a %s run is the project's own checkout or the operator's directory; use clone or overlay", kind)
	case ref != "HEAD":
		return ctx, paddock.Errorf(paddock.CodeBadRequest, "include_uncommitted starts from HEAD, where the checkout's changes are, not from %s", ref)
	}
	store := u.store(id)
	wt := gitx.WorkTree{Git: u.git, Root: p.Root, GitDir: gitDir}
	who := gitx.Identity{Name: "paddock", Email: "paddock@paddock.invalid", When: now()}
	commit, n, err := wt.CommitUncommittedInto(ctx, store, *base, who, "The uncommitted changes of "+p.Root+", the base of run "+id+"\n")
	if err != nil {
		os.RemoveAll(u.aux(id))
		return ctx, internal("committing the checkout's uncommitted changes for the run failed", err)
	}
	if n == 0 {
		os.RemoveAll(u.aux(id))
		return ctx, nil
	}
	*base = commit
	return gitx.WithObjects(ctx, store), nil
}

// borrow gives the git directory dir of run r (a clone's; "" for none)
// the store of its base, when its base holds the checkout's uncommitted
// changes, and puts its HEAD on that commit.
func (u *uncommittedBase) borrow(r *paddock.Run, dir string) error {
	if dir == "" || !u.has(r.ID) {
		return nil
	}
	if err := workspace.AddAlternate(dir, workspace.ObjectsInView(u.store(r.ID))); err != nil {
		return internal("giving the run's git its base failed", err)
	}
	if err := workspace.DetachHead(dir, r.ID, r.Workspace.BaseRevision); err != nil {
		u.log().Warn("the run's HEAD stays on its branch", "run", r.ID, "err", err)
	}
	return nil
}
