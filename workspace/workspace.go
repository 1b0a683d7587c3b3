// Package workspace holds the workspace providers: how a run's directory is
// made and removed for each kind (overlay: a shared snapshot of the base
// under the run's own upper layer, mounted only inside its sandbox; clone;
// worktree; operator_dir, a directory the operator hands over), the run's
// own git directory, what an overlay's upper layer says changed, and the
// content digest recorded at a checkpoint.
//
// Providers only touch the disk; the lifecycle manager owns the records and
// decides when a provider may act. Two rules are enforced here as well, as a
// second line behind the lifecycle table:
//
//   - A provider deletes only below its own directory (the state directory's
//     workspaces/), never a path outside it, and never an operator's directory.
//   - Deletion never follows a symbolic link out of the workspace.
package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
)

// Providers returns the providers of every kind this build supports, making
// their workspaces under dir.
func Providers(git *gitx.Git, dir string) map[paddock.WorkspaceKind]paddock.WorkspaceProvider {
	return map[paddock.WorkspaceKind]paddock.WorkspaceProvider{
		paddock.KindClone:       &Clone{Git: git, Dir: dir},
		paddock.KindWorktree:    &Worktree{Git: git, Dir: dir},
		paddock.KindOperatorDir: OperatorDir{},
		paddock.KindOverlay:     &Overlay{Git: git, Dir: dir, Snapshots: filepath.Join(filepath.Dir(dir), "snapshots")},
	}
}

// Clone makes workspaces with `git clone --shared`: a repository of its own
// that borrows the project's objects and has no remote.
type Clone struct {
	Git *gitx.Git
	Dir string // workspaces are made below this directory
}

// Kind returns paddock.KindClone.
func (c *Clone) Kind() paddock.WorkspaceKind { return paddock.KindClone }

// Prepare clones the project into w.Root at w.BaseRevision.
func (c *Clone) Prepare(ctx context.Context, p *paddock.Project, w *paddock.Workspace) error {
	if err := mustBeBelow(c.Dir, w.Root); err != nil {
		return err
	}
	if err := c.Git.CloneShared(ctx, p.Root, w.Root, w.BaseRevision); err != nil {
		return errors.Join(err, RemoveTree(c.Dir, w.Root))
	}
	// The clone borrows the project's objects, which the view shows
	// read-only (ObjectsInView), and starts on the run's branch.
	repo, err := c.Git.Inspect(ctx, p.Root)
	if err == nil {
		err = PointAtView(filepath.Join(w.Root, ".git"), w.RunID, w.BaseRevision, repo.CommonDir)
	}
	if err != nil {
		return errors.Join(err, RemoveTree(c.Dir, w.Root))
	}
	return nil
}

// Remove deletes the clone.
func (c *Clone) Remove(ctx context.Context, p *paddock.Project, w *paddock.Workspace) error {
	return RemoveTree(c.Dir, w.Root)
}

// Present reports whether the clone's directory exists.
func (c *Clone) Present(ctx context.Context, w *paddock.Workspace) (bool, error) {
	return present(w.Root)
}

// Worktree makes workspaces with `git worktree add --detach`. It writes
// .git/worktrees/NAME in the project, which Remove takes away again.
type Worktree struct {
	Git *gitx.Git
	Dir string
}

// Kind returns paddock.KindWorktree.
func (t *Worktree) Kind() paddock.WorkspaceKind { return paddock.KindWorktree }

// Prepare adds a detached worktree at w.Root.
func (t *Worktree) Prepare(ctx context.Context, p *paddock.Project, w *paddock.Workspace) error {
	if err := mustBeBelow(t.Dir, w.Root); err != nil {
		return err
	}
	if err := t.Git.WorktreeAdd(ctx, p.Root, w.Root, w.BaseRevision); err != nil {
		return errors.Join(err, t.Remove(ctx, p, w))
	}
	if err := t.ownGit(ctx, p, w); err != nil {
		return errors.Join(err, t.Remove(ctx, p, w))
	}
	return nil
}

// ownGit gives the worktree a git directory of its own (in the run's
// auxiliary directory, shown at GitDirInView): the one git made for it
// lives in the project's .git, whose refs the agent's commits would move.
func (t *Worktree) ownGit(ctx context.Context, p *paddock.Project, w *paddock.Workspace) error {
	link := filepath.Join(w.Root, ".git")
	b, err := os.ReadFile(link)
	if err != nil {
		return fmt.Errorf("workspace: worktree: %w", err)
	}
	admin, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return fmt.Errorf("workspace: worktree: unexpected .git file %q", b)
	}
	repo, err := t.Git.Inspect(ctx, p.Root)
	if err != nil {
		return err
	}
	aux := AuxDir(t.Dir, w.RunID)
	if err := os.MkdirAll(aux, 0o755); err != nil {
		return fmt.Errorf("workspace: worktree: %w", err)
	}
	if err := WriteGitDir(filepath.Join(aux, "git"), w.RunID, w.BaseRevision, filepath.Join(admin, "index"), repo.CommonDir, 0); err != nil {
		return err
	}
	return os.WriteFile(link, []byte("gitdir: "+GitDirInView+"\n"), 0o644)
}

// AuxDir is where a run keeps what is its own but not its workspace's (its
// home, a worktree's git directory): beside the workspaces, removed with
// the run's workspace.
func AuxDir(dir, runID string) string { return filepath.Join(dir, runID+".aux") }

// Remove deletes the worktree's directory, then git's record of it.
func (t *Worktree) Remove(ctx context.Context, p *paddock.Project, w *paddock.Workspace) error {
	if err := RemoveTree(t.Dir, w.Root); err != nil {
		return err
	}
	return t.Git.WorktreeRemove(ctx, p.Root, w.Root)
}

// Present reports whether the worktree's directory exists.
func (t *Worktree) Present(ctx context.Context, w *paddock.Workspace) (bool, error) {
	return present(w.Root)
}

// OperatorDir uses a directory an operator hands over. paddock neither makes
// nor deletes it; the lifecycle manager holds the project lock while it is used.
type OperatorDir struct{}

// Kind returns paddock.KindOperatorDir.
func (OperatorDir) Kind() paddock.WorkspaceKind { return paddock.KindOperatorDir }

// Prepare checks that w.Root is an existing directory.
func (OperatorDir) Prepare(ctx context.Context, p *paddock.Project, w *paddock.Workspace) error {
	fi, err := os.Stat(w.Root)
	if err != nil || !fi.IsDir() {
		return paddock.Errorf(paddock.CodeBadRequest, "operator directory %s is not an existing directory", w.Root)
	}
	return nil
}

// Remove leaves the directory alone: it belongs to the operator.
func (OperatorDir) Remove(ctx context.Context, p *paddock.Project, w *paddock.Workspace) error {
	return nil
}

// Present reports whether the directory exists.
func (OperatorDir) Present(ctx context.Context, w *paddock.Workspace) (bool, error) {
	return present(w.Root)
}

func present(path string) (bool, error) {
	_, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func mustBeBelow(dir, path string) error {
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) || strings.Contains(rel, "/") {
		return fmt.Errorf("workspace: %s is not a direct child of %s; refusing", path, dir)
	}
	return nil
}

// RemoveTree deletes path, which must be a direct child of dir. Processes
// still working in it are killed first. Symbolic links are removed, never
// followed; directories an agent made read-only are made writable first, so a
// chmod cannot pin a workspace on disk.
func RemoveTree(dir, path string) error {
	if err := mustBeBelow(dir, path); err != nil {
		return err
	}
	killProcessesIn(path)
	err := os.RemoveAll(path)
	if err == nil {
		return nil
	}
	// Make every directory writable and try once more.
	filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("workspace: remove %s: %w", path, err)
	}
	return nil
}
