//go:build paddock_cli

// Built with -tags paddock_cli, this package is the CLI alone: the
// `paddock` a user types. Go runs every linked package's initialisation,
// and the runtime sets up every linked type, before main, whatever the
// verb; the whole binary (paddockd) links the daemon's dependencies
// (SQLite, pgx, the MCP SDK, Landlock and seccomp, the HTTP API and the
// review page) and pays for them at every start. This build links the
// client verbs and their client only, and hands paddockd, beside it
// (README builds both), whatever else it is asked for, by exec'ing it
// with the same arguments, environment and open files: the same process,
// output and exit code (see daemonVerbs). TestClientLinksNoDaemon holds
// it to that.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// daemonVerbs are the verbs this build does not hold: paddockd runs them.
// A command line that names no verb (help, completion, an unknown verb,
// the sandbox's re-executions) goes to paddockd too, whose tree is whole.
var daemonVerbs = map[string]bool{
	"serve":  true, // the daemon
	"doctor": true, // probes the kernel and starts a sandbox when no daemon answers
	"mcp":    true, // the MCP SDK and mcpserver
	// A bundle's signature and key lines (bundle: tar, ed25519, x509's
	// PEM); offline and rare, unlike the verbs an agent's loop calls.
	"verify-bundle": true,
	"import":        true,
}

func main() {
	args := os.Args[1:]
	a := &app{getenv: os.Getenv}
	if v, ok := a.invokedVerb(args); !ok || daemonVerbs[v.name] {
		os.Exit(execDaemon(args))
	}
	os.Exit(Main(context.Background(), args, os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// daemonExecutable is paddockd, beside this binary (os.Executable
// resolves the link a user may have put on $PATH).
func daemonExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(exe), daemonName), nil
}

// execDaemon replaces this process by paddockd with args; it returns only
// when that cannot be done, with the exit code to end with.
func execDaemon(args []string) int {
	exe, err := daemonExecutable()
	if err == nil {
		err = syscall.Exec(exe, append([]string{exe}, args...), os.Environ())
		err = fmt.Errorf("%s: %w", exe, err)
	}
	fmt.Fprintf(os.Stderr, "paddock: this command runs in %s, the daemon's binary, which should be beside this one: %v\n  build both as README.md says\n", daemonName, err)
	return exitInternal
}

// The commands of daemonVerbs: main hands their command lines to paddockd
// before any command is built, and so would they if one were run.
func (a *app) serveCmd() *cobra.Command        { return daemonCmd("serve") }
func (a *app) doctorCmd() *cobra.Command       { return daemonCmd("doctor") }
func (a *app) mcpCmd() *cobra.Command          { return daemonCmd("mcp") }
func (a *app) verifyBundleCmd() *cobra.Command { return daemonCmd("verify-bundle") }
func (a *app) importCmd() *cobra.Command       { return daemonCmd("import") }

func daemonCmd(name string) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Short:              "(run by " + daemonName + ")",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return &execError{code: execDaemon(os.Args[1:])}
		},
	}
}
