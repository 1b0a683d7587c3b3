package lifecycle

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
)

// policy returns a project's protected-path policy: its patterns, and the
// directories its git runs hooks from (core.hooksPath inside the project),
// protected like .git/hooks, because an agent's file there runs on the
// user's next commit. It fails closed: a hooks path that cannot be read
// refuses what needs the policy.
func (vw *views) policy(ctx context.Context, p *paddock.Project) (*confine.Policy, error) {
	pol := confine.DefaultPolicy()
	if p.Protected != nil {
		pol = &confine.Policy{Protected: p.Protected}
	}
	hooks, err := vw.hooksPaths(ctx, p.Root)
	if err != nil {
		return nil, internal("reading the project's hooks path failed", err)
	}
	pol.Hooks = hooks
	return pol, nil
}

// hooksTTL bounds how long a project's hooks paths are remembered: the
// config files git reads are watched, but not what they include.
const hooksTTL = 30 * time.Second

type cachedHooks struct {
	sig   string
	at    time.Time
	paths []string
}

// hooksCache remembers each project's hooks paths while the config files
// that set them stay as they were: a tool call asks every time.
type hooksCache struct {
	mu sync.Mutex
	m  map[string]cachedHooks
}

func (vw *views) hooksPaths(ctx context.Context, root string) ([]string, error) {
	sig := configSignature(root)
	vw.hooks.mu.Lock()
	c, ok := vw.hooks.m[root]
	vw.hooks.mu.Unlock()
	if ok && c.sig == sig && time.Since(c.at) < hooksTTL {
		return c.paths, nil
	}
	paths, err := vw.Git.HooksPaths(ctx, root)
	if err != nil {
		return nil, err
	}
	vw.hooks.mu.Lock()
	if vw.hooks.m == nil {
		vw.hooks.m = map[string]cachedHooks{}
	}
	vw.hooks.m[root] = cachedHooks{sig, time.Now(), paths}
	vw.hooks.mu.Unlock()
	return paths, nil
}

// configSignature is the size and time of every config file git reads for
// the project at root (but what they include).
func configSignature(root string) string {
	home := os.Getenv("HOME")
	xdg := os.Getenv("XDG_CONFIG_HOME")
	if xdg == "" && home != "" {
		xdg = filepath.Join(home, ".config")
	}
	var b strings.Builder
	for _, f := range []string{filepath.Join(root, ".git", "config"), filepath.Join(root, ".git", "config.worktree"),
		filepath.Join(home, ".gitconfig"), filepath.Join(xdg, "git", "config"), "/etc/gitconfig"} {
		if fi, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%s %d %d\n", f, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String()
}
