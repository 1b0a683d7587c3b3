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
func (js *Jobs) instanceDir(id string) string { return filepath.Join(js.auxDir(id), "instance") }

// instanceSpec is the sandbox of run r's start command: r has no workspace.
func (js *Jobs) instanceSpec(ctx context.Context, r *paddock.Run) (sandbox.Spec, error) {
	dir := js.instanceDir(r.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return sandbox.Spec{}, internal("making the run's instance directory failed", err)
	}
	if js.SandboxUID != 0 {
		if err := os.Chown(dir, js.SandboxUID, js.SandboxUID); err != nil {
			return sandbox.Spec{}, internal("making the run's instance directory failed", err)
		}
	}
	binds, err := js.views.runBinds(ctx, r, nil)
	if err != nil {
		return sandbox.Spec{}, err
	}
	return sandbox.Spec{Workspace: dir, UID: js.SandboxUID, GID: js.SandboxUID, Binds: binds}, nil
}

// endInstance gives back run id's instance sandbox and its directory once
// its start command has ended.
func (js *Jobs) endInstance(id string) {
	js.executor.releaseHarness(id)
	if err := workspace.RemoveTree(js.auxDir(id), js.instanceDir(id)); err != nil && !os.IsNotExist(err) {
		js.log().Warn("removing a run's instance directory failed", "run", id, "err", err)
	}
}
