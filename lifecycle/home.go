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

// auxDir is where run id keeps its home (and a worktree run its git).
func (m *Manager) auxDir(id string) string { return workspace.AuxDir(m.WorkspacesDir, id) }

// homeDir is run id's home, as the host reaches it.
func (m *Manager) homeDir(id string) string { return filepath.Join(m.auxDir(id), "home") }

// prepareAux makes run r's home, handed to the sandbox's uid.
func (m *Manager) prepareAux(r *paddock.Run) error {
	home := filepath.Join(m.auxDir(r.ID), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(homeGitConfig), 0o644); err != nil {
		return err
	}
	if err := m.writeAgentConfigs(r, home); err != nil {
		return err
	}
	if m.SandboxUID != 0 {
		if err := chownTree(m.auxDir(r.ID), m.SandboxUID); err != nil {
			return err
		}
		// The API directory stays the daemon's: its socket is made there
		// again after a restart, and nothing of the agent's may be in it.
		if err := chownTree(m.apiDir(r.ID), os.Getuid()); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// removeAux removes what prepareAux (and a worktree's provider) made.
func (m *Manager) removeAux(id string) error {
	if m.RunAPI != nil {
		m.RunAPI.Close(id)
	}
	aux := m.auxDir(id)
	if _, err := os.Lstat(aux); os.IsNotExist(err) {
		return nil
	}
	return workspace.RemoveTree(m.WorkspacesDir, aux)
}

// runBinds are the directories run r's view shows beside its workspace:
// its home; the project's objects, read-only, which its git borrows; a
// worktree run's git directory (read-only in a read run, whose writes
// must not outlive a command).
func (m *Manager) runBinds(ctx context.Context, r *paddock.Run, p *paddock.Project) ([]sandbox.Bind, error) {
	aux := m.auxDir(r.ID)
	home := filepath.Join(aux, "home")
	if _, err := os.Stat(home); err != nil {
		// A run made before runs had homes: it gets one now.
		if err := m.prepareAux(r); err != nil {
			return nil, internal("making the run's home failed", err)
		}
	}
	binds := append([]sandbox.Bind{{Source: home, Target: HomeInView}}, m.routingBinds(home)...)
	api, err := m.runAPIBinds(r)
	if err != nil {
		return nil, err
	}
	binds = append(binds, api...)
	binds = append(binds, mountBinds(definitionOf(r))...)
	ca, err := caBind(m.ProxyCA, definitionOf(r), aux)
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
		src, err := m.cacheDir(p, c)
		if err != nil {
			return nil, err
		}
		b := sandbox.Bind{Source: src, Target: path.Join(HomeInView, paddock.CacheKinds[c.Name]), ReadOnly: c.Mode == paddock.CacheRO}
		if c.Mode == paddock.CacheCOW {
			// The run's own layer over it, in its aux directory: removed
			// with the run (a check run's is as fresh as the run).
			if b.Upper, err = m.cacheLayer(r.ID, c.Name); err != nil {
				return nil, err
			}
		}
		binds = append(binds, b)
	}
	if r.Workspace.Kind == paddock.KindOperatorDir {
		return binds, nil
	}
	repo, err := m.repoOf(ctx, p)
	if err != nil {
		return nil, err
	}
	objects, _ := workspace.ProjectObjects(repo.CommonDir)
	binds = append(binds, sandbox.Bind{Source: objects, Target: workspace.ObjectsInView(objects), ReadOnly: true})
	// A review or check run's commit, in a store of its own (review.go).
	for _, store := range m.runObjects(r) {
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
func (m *Manager) cacheLayer(id, name string) (string, error) {
	dir := filepath.Join(m.auxDir(id), "caches")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", internal("making the run's cache layers' directory failed", err)
	}
	if m.SandboxUID != 0 {
		// Like the rest of the run's aux directory (prepareAux).
		if err := os.Chown(dir, m.SandboxUID, m.SandboxUID); err != nil {
			return "", internal("making the run's cache layers' directory failed", err)
		}
	}
	return filepath.Join(dir, name), nil
}

// cacheDir is the host directory of project p's cache c: the operator's,
// which must exist, or the daemon's own under <state>/caches, made for
// the sandbox's uid on first use.
func (m *Manager) cacheDir(p *paddock.Project, c paddock.Cache) (string, error) {
	if c.Path != "" {
		if fi, err := os.Stat(c.Path); err != nil || !fi.IsDir() {
			return "", paddock.Errorf(paddock.CodeConflict, "cache %s of project %s: %s is not a directory (project set %s --cache to change it)", c.Name, p.Name, c.Path, p.Name)
		}
		return c.Path, nil
	}
	dir := filepath.Join(filepath.Dir(m.WorkspacesDir), "caches", p.Name, c.Name)
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", internal("making a cache directory failed", err)
	}
	if m.SandboxUID != 0 {
		os.Chown(dir, m.SandboxUID, m.SandboxUID)
	}
	return dir, nil
}
