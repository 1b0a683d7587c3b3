package lifecycle

import (
	"context"
	"os"
	"path"
	"path/filepath"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/sandbox"
	"github.com/paddock-dev/paddock/workspace"
)

// HomeInView is a run's home directory as its commands see it: its own,
// outside the workspace, so that what tools keep there (Go's build and
// module caches, npm's, pip's, cargo's, git's config) never enters a
// change set, and kept for the run's life.
const HomeInView = "/home/paddock"

// homeGitConfig lets the agent's git commit in its own repository (the
// identity of its commits is not what lands: apply commits as the
// person who approves).
const homeGitConfig = `[user]
	name = paddock agent
	email = agent@paddock.invalid
[init]
	defaultBranch = main
[advice]
	detachedHead = false
`

// homeDir is run id's home, as the host reaches it.
func (vw *views) homeDir(id string) string { return filepath.Join(vw.auxDir(id), "home") }

// prepareAux makes run r's home, handed to the sandbox's uid.
func (vw *views) prepareAux(r *paddock.Run) error {
	home := filepath.Join(vw.auxDir(r.ID), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(homeGitConfig), 0o644); err != nil {
		return err
	}
	if err := vw.writeAgentConfigs(r, home); err != nil {
		return err
	}
	if vw.SandboxUID != 0 {
		if err := chownTree(vw.auxDir(r.ID), vw.SandboxUID); err != nil {
			return err
		}
		// The API directory stays the daemon's: its socket is made there
		// again after a restart, and nothing of the agent's may be in it.
		if err := chownTree(vw.apiDir(r.ID), os.Getuid()); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// removeAux removes what prepareAux (and a worktree's provider) made.
func (vw *views) removeAux(id string) error {
	if vw.RunAPI != nil {
		vw.RunAPI.Close(id)
	}
	aux := vw.auxDir(id)
	if _, err := os.Lstat(aux); os.IsNotExist(err) {
		return nil
	}
	return workspace.RemoveTree(vw.WorkspacesDir, aux)
}

// runBinds are the directories run r's view shows beside its workspace:
// its home; the project's objects, read-only, which its git borrows; a
// worktree run's git directory (read-only in a read run, whose writes
// must not outlive a command).
func (vw *views) runBinds(ctx context.Context, r *paddock.Run, p *paddock.Project) ([]sandbox.Bind, error) {
	aux := vw.auxDir(r.ID)
	home := filepath.Join(aux, "home")
	if _, err := os.Stat(home); err != nil {
		// A run made before runs had homes: it gets one now.
		if err := vw.prepareAux(r); err != nil {
			return nil, internal("making the run's home failed", err)
		}
	}
	binds := append([]sandbox.Bind{{Source: home, Target: HomeInView}}, vw.routingBinds(home)...)
	api, err := vw.runAPIBinds(r)
	if err != nil {
		return nil, err
	}
	binds = append(binds, api...)
	binds = append(binds, mountBinds(definitionOf(r))...)
	ca, err := caBind(vw.ProxyCA, definitionOf(r), aux)
	if err != nil {
		return nil, err
	}
	binds = append(binds, ca...)
	if p == nil {
		return binds, nil
	}
	// The project's caches as it declares them now: a change reaches the
	// run's next sandbox (its binds are in the harness's configuration).
	for _, c := range p.Caches {
		if isCheckRun(r) && c.Mode == paddock.CacheRW {
			continue // an agent's commands write it: never a check's
		}
		src, err := vw.cacheDir(p, c)
		if err != nil {
			return nil, err
		}
		b := sandbox.Bind{Source: src, Target: path.Join(HomeInView, paddock.CacheKinds[c.Name]), ReadOnly: c.Mode == paddock.CacheRO}
		if c.Mode == paddock.CacheCOW {
			// The run's own layer over it, in its aux directory: removed
			// with the run (a check run's is as fresh as the run).
			if b.Upper, err = vw.cacheLayer(r.ID, c.Name); err != nil {
				return nil, err
			}
		}
		binds = append(binds, b)
	}
	if r.Workspace.Kind == paddock.KindOperatorDir {
		return binds, nil
	}
	repo, err := vw.repoOf(ctx, p)
	if err != nil {
		return nil, err
	}
	objects, _ := workspace.ProjectObjects(repo.CommonDir)
	binds = append(binds, sandbox.Bind{Source: objects, Target: workspace.ObjectsInView(objects), ReadOnly: true})
	// A review or check run's commit, in a store of its own (review.go).
	for _, store := range vw.reviews.runObjects(r) {
		binds = append(binds, sandbox.Bind{Source: store, Target: workspace.ObjectsInView(store), ReadOnly: true})
	}
	if r.Workspace.Kind == paddock.KindWorktree {
		if git := filepath.Join(aux, "git"); exists(git) {
			binds = append(binds, sandbox.Bind{Source: git, Target: workspace.GitDirInView, ReadOnly: r.Access == paddock.AccessRead})
		}
	}
	return binds, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// cacheLayer is the directory of run id's copy-on-write layer over its
// project's cache name, whose parent it makes (the sandbox makes the
// layer, for the sandbox's uid).
func (vw *views) cacheLayer(id, name string) (string, error) {
	dir := filepath.Join(vw.auxDir(id), "caches")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", internal("making the run's cache layers' directory failed", err)
	}
	if vw.SandboxUID != 0 {
		// Like the rest of the run's aux directory (prepareAux).
		if err := os.Chown(dir, vw.SandboxUID, vw.SandboxUID); err != nil {
			return "", internal("making the run's cache layers' directory failed", err)
		}
	}
	return filepath.Join(dir, name), nil
}

// cacheDir is the host directory of project p's cache c: the operator's,
// which must exist, or the daemon's own under <state>/caches, made for
// the sandbox's uid on first use.
func (vw *views) cacheDir(p *paddock.Project, c paddock.Cache) (string, error) {
	if c.Path != "" {
		if fi, err := os.Stat(c.Path); err != nil || !fi.IsDir() {
			return "", paddock.Errorf(paddock.CodeConflict, "cache %s of project %s: %s is not a directory (project set %s --cache to change it)", c.Name, p.Name, c.Path, p.Name)
		}
		return c.Path, nil
	}
	dir := filepath.Join(filepath.Dir(vw.WorkspacesDir), "caches", p.Name, c.Name)
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", internal("making a cache directory failed", err)
	}
	if vw.SandboxUID != 0 {
		os.Chown(dir, vw.SandboxUID, vw.SandboxUID)
	}
	return dir, nil
}
