// Package paddockcli is paddock's CLI: the command tree, every client
// verb (one file each), autostart, the exit codes, and the hand-over to
// paddockd (handover.go). Two binaries run it: paddock (cmd/paddock), the
// CLI alone, which links only the client and what the verbs need and
// hands paddockd what it does not hold; and paddockd (cmd/paddockd), which
// adds the daemon's own verbs to the same tree (Invocation.Daemon).
package paddockcli

import (
	"context"
	"io"
	"runtime/debug"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/spf13/cobra"
)

// What this package gives the daemon's verbs, which live in cmd/paddockd
// so that the CLI (cmd/paddock) links none of what they need: one
// invocation of the whole tree (Invocation), what a verb sees of it
// (Call), and the helpers both kinds of verb share.

// DaemonVerbs builds paddockd's own verbs (daemonVerbs' names: serve,
// doctor, mcp, verify-bundle, import) for a call.
type DaemonVerbs map[string]func(Call) *cobra.Command

// Invocation is one call of the CLI: its streams, its environment and,
// in paddockd, the daemon's verbs. Tests build one and call Run, so every
// verb runs the same code as a user's.
type Invocation struct {
	Stdin          io.Reader // nil: none (tests); exec and tool may read it
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Exe is the binary to start a daemon with (autostart); if empty,
	// this one in paddockd, paddockd beside it in the CLI.
	Exe    string
	Daemon DaemonVerbs // nil: the CLI, which hands those verbs to paddockd
}

// Run runs the command line args and returns its exit code.
func (inv Invocation) Run(ctx context.Context, args []string) int {
	a := &app{stdin: inv.Stdin, stdout: inv.Stdout, stderr: inv.Stderr, getenv: inv.Getenv, exe: inv.Exe, daemon: inv.Daemon}
	return a.main(ctx, args)
}

// Command is the invocation's whole command tree, every verb built (the
// daemon's too in paddockd): what docs/CLI.md's reference is made from.
func (inv Invocation) Command() *cobra.Command {
	a := &app{stdin: inv.Stdin, stdout: inv.Stdout, stderr: inv.Stderr, getenv: inv.Getenv, exe: inv.Exe, daemon: inv.Daemon}
	return rootCmd(a)
}

// Call is what one of the daemon's verbs sees of its invocation: the
// streams, the environment and the root's flags (--home, --addr), once
// the command line is parsed.
type Call struct{ a *app }

func (c Call) Stdin() io.Reader          { return c.a.stdin }
func (c Call) Stdout() io.Writer         { return c.a.stdout }
func (c Call) Stderr() io.Writer         { return c.a.stderr }
func (c Call) Getenv(key string) string  { return c.a.getenv(key) }
func (c Call) StateDir() (string, error) { return c.a.stateDir() }
func (c Call) Output(asJSON bool, v any, human func(io.Writer)) error {
	return c.a.output(asJSON, v, human)
}

// Client is a client for the daemon, as the client verbs get theirs
// (started if none answers, unless autostart is off).
func (c Call) Client(ctx context.Context) (*client.Client, error) { return c.a.client(ctx) }

// DaemonStatus is the status of the daemon of the state directory, nil if
// none answers.
func (c Call) DaemonStatus(ctx context.Context) *paddock.DaemonStatus { return c.a.daemonStatus(ctx) }

// UsageError is a command line that makes no sense: exit code 2.
func UsageError(msg string) error { return usageError{msg} }

// ExactArgs is cobra.ExactArgs with an error that names the verb's usage.
func ExactArgs(n int) cobra.PositionalArgs { return exactArgs(n) }

// PrepareHome creates the state directory home if need be, private.
func PrepareHome(home string) error { return prepareHome(home) }

// SocketPath is the daemon's socket in the state directory home.
func SocketPath(home string) string { return socketPath(home) }

// TokenPath is the file of the daemon's token in the state directory home.
func TokenPath(home string) string { return tokenPath(home) }

// VersionString is this binary's version: Version, else the module's or
// the VCS revision it was built from.
func VersionString() string { return version() }

// BuildSetting is the value of a build's setting (vcs.revision, -tags…),
// "" if it has none.
func BuildSetting(bi *debug.BuildInfo, key string) string { return buildSetting(bi, key) }

// IsCLIBuild reports whether bi is the CLI's build (cmd/paddock), the
// client verbs alone, and not paddockd's.
func IsCLIBuild(bi *debug.BuildInfo) bool { return cliBuild(bi) }

// DaemonName is paddockd's name, the daemon's binary beside the CLI.
const DaemonName = daemonName

// Exit codes (see exitCode and `paddock --help`).
const (
	ExitOK          = exitOK
	ExitInternal    = exitInternal
	ExitUsage       = exitUsage
	ExitNotFound    = exitNotFound
	ExitConflict    = exitConflict
	ExitBusy        = exitBusy
	ExitForbidden   = exitForbidden
	ExitUnsupported = exitUnsupported
	ExitUnreachable = exitUnreachable
	ExitAttribution = exitAttribution
	ExitNodeLost    = exitNodeLost

	// paddock exec's own, beside the command's (exec.go).
	ExitExecFailed   = execFailed
	ExitExecNotFound = execNotFound
)

// VerbNames are the CLI's verbs, in the order `paddock --help` shows them,
// paddockd's own included.
func VerbNames() []string {
	var names []string
	for _, v := range (&app{getenv: func(string) string { return "" }}).verbs() {
		names = append(names, v.name)
	}
	return names
}

// CommandMounts are the directories a run must show for the command name
// (found on pathEnv from dir, as paddock run finds an agent) to start.
func CommandMounts(name, pathEnv, dir string) ([]string, error) {
	f, err := findCommand(name, pathEnv, dir)
	if err != nil {
		return nil, err
	}
	return f.Mounts, nil
}
