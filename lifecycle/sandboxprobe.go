package lifecycle

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/sandbox"
)

// sandboxProbe says why this daemon can run no command confined, or ""
// where it can: a command is tried once, in a sandbox of its own (what
// `paddock doctor` proves), the first time it is asked. Where it cannot,
// exec and verify are not offered: capabilities say what holds, rather
// than offer tools whose every call is refused (#29 item 6).
type sandboxProbe struct {
	once sync.Once
	why  string
	// try is a test's stand-in for trySandbox.
	try func(context.Context) error
}

// unavailable is the probe's answer for commands run as uid.
func (p *sandboxProbe) unavailable(ctx context.Context, uid int) string {
	p.once.Do(func() {
		try := p.try
		if try == nil {
			try = func(ctx context.Context) error { return trySandbox(ctx, uid) }
		}
		if err := try(ctx); paddock.IsCode(err, paddock.CodeUnsupported) {
			p.why = "this daemon cannot confine a command here (" + paddock.ErrorMessage(err) + "); paddock doctor says why"
		}
	})
	return p.why
}

// trySandbox runs /bin/true as uid in a sandbox of its own.
func trySandbox(ctx context.Context, uid int) error {
	dir, err := os.MkdirTemp("", "paddock-probe-")
	if err != nil {
		return nil // not the sandbox's to answer for
	}
	defer os.RemoveAll(dir)
	if uid != 0 {
		os.Chmod(dir, 0o755)
		os.Chown(dir, uid, uid)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, err = sandbox.Run(ctx, sandbox.Spec{Argv: []string{"/bin/true"}, Workspace: dir, UID: uid, GID: uid,
		Env: []string{"PATH=/usr/bin:/bin"}, Limits: sandbox.Limits{Wall: 20 * time.Second}})
	return err
}
