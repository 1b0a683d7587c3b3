package lifecycle

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/agent"
	"github.com/paddock-dev/paddock/sandbox"
)

// Mounts: host directories a run's view shows read-only at their own
// paths, so that an agent installed outside the system directories (a
// user's npm prefix, nvm, Claude Code's ~/.local/bin, a project's
// node_modules) starts in its run (#30 item 2). The operator names them,
// in a definition or at create (paddock run finds them for its command);
// the daemon checks each against what it must never show a run.

// credentialNames are what a directory holding a person's credentials
// has in it: a home directory, which a mount must never be.
var credentialNames = []string{".ssh", ".gnupg", ".aws", ".kube", ".docker", ".netrc", ".git-credentials", ".password-store"}

// hostMounts checks run mounts against the host: each an existing
// directory reached without a symbolic link, holding no credentials,
// neither holding nor inside the daemon's state (its secrets and tokens
// among it), and not the project's checkout or above it, nor its .git
// (the run sees its own copy of the project's files, never the checkout).
func hostMounts(mounts []string, state []string, projectRoot string) error {
	if err := agent.CheckMountPaths(mounts); err != nil {
		return err
	}
	within := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	for _, m := range mounts {
		// What it would show first, whether it exists or not.
		for _, s := range state {
			if s != "" && (within(s, m) || within(m, s)) {
				return paddock.Errorf(paddock.CodeForbidden, "mount %s: it would show the daemon's state (%s), its secrets and tokens among it, to the run; name a narrower directory", m, s)
			}
		}
		if projectRoot != "" && (within(projectRoot, m) || within(m, filepath.Join(projectRoot, ".git"))) {
			return paddock.Errorf(paddock.CodeForbidden, "mount %s: it would show the project's checkout (or its .git) to the run, which sees its own copy", m)
		}
		real, err := filepath.EvalSymlinks(m)
		if err != nil {
			return paddock.Errorf(paddock.CodeBadRequest, "mount %s: %v", m, err)
		}
		fi, err := os.Stat(real)
		switch {
		case err != nil:
			return paddock.Errorf(paddock.CodeBadRequest, "mount %s: %v", m, err)
		case !fi.IsDir():
			return paddock.Errorf(paddock.CodeBadRequest, "mount %s: not a directory", m)
		case real != m:
			return paddock.Errorf(paddock.CodeBadRequest, "mount %s: it is reached through a symbolic link; name %s", m, real)
		}
		for _, c := range credentialNames {
			if _, err := os.Lstat(filepath.Join(m, c)); err == nil {
				return paddock.Errorf(paddock.CodeForbidden, "mount %s: it holds %s, a person's credentials (a home directory?); name the directory the program lives in", m, c)
			}
		}
	}
	return nil
}

// stateDirs are the daemon's own directories: its state directory (the
// one its workspaces and artifacts are in) and those.
func stateDirs(workspaces, artifacts string) []string {
	dirs := []string{workspaces, artifacts}
	if home := filepath.Dir(workspaces); home != "/" && home != "." {
		dirs = append(dirs, home)
	}
	return dirs
}

// mountBinds are run r's mounts as the sandbox shows them: read-only, at
// their own paths.
func mountBinds(def *paddock.AgentDefinition) []sandbox.Bind {
	var out []sandbox.Bind
	for _, m := range def.Mounts {
		out = append(out, sandbox.Bind{Source: m, Target: m, ReadOnly: true})
	}
	return out
}

// mountPath puts the mounted bin directories first on base's PATH.
func mountPath(def *paddock.AgentDefinition, base []string) []string {
	var bins []string
	for _, m := range def.Mounts {
		if b := path.Base(m); b == "bin" || b == ".bin" {
			bins = append(bins, m)
		}
	}
	if len(bins) == 0 {
		return nil
	}
	i := slices.IndexFunc(base, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") })
	if i < 0 {
		return []string{"PATH=" + strings.Join(bins, ":")}
	}
	return []string{"PATH=" + strings.Join(bins, ":") + ":" + strings.TrimPrefix(base[i], "PATH=")}
}

// withMounts is def with more mounts, deduplicated; def itself is kept.
func withMounts(def *paddock.AgentDefinition, more []string) *paddock.AgentDefinition {
	if len(more) == 0 {
		return def
	}
	d := *def
	d.Mounts = appendNew(def.Mounts, more)
	return &d
}

// appendNew is a copy of list with each of more that it lacks added.
func appendNew[T comparable](list, more []T) []T {
	out := slices.Clone(list)
	for _, x := range more {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
