package gitx

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// UserConfig locates a user's global git configuration, for reading the
// identity the user commits with (see UserIdentity).
type UserConfig struct {
	// Home is the user's home directory: git expands ~ in include paths
	// and includeIf conditions against it.
	Home string
	// Global lists the user's global configuration files, the one whose
	// values win first: ~/.gitconfig, then $XDG_CONFIG_HOME/git/config, as
	// git reads them (or the one file GIT_CONFIG_GLOBAL names). Missing
	// files are skipped.
	Global []string
}

// UserConfigFor returns the global configuration git would read for a user
// with this home, $XDG_CONFIG_HOME and $GIT_CONFIG_GLOBAL (either may be "").
func UserConfigFor(home, xdgConfigHome, gitConfigGlobal string) UserConfig {
	if gitConfigGlobal != "" {
		return UserConfig{Home: home, Global: []string{gitConfigGlobal}}
	}
	if xdgConfigHome == "" && home != "" {
		xdgConfigHome = filepath.Join(home, ".config")
	}
	var files []string
	if home != "" {
		files = append(files, filepath.Join(home, ".gitconfig"))
	}
	if xdgConfigHome != "" {
		files = append(files, filepath.Join(xdgConfigHome, "git", "config"))
	}
	return UserConfig{Home: home, Global: files}
}

// identityKeys are the only keys UserIdentity asks git for.
var identityKeys = [...]string{"user.name", "user.email"}

// UserIdentity returns user.name and user.email as git would read them to
// author a commit in the repository at dir: from the repository's local
// configuration, else from the user's global one; the system configuration
// is not read (the runner's GIT_CONFIG_NOSYSTEM). A key set nowhere is "".
//
// It runs `git config --get KEY` for exactly those two keys, through the
// hardened runner, with GIT_CONFIG_GLOBAL naming one global file at a time
// in u's order: reading configuration executes nothing, and no other key's
// value is ever asked for or returned.
//
// Includes are followed (no --no-includes), as git follows them when the
// user commits: an identity often lives in an included file, chosen by an
// includeIf "gitdir:" condition (a work email for the repositories under
// ~/work), and ignoring includes would author the commit as someone the
// user is not in that repository. An include only makes git read another
// file; the files are the user's own and the operator's repository's, never
// a workspace's, and git runs nothing of what they say for `git config`.
// HOME is passed to that one command so that git can expand ~ in them.
func (g *Git) UserIdentity(ctx context.Context, dir string, u UserConfig) (Identity, error) {
	globals := []string{}
	for _, f := range u.Global {
		if _, err := os.Stat(f); err == nil {
			globals = append(globals, f)
		}
	}
	if len(globals) == 0 {
		globals = append(globals, os.DevNull)
	}
	var got [len(identityKeys)]string
	for i, key := range identityKeys {
		// The local configuration is read on every pass and wins over the
		// global file; the first global file that sets the key wins over
		// those after it.
		for _, global := range globals {
			extra := []string{"GIT_CONFIG_GLOBAL=" + global}
			if u.Home != "" {
				extra = append(extra, "HOME="+u.Home)
			}
			v, found, err := g.configGet(ctx, dir, extra, key)
			if err != nil {
				return Identity{}, err
			}
			if found {
				got[i] = v
				break
			}
		}
	}
	return Identity{Name: got[0], Email: got[1]}, nil
}

// configGet runs `git config --get key`; found is false when no file sets it
// (git's exit status 1).
func (g *Git) configGet(ctx context.Context, dir string, extra []string, key string) (string, bool, error) {
	out, err := g.runInput(ctx, repoAt(dir), extra, nil, "config", "--get", key)
	var ce *CommandError
	var ee *exec.ExitError
	if errors.As(err, &ce) && errors.As(ce.Err, &ee) && ee.ExitCode() == 1 {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return strings.TrimRight(string(out), "\n"), true, nil
}
