package lifecycle

import (
	"context"
	"os"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/sandbox"
)

// sandboxUnavailable says why this daemon can run no command confined,
// or "" where it can: a command is tried once, in a sandbox of its own
// (what `paddock doctor` proves), the first time it is asked. Where it
// cannot, exec and verify are not offered: capabilities say what holds,
// rather than offer tools whose every call is refused (#29 item 6).
func (m *Manager) sandboxUnavailable(ctx context.Context) string {
	m.sandboxProbe.Do(func() {
		try := m.sandboxTry
		if try == nil {
			try = m.trySandbox
		}
		if err := try(ctx); paddock.IsCode(err, paddock.CodeUnsupported) {
			m.sandboxWhy = "this daemon cannot confine a command here (" + paddock.ErrorMessage(err) + "); paddock doctor says why"
		}
	})
	return m.sandboxWhy
}

// trySandbox runs /bin/true in a sandbox of its own.
func (m *Manager) trySandbox(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "paddock-probe-")
	if err != nil {
		return nil // not the sandbox's to answer for
	}
	defer os.RemoveAll(dir)
	if m.SandboxUID != 0 {
		os.Chmod(dir, 0o755)
		os.Chown(dir, m.SandboxUID, m.SandboxUID)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, err = sandbox.Run(ctx, sandbox.Spec{Argv: []string{"/bin/true"}, Workspace: dir, UID: m.SandboxUID, GID: m.SandboxUID,
		Env: []string{"PATH=/usr/bin:/bin"}, Limits: sandbox.Limits{Wall: 20 * time.Second}})
	return err
}
