package broker

import (
	"slices"
	"strings"
)

// Protected variables. An allowed command is only the command a rule
// names while the variables it starts with are the ones the operator
// expected: BASH_ENV makes any bash run a file first, GIT_CONFIG_* give
// git an fsmonitor or a pager to run, GOFLAGS=-toolexec=… makes go vet run
// a program of the agent's, LD_PRELOAD loads its code into every program.
// A definition's env of "*" covers every name but these: a protected name
// is allowed only where the definition names it (NAME, or NAME=VALUE),
// and then its value still may not carry a flag the exec rule denies.
//
// The rule holds for every way a narrowed exec sets a variable: an
// assignment in the line (before a command, export, local, a for loop, …),
// an env NAME=VALUE word (env -S's included), xargs --process-slot-var,
// bash's {NAME}>FILE, and the exec request's own env. Where exec is not
// narrowed, the agent may run any command line, so "*" covers these
// names too: refusing them in the request alone would be a pretence.
//
// Names are compared without case: some programs read them so (npm reads
// npm_config_* in any case), and refusing more is the safe side. A group
// is a prefix or a suffix where the programs that read it add names over
// time (GIT_*, CARGO_*, *FLAGS): a new one is protected before it is known.

// protectedGroup is one reason, and the names it covers.
type protectedGroup struct {
	why      string
	names    []string
	prefixes []string
	suffixes []string
	// except are names of a prefix or suffix that select nothing to run
	// or read (who a commit is by, whether git may prompt).
	except []string
}

var protected = []protectedGroup{
	{why: "it decides which program a command name runs",
		names: []string{"PATH"}},
	{why: "the dynamic loader or the C library loads code or data from it",
		prefixes: []string{"LD_"},
		names:    []string{"GCONV_PATH", "GLIBC_TUNABLES", "HOSTALIASES", "LOCPATH", "NLSPATH", "MALLOC_TRACE"}},
	{why: "a shell reads it at start-up or evaluates it as code",
		names: []string{"ENV", "BASH_ENV", "IFS", "PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS",
			"CDPATH", "GLOBIGNORE", "BASH_XTRACEFD", "EXECIGNORE", "BASH_LOADABLES_PATH", "BASH_COMPAT", "INPUTRC",
			"HISTFILE", "ZDOTDIR", "FPATH", "SSH_CLIENT", "SSH2_CLIENT"},
		prefixes: []string{"BASH_FUNC_"}},
	{why: "it names a program another program runs",
		names: []string{"SHELL", "EDITOR", "VISUAL", "PAGER", "MANPAGER", "BROWSER", "LESSOPEN", "LESSCLOSE",
			"SSH_ASKPASS", "SUDO_ASKPASS"}},
	{why: "it says where programs read their configuration",
		names: []string{"HOME", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS"}},
	{why: "git reads configuration, hooks, programs or a repository from it",
		prefixes: []string{"GIT_"},
		except: []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
			"GIT_COMMITTER_DATE", "GIT_TERMINAL_PROMPT", "GIT_OPTIONAL_LOCKS", "GIT_MERGE_AUTOEDIT"}},
	{why: "a toolchain reads flags, a compiler or a wrapper to run from it",
		suffixes: []string{"FLAGS", "_OPTIONS", "_OPTS"},
		names: []string{"GOENV", "GOROOT", "GOTOOLCHAIN", "GOCACHEPROG", "GOAUTH", "CC", "CXX", "CPP", "FC", "AR", "AS", "LD",
			"NM", "RANLIB", "STRIP", "OBJCOPY", "MAKEFILES", "RUSTC", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER", "RUSTDOC",
			"NODE_PATH", "CLASSPATH", "JAVA_HOME"},
		prefixes: []string{"CGO_", "PKG_CONFIG", "CARGO_", "RUSTUP_", "NPM_CONFIG_", "BUNDLE_", "LUA_"}},
	{why: "an interpreter loads modules or runs code named in it",
		prefixes: []string{"PYTHON", "PERL", "RUBY"},
		except:   []string{"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONHASHSEED", "PYTHONUTF8"}},
}

// protectedWhy says why a variable is protected ("" if it is not).
func protectedWhy(name string) string {
	n := strings.ToUpper(name)
	for _, g := range protected {
		if slices.Contains(g.except, n) {
			continue
		}
		if slices.Contains(g.names, n) ||
			slices.ContainsFunc(g.prefixes, func(p string) bool { return strings.HasPrefix(n, p) }) ||
			slices.ContainsFunc(g.suffixes, func(s string) bool { return strings.HasSuffix(n, s) }) {
			return g.why
		}
	}
	return ""
}

// Protected reports whether a variable is protected: a definition's env
// of "*" does not cover it (see protected).
func Protected(name string) bool { return protectedWhy(name) != "" }

// envNamed: the definition names this variable itself (not by "*").
func envNamed(env []string, name string) bool {
	for _, e := range env {
		if n, _, _ := strings.Cut(e, "="); n == name {
			return true
		}
	}
	return false
}

// envCheck decides one variable a call sets: env names it, or env has
// "*" and (where exec is narrowed) the name is not protected. It returns
// why not, or "".
func envCheck(env []string, name string, narrowed bool) string {
	if envNamed(env, name) {
		return ""
	}
	if !slices.Contains(env, "*") {
		return "its env does not name it"
	}
	if why := protectedWhy(name); narrowed && why != "" {
		return "it is protected (" + why + "): \"*\" does not cover it, only naming it in env does"
	}
	return ""
}
