package paddockcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// app is one invocation of the CLI: its streams, environment and global flags.
// Tests build one and call Main, so every verb runs the same code as a user's.
type app struct {
	stdin          io.Reader // nil: none (tests); exec and tool may read it
	stdout, stderr io.Writer
	getenv         func(string) string
	// exe is the paddock binary to start a daemon with; daemonExecutable
	// if empty.
	exe string
	// daemon builds the daemon's verbs in paddockd (Invocation.Daemon);
	// nil in the CLI, which hands them to paddockd.
	daemon DaemonVerbs

	home string // --home
	addr string // --addr: talk to a daemon on loopback TCP instead of the socket
}

// daemonName is the whole binary's name (cmd/paddockd) as README installs
// it, beside the CLI's (paddock, cmd/paddock: the client verbs alone).
const daemonName = "paddockd"

// Exit codes. One table, from error codes; `paddock --help` prints it.
const (
	exitOK          = 0
	exitInternal    = 1
	exitUsage       = 2 // bad_request, or a command line cobra could not parse
	exitNotFound    = 3
	exitConflict    = 4 // conflict, not_bootstrapped
	exitBusy        = 5
	exitForbidden   = 6 // forbidden, run_mismatch, unauthorized
	exitUnsupported = 7
	exitUnreachable = 8 // no daemon answered and none could be started
	exitAttribution = 9
	exitNodeLost    = 10 // node_lost
)

const exitCodesHelp = `Exit codes:
  0  success
  1  internal error (details in the daemon log)
  2  bad input or usage (bad_request, too_large)
  3  not found
  4  conflict: the object's state forbids it (a retained workspace, an illegal transition)
  5  busy: the project lock or the daemon is held by someone else
  6  forbidden (or unauthorized: no token, or one the daemon does not know)
  7  unsupported on this machine
  8  no daemon could be reached or started
  9  attribution_leak
  10 node_lost: the node that holds the run is lost (paddock adopt RUN)`

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	if client.Unreachable(err) {
		return exitUnreachable
	}
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	var pe *paddock.Error
	if !errors.As(err, &pe) {
		return exitInternal
	}
	switch pe.Code {
	case paddock.CodeBadRequest, paddock.CodeTooLarge:
		return exitUsage
	case paddock.CodeNotFound:
		return exitNotFound
	case paddock.CodeConflict, paddock.CodeNotBootstrapped:
		return exitConflict
	case paddock.CodeBusy:
		return exitBusy
	case paddock.CodeForbidden, paddock.CodeRunMismatch, paddock.CodeUnauthorized:
		return exitForbidden
	case paddock.CodeUnsupported:
		return exitUnsupported
	case paddock.CodeAttributionLeak:
		return exitAttribution
	case paddock.CodeNodeLost:
		return exitNodeLost
	}
	return exitInternal
}

// usageError is a command line that makes no sense.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// Main runs the CLI and returns its exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	return a.main(ctx, args)
}

func (a *app) main(ctx context.Context, args []string) int {
	root := rootCmd(a, args...)
	root.SetArgs(args)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *execError
	if errors.As(err, &ee) {
		if ee.err != nil {
			a.printError(ee.err)
		}
		return ee.code
	}
	if strings.HasPrefix(err.Error(), "unknown command") || strings.HasPrefix(err.Error(), "unknown flag") ||
		strings.Contains(err.Error(), "accepts ") || strings.Contains(err.Error(), "requires at least") ||
		strings.HasPrefix(err.Error(), "invalid argument") || strings.Contains(err.Error(), "flag needs an argument") ||
		strings.HasPrefix(err.Error(), "if any flags in the group") || strings.HasPrefix(err.Error(), "required flag") {
		err = usageError{err.Error()}
	}
	a.printError(err)
	return exitCode(err)
}

func (a *app) printError(err error) {
	var pe *paddock.Error
	switch {
	case client.Unreachable(err) && a.getenv(paddock.EnvPrefix+"NO_AUTOSTART") == "1":
		fmt.Fprintf(a.stderr, "paddock: %v\n  start one with `paddock serve`, or unset PADDOCK_NO_AUTOSTART to let the CLI start it\n", err)
	case client.Unreachable(err):
		// Autostart was on: the daemon stopped during the call, or is
		// one on TCP, which the CLI never starts.
		fmt.Fprintf(a.stderr, "paddock: %v\n  start one with `paddock serve`\n", err)
	case errors.As(err, &pe):
		// A message can name an agent's file: shown escaped.
		fmt.Fprintf(a.stderr, "paddock: %s\n", termsafe.Text(pe.Message))
		if pe.Rule != "" {
			fmt.Fprintf(a.stderr, "  rule: %s\n", termsafe.Text(string(pe.Rule)))
		}
		if hint, ok := pe.Details["hint"].(string); ok {
			fmt.Fprintf(a.stderr, "  hint: %s\n", termsafe.Text(hint))
		}
	default:
		fmt.Fprintf(a.stderr, "paddock: %s\n", termsafe.Text(err.Error()))
	}
}

// verb is one of the root command's verbs and the function that builds it.
type verb struct {
	name  string
	build func(*app) *cobra.Command
}

// verbs lists every verb of the CLI, in the order `paddock --help` shows
// them. A new verb goes here; TestVerbNames holds each name to the
// command its function builds.
func (a *app) verbs() []verb {
	return []verb{
		{"serve", serveCmd}, {"project", projectCmd}, {"create", createCmd}, {"ls", lsCmd}, {"show", showCmd},
		{"retain", retainCmd}, {"reject", rejectCmd}, {"rm", rmCmd}, {"checkpoint", checkpointCmd}, {"resume", resumeCmd},
		{"events", eventsCmd}, {"gc", gcCmd}, {"version", versionCmd}, {"doctor", doctorCmd},
		{"tool", toolCmd}, {"tools", toolsCmd}, {"inbox", inboxCmd}, {"exec", execCmd},
		{"diff", diffCmd}, {"submit", submitCmd}, {"approve", approveCmd}, {"apply", applyCmd}, {"undo", undoCmd},
		{"fake-agent", fakeAgentCmd}, {"mcp", mcpCmd},
		{"agent", agentCmd}, {"capabilities", capabilitiesCmd}, {"requests", requestsCmd}, {"grant", grantCmd}, {"deny", denyCmd},
		{"verify", verifyCmd}, {"manifest", manifestCmd}, {"run", runCmd},
		{"review", reviewCmd}, {"flow", flowCmd}, {"menu", menuCmd}, {"ui", uiCmd},
		{"bundle", bundleCmd}, {"verify-bundle", verifyBundleCmd}, {"import", importCmd}, {"queue", queueCmd}, {"pick", pickCmd},
		{"fork", forkCmd}, {"compare", compareCmd}, {"nodes", nodesCmd}, {"adopt", adoptCmd},
		{"principal", principalCmd}, {"token", tokenCmd}, {"whoami", whoamiCmd},
	}
}

// invokedVerb is the verb args run, if they name one of verbs after
// nothing but the root's own flags; otherwise (help, completion, an
// unknown verb, any other flag first) it returns false and the whole tree
// is needed to answer as cobra would.
func (a *app) invokedVerb(args []string) (verb, bool) {
	for i := 0; i < len(args); i++ {
		switch s := args[i]; {
		case s == "--home" || s == "--addr":
			i++
		case strings.HasPrefix(s, "--home=") || strings.HasPrefix(s, "--addr="):
		case strings.HasPrefix(s, "-"):
			return verb{}, false
		default:
			for _, v := range a.verbs() {
				if v.name == s {
					return v, true
				}
			}
			return verb{}, false
		}
	}
	return verb{}, false
}

// rootCmd builds the command tree args need. Building every verb's
// command, flags and help costs about 0.2 ms and 130 KB, which every CLI
// call would pay at start (see bench/startup); a call that names its verb
// gets only that verb, and the tree, without the completion command it
// cannot be running, resolves and parses its arguments as the full one
// would. With no args, the whole tree.
func rootCmd(a *app, args ...string) *cobra.Command {
	root := &cobra.Command{
		Use:   "paddock",
		Short: "A bounded place for AI coding agents to work",
		Long: `paddock gives AI coding agents a bounded place to work: a disposable workspace
per run, and a change set that reaches the real repository only after approval.

Runs are the primary object and get the short verbs (create, ls, show, retain,
reject, rm, events, tool, inbox); projects are a noun (paddock project
add|ls|rm|unlock).
The CLI talks to the daemon (paddock serve) over a unix socket in the state
directory, and starts one in the background when none answers, unless
PADDOCK_NO_AUTOSTART=1.

State directory: --home, else $PADDOCK_HOME, else $XDG_STATE_HOME/paddock,
else ~/.local/state/paddock.

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&a.home, "home", "", "state directory (default $PADDOCK_HOME or the XDG state directory)")
	root.PersistentFlags().StringVar(&a.addr, "addr", "", "talk to a daemon on this loopback TCP address instead of the socket (default $PADDOCK_ADDR)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err.Error()} })
	if v, ok := a.invokedVerb(args); ok {
		root.AddCommand(v.build(a))
		root.CompletionOptions.DisableDefaultCmd = true
		return root
	}
	for _, v := range a.verbs() {
		root.AddCommand(v.build(a))
	}
	return root
}

// stateDir resolves the state directory.
func (a *app) stateDir() (string, error) {
	dir := a.home
	if dir == "" {
		dir = a.getenv(paddock.EnvPrefix + "HOME")
	}
	if dir == "" {
		if x := a.getenv("XDG_STATE_HOME"); x != "" {
			dir = filepath.Join(x, "paddock")
		} else if h := a.getenv("HOME"); h != "" {
			dir = filepath.Join(h, ".local", "state", "paddock")
		} else {
			return "", usageError{"no state directory: set PADDOCK_HOME or HOME"}
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", usageError{fmt.Sprintf("state directory %q: %v", dir, err)}
	}
	return abs, nil
}

// Where a run's commands find their own API (lifecycle.EnvSocket and
// lifecycle.SocketInView, which the CLI does not link: TestRunAPINames
// holds them equal).
const (
	envSocket    = paddock.EnvPrefix + "SOCKET"
	socketInView = "/run/paddock/api/paddock.sock"
)

func socketPath(home string) string { return filepath.Join(home, "paddock.sock") }
func tokenPath(home string) string  { return filepath.Join(home, "token") }

// client returns a client for the daemon, starting one on the socket if none
// answers and autostart is allowed.
func (a *app) client(ctx context.Context) (*client.Client, error) {
	home, err := a.stateDir()
	if err != nil {
		return nil, err
	}
	addr := a.addr
	if addr == "" {
		addr = a.getenv(paddock.EnvPrefix + "ADDR")
	}
	if addr != "" {
		if tok := a.getenv(paddock.EnvPrefix + "TOKEN"); tok != "" {
			// A principal's token (paddock token create): its role, not
			// the operator's.
			return client.TCP(addr, tok), nil
		}
		tok, err := os.ReadFile(tokenPath(home))
		if err != nil {
			return nil, usageError{fmt.Sprintf("talking to %s needs the token in %s: %v", addr, tokenPath(home), err)}
		}
		return client.TCP(addr, strings.TrimSpace(string(tok))), nil
	}
	if sock := a.runSocket(); sock != "" {
		// Inside a run: its own socket, which the daemon serves; never a
		// daemon of our own.
		return client.Unix(sock).OnUnreachable(func(_ context.Context, err error) error {
			return fmt.Errorf("the API socket %s ($%s: a run's own, or the daemon's shared socket) does not answer: %w", sock, envSocket, err)
		}), nil
	}
	// The daemon is reached by the verb's first request; a daemon is
	// started then if none answers. (A request of its own before every
	// call would cost each call a round trip.)
	c := client.Unix(socketPath(home))
	if a.getenv(paddock.EnvPrefix+"NO_AUTOSTART") == "1" {
		return c, nil
	}
	return c.OnUnreachable(func(ctx context.Context, _ error) error {
		return a.autostart(ctx, home, c)
	}), nil
}

// runSocket is the run's own API socket when the CLI runs inside a run,
// else "". A state directory named on the command line or in the
// environment wins over a run's socket: an operator's stray
// $PADDOCK_SOCKET never sends its verbs elsewhere.
func (a *app) runSocket() string {
	if a.home != "" || a.getenv(paddock.EnvPrefix+"HOME") != "" {
		return ""
	}
	if sock := a.getenv(envSocket); sock != "" {
		return sock
	}
	// Inside a run whose client started us with an environment of its
	// own: the run's socket is where every run's view has it.
	if fi, err := os.Stat(socketInView); err == nil && fi.Mode()&os.ModeSocket != 0 {
		return socketInView
	}
	return ""
}

// output writes v as indented JSON when asJSON, or calls human otherwise.
// Either way what reaches stdout holds no character a terminal would act
// on (see package termsafe): names and contents come from agents.
func (a *app) output(asJSON bool, v any, human func(io.Writer)) error {
	if asJSON {
		enc := json.NewEncoder(termsafe.JSONWriter{W: a.stdout})
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	}
	w := termsafe.NewWriter(a.stdout)
	human(w)
	return w.Flush()
}

// isTerminal reports whether w (a writer or a reader) is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// exactArgs is cobra.ExactArgs with an error that names the verb's usage.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Sprintf("usage: %s", cmd.UseLine())}
		}
		return nil
	}
}
