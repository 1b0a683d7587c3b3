package paddockcli

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// daemonVerbs are the verbs the CLI (cmd/paddock) does not hold: paddockd
// (cmd/paddockd) runs them, with the commands it gives in
// Invocation.Daemon. A command line that names no verb (help, completion,
// an unknown verb, the sandbox's re-executions) goes to paddockd too, whose
// tree is whole.
var daemonVerbs = map[string]bool{
	"serve":  true, // the daemon
	"doctor": true, // probes the kernel and starts a sandbox when no daemon answers
	"mcp":    true, // the MCP SDK and mcpserver
	// A bundle's signature and key lines (bundle: tar, ed25519, x509's
	// PEM); offline and rare, unlike the verbs an agent's loop calls.
	"verify-bundle": true,
	"import":        true,
}

// HandsOver reports whether the CLI hands the command line args to
// paddockd (ExecDaemon) rather than running it itself: args name one of
// the daemon's verbs, or no verb.
func HandsOver(args []string) bool {
	a := &app{getenv: os.Getenv}
	v, ok := a.invokedVerb(args)
	return !ok || daemonVerbs[v.name]
}

// daemonExecutable is the binary that serves: this one in paddockd (it
// holds the daemon's verbs), else paddockd beside this binary
// (os.Executable resolves the link a user may have put on $PATH).
func (a *app) daemonExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil || a.daemon != nil {
		return exe, err
	}
	return filepath.Join(filepath.Dir(exe), daemonName), nil
}

// ExecDaemon replaces this process by paddockd, beside the CLI, with args
// and the same environment and open files: the same process, output and
// exit code. It returns only when that cannot be done, with the exit code
// to end with.
func ExecDaemon(args []string) int {
	exe, err := (&app{}).daemonExecutable()
	if err == nil {
		err = syscall.Exec(exe, append([]string{exe}, args...), os.Environ())
		err = fmt.Errorf("%s: %w", exe, err)
	}
	fmt.Fprintf(os.Stderr, "paddock: this command runs in %s, the daemon's binary, which should be beside this one: %v\n  build both as README.md says\n", daemonName, err)
	return exitInternal
}

// The commands of daemonVerbs: paddockd's own (Invocation.Daemon), else
// ones that hand their command lines to paddockd. The CLI's main hands
// those lines over before any command is built, and so would these if one
// were run.
func serveCmd(a *app) *cobra.Command        { return daemonCmd(a, "serve") }
func doctorCmd(a *app) *cobra.Command       { return daemonCmd(a, "doctor") }
func mcpCmd(a *app) *cobra.Command          { return daemonCmd(a, "mcp") }
func verifyBundleCmd(a *app) *cobra.Command { return daemonCmd(a, "verify-bundle") }
func importCmd(a *app) *cobra.Command       { return daemonCmd(a, "import") }

func daemonCmd(a *app, name string) *cobra.Command {
	if build := a.daemon[name]; build != nil {
		return build(Call{a})
	}
	return &cobra.Command{
		Use:                name,
		Short:              "(run by " + daemonName + ")",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return &execError{code: ExecDaemon(os.Args[1:])}
		},
	}
}
