package gitx

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// HooksPaths lists the directories inside the work tree root whose hooks
// the user's git runs there: every value of core.hooksPath in the config
// git reads for root (system, global, the repository's own and its
// worktree's, with their includes), read with git's config reader and
// nothing else (`git config --get-all core.hooksPath`; reading config runs
// nothing). A relative value is relative to root, as git takes it; one
// outside root is left out (no agent writes there). Paths are
// slash-separated and relative to root ("." is root itself).
func (g *Git) HooksPaths(ctx context.Context, root string) ([]string, error) {
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return nil, nil // no project there: no hooks of it run
	}
	at := repoAt(root)
	cmd, dctx, cancel := g.command(ctx, at, nil, []string{"config", "-z", "--show-scope", "--type=path", "--get-all", "core.hooksPath"})
	defer cancel()
	// The user's config, which the runner otherwise keeps out: it is
	// where a hooks path is often set, and what the user's git will read.
	var kept []string
	for _, kv := range cmd.Env {
		if !strings.HasPrefix(kv, "GIT_CONFIG_NOSYSTEM=") && !strings.HasPrefix(kv, "GIT_CONFIG_GLOBAL=") {
			kept = append(kept, kv)
		}
	}
	for _, k := range []string{"HOME", "XDG_CONFIG_HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			kept = append(kept, k+"="+v)
		}
	}
	cmd.Env = kept
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case err != nil && dctx.Err() != nil && ctx.Err() == nil:
		return nil, g.timeoutError(cmd.Args[len(hardening)+1:])
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return nil, nil // not set anywhere
	case err != nil:
		var stderr string
		if ee != nil {
			stderr = string(ee.Stderr)
		}
		return nil, &CommandError{Args: cmd.Args[len(hardening)+1:], Stderr: stderr, Err: err}
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		real = root
	}
	var paths []string
	f := strings.Split(string(out), "\x00")
	for i := 0; i+1 < len(f); i += 2 {
		scope, value := f[i], f[i+1]
		if scope == "command" || value == "" { // the runner's own /dev/null
			continue
		}
		if p, ok := inside(root, real, value); ok && !contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// inside returns value (a path, relative to root or absolute) relative to
// root, if it lies there.
func inside(root, real, value string) (string, bool) {
	if !filepath.IsAbs(value) {
		value = filepath.Join(root, value)
	}
	value = filepath.Clean(value)
	for _, r := range []string{root, real} {
		if rel, err := filepath.Rel(r, value); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return filepath.ToSlash(rel), true
		}
	}
	return "", false
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// fileConfig is the value of key in the config file file alone (no
// includes), as git reads it; "" when it is not set. Answers are kept
// while the file's size and modification time stay the same.
func (g *Git) fileConfig(ctx context.Context, file, key string) string {
	fi, err := os.Stat(file)
	if err != nil {
		return ""
	}
	ck := configKey{file, key}
	if c, ok := configCache.Load(ck); ok {
		if c := c.(configEntry); c.size == fi.Size() && c.mod.Equal(fi.ModTime()) {
			return c.value
		}
	}
	v, err := g.line(ctx, gitDirAt(filepath.Dir(file)), "config", "--file", file, "--get", key)
	if err != nil {
		v = ""
	}
	configCache.Store(ck, configEntry{fi.Size(), fi.ModTime(), v})
	return v
}

type configKey struct{ file, key string }

type configEntry struct {
	size  int64
	mod   time.Time
	value string
}

var configCache sync.Map
