package lifecycle

import (
	"context"
	"os"
	"path/filepath"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/sandbox"
	"github.com/paddock-dev/paddock/workspace"
)

// Instance sandboxes.
//
// A run with access none has no workspace and no working tools (invariant
// 5), yet its agent may have a command for paddock to start: seed 000
// places it on an instance harness, a sandbox with no workspace. Its
// working directory is an empty directory of its own, made for the job
// and removed when the job ends (with the harness); it sees its home, its
// API socket and the system's directories, nothing of the project's, and
// it reaches paddock only through its menu and control tools.

// instanceDir is the empty directory run id's start command works in.
func (m *Manager) instanceDir(id string) string { return filepath.Join(m.auxDir(id), "instance") }

// instanceSpec is the sandbox of run r's start command: r has no workspace.
func (m *Manager) instanceSpec(ctx context.Context, r *paddock.Run) (sandbox.Spec, error) {
	dir := m.instanceDir(r.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return sandbox.Spec{}, internal("making the run's instance directory failed", err)
	}
	if m.SandboxUID != 0 {
		if err := os.Chown(dir, m.SandboxUID, m.SandboxUID); err != nil {
			return sandbox.Spec{}, internal("making the run's instance directory failed", err)
		}
	}
	binds, err := m.runBinds(ctx, r, nil)
	if err != nil {
		return sandbox.Spec{}, err
	}
	return sandbox.Spec{Workspace: dir, UID: m.SandboxUID, GID: m.SandboxUID, Binds: binds}, nil
}

// endInstance gives back run id's instance sandbox and its directory once
// its start command has ended.
func (m *Manager) endInstance(id string) {
	m.releaseHarness(id)
	if err := workspace.RemoveTree(m.auxDir(id), m.instanceDir(id)); err != nil && !os.IsNotExist(err) {
		m.log().Warn("removing a run's instance directory failed", "run", id, "err", err)
	}
}
