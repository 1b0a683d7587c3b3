package paddockcli

import (
	"fmt"
	"io"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/spf13/cobra"
)

// Exit codes of `paddock exec`, as docker and env use them: the command's own
// exit code, or these when paddock could not run it.
const (
	execFailed      = 125 // paddock failed (the message says why)
	execUnsupported = 126 // the sandbox cannot be set up on this machine
	execNotFound    = 127 // the command is not in the sandbox's PATH
)

// execError carries the exit code `paddock exec` ends with.
type execError struct {
	code int
	err  error
}

func (e *execError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *execError) Unwrap() error { return e.err }

// execUsage is how to write an exec, for the errors that say so.
const execUsage = "usage: paddock exec RUN [flags] -- CMD [ARG]...  (the command's own flags go after --, as in: paddock exec RUN -- ls -la)"

func execCmd(a *app) *cobra.Command {
	var req paddock.ExecRequest
	var asJSON, stdin, tty bool
	cmd := &cobra.Command{
		Use:   "exec RUN [--net none|allow=DOMAIN,…|host] [--timeout D] [--env K=V]... [-i|-t] -- CMD [ARG]...",
		Short: "Run a command in a run's workspace, confined",
		Long: `Run a command in the run's workspace inside the sandbox: its own user, mount,
pid, network, ipc and uts namespaces; system directories read-only, the
workspace read-write with agent configuration read-only (a read run's
commands write a throwaway layer that is gone when they end); the run's own
git on branch paddock/RUN; HOME=/home/paddock, the run's own; a private
/tmp; Landlock, seccomp, no capabilities,
no_new_privs; limits on time, CPU, processes, memory, file size and output.
The limits flags may only lower what the daemon gives every command (its
[exec_limits] in paddock.toml; the defaults below); asking for more is
refused. Output streams as it comes, whatever the command's length.
The environment is a fixed allow-list plus --env; nothing is inherited.

--net none (the default) gives an empty network namespace. --net
allow=example.com,.github.com reaches only those domains (a leading dot: and
their subdomains) through a proxy paddock runs for the command (HTTP_PROXY and
HTTPS_PROXY are set); each connection, allowed or denied, is an event.
--net host gives the host's network, explicitly, and recorded. Every exec is an event, with the
exact enforcement it got (sandbox.enforced). --allow-degraded runs where this
machine lacks a mechanism, and records that.

Stdin: when this command's stdin is not a terminal (a pipe, a file), it is
read whole and given to the command as its stdin, at most 16 MiB (larger
input belongs in the workspace: paddock tool RUN write, or paddock inbox);
-i (--stdin) reads it even from a terminal, up to end of file (Ctrl-D), and
--stdin=false never reads it (as ssh -n: for a loop that reads its own
input, or a caller that leaves paddock's stdin open without ever closing
it, which would otherwise wait for its end). Otherwise the command reads
/dev/null. Its size is recorded, never its content.

-t (--tty) gives the command a terminal, as paddock run does on one: this
command's stdin must be a terminal; it is put in raw mode (every key goes
to the command, Ctrl-C included) and restored after, and the command gets
the window's size and its resizes. For a shell in the run: paddock exec -t
RUN -- bash. What is typed is streamed, never recorded; its size is.

Exit codes: the command's own; 125 if paddock failed, 126 if the sandbox
cannot be set up on this machine (see paddock doctor), 127 if the command is
not found. --json prints the whole result instead and exits 0.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return &execError{execFailed, usageError{"exec needs a command; " + execUsage}}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Argv = args[1:]
			if len(req.Argv) > 0 && req.Argv[0] == "--" {
				req.Argv = req.Argv[1:]
			}
			if len(req.Argv) == 0 {
				return &execError{execFailed, usageError{"exec needs a command; " + execUsage}}
			}
			if tty {
				return a.execTTY(cmd, args[0], req, asJSON || cmd.Flags().Changed("stdin"))
			}
			return a.runExec(cmd, args[0], req, asJSON, cmd.Flags().Changed("stdin"), stdin)
		},
	}
	f := cmd.Flags()

	f.StringVar(&req.Net, "net", "", "network: none (default), allow=DOMAIN,… or host")
	f.StringVar(&req.Timeout, "timeout", "", "wall-time limit, such as 2m (default 10m)")
	f.StringVar(&req.Dir, "dir", "", "working directory, relative to the workspace root")
	f.StringArrayVar(&req.Env, "env", nil, "add KEY=VALUE to the command's environment (repeatable)")
	f.StringVar(&req.Limits.CPU, "cpu", "", "CPU-time limit, such as 30s (default 10m)")
	f.IntVar(&req.Limits.Procs, "procs", 0, "process limit (default 512)")
	f.Int64Var(&req.Limits.Memory, "memory", 0, "address-space limit in bytes (default 8 GiB)")
	f.Int64Var(&req.Limits.FileSize, "file-size", 0, "largest file the command may write, in bytes (default 1 GiB)")
	f.Int64Var(&req.Limits.Output, "output", 0, "bytes kept of stdout and of stderr each (default 8 MiB)")
	f.Int64Var(&req.Limits.Tmp, "tmp", 0, "size of the private /tmp in bytes (default 512 MiB)")
	f.BoolVar(&req.AllowDegraded, "allow-degraded", false, "run even where a mechanism is missing (recorded)")
	f.BoolVar(&asJSON, "json", false, "print the result, with the enforcement, as JSON")
	f.BoolVarP(&tty, "tty", "t", false, "give the command a terminal (stdin must be one): for interactive programs and shells")
	f.BoolVarP(&stdin, "stdin", "i", false, "give the command this stdin even from a terminal (default: when it is not a terminal; --stdin=false: never)")
	// A flag paddock does not know is, most often, the command's own
	// written without -- before it.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &execError{execFailed, usageError{err.Error() + "; " + execUsage}}
	})
	return cmd
}

// runExec runs req in run without a terminal, and ends as the command
// did: its output streamed (or, asJSON, its whole result printed), its
// exit code.
func (a *app) runExec(cmd *cobra.Command, run string, req paddock.ExecRequest, asJSON, stdinGiven, stdin bool) error {
	var err error
	if req.Stdin, err = a.execStdin(stdinGiven, stdin); err != nil {
		return err
	}
	c, err := a.client(cmd.Context())
	if err != nil {
		return &execError{execFailed, err}
	}
	var res *paddock.ExecResult
	if asJSON {
		res, err = c.Exec(cmd.Context(), run, req)
	} else {
		res, err = c.ExecStream(cmd.Context(), run, req, a.stdout, a.stderr)
	}
	if err != nil {
		return execFailure(err)
	}
	if asJSON {
		return a.output(true, res, nil)
	}
	printOutput(a, res)
	if res.ExitCode != 0 {
		return &execError{code: res.ExitCode}
	}
	return nil
}

// execStdin is what the command gets as its stdin: this one's, whole, when
// it is not a terminal or --stdin was given (stdinGiven, stdin), else nil
// (it reads /dev/null).
func (a *app) execStdin(stdinGiven, stdin bool) ([]byte, error) {
	read := a.stdin != nil && !isTerminal(a.stdin)
	if stdinGiven {
		read = stdin && a.stdin != nil
	}
	if !read {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(a.stdin, paddock.MaxExecStdin+1))
	if err != nil {
		return nil, &execError{execFailed, fmt.Errorf("reading stdin: %w", err)}
	}
	if len(b) > paddock.MaxExecStdin {
		return nil, &execError{execFailed, usageError{fmt.Sprintf("stdin holds more than an exec takes (%d MiB): put the input in the workspace (paddock tool RUN write, paddock inbox) and let the command read it there, or give --stdin=false",
			paddock.MaxExecStdin>>20)}}
	}
	return b, nil
}

// execFailure is the exit code, and the error, of an exec the daemon did
// not run: the sandbox unsupported here, the command not found, or
// paddock's own failure.
func execFailure(err error) *execError {
	code := execFailed
	switch paddock.ErrorCode(err) {
	case paddock.CodeUnsupported:
		code = execUnsupported
	case paddock.CodeBadRequest:
		if strings.Contains(paddock.ErrorMessage(err), "command not found") {
			code = execNotFound
		}
	}
	return &execError{code, err}
}

// printOutput reports how a streamed command ended (its output is already out).
func printOutput(a *app, res *paddock.ExecResult) {
	if res.Truncated {
		fmt.Fprintln(a.stderr, "paddock: output was cut at the limit")
	}
	if res.TimedOut {
		fmt.Fprintln(a.stderr, "paddock: the command was stopped at its time limit")
	}
	for _, d := range res.Denied {
		fmt.Fprintln(a.stderr, "paddock:", d)
	}
}

// execTTY is exec -t: the command on a terminal, this one's.
func (a *app) execTTY(cmd *cobra.Command, id string, req paddock.ExecRequest, clash bool) error {
	if clash {
		return &execError{execFailed, usageError{"-t gives the command this terminal: it takes neither --json nor -i/--stdin"}}
	}
	in, ok := terminalIn(a.stdin)
	if !ok {
		return &execError{execFailed, usageError{"-t needs a terminal on stdin (leave -t out to pipe input, or give -i)"}}
	}
	c, err := a.client(cmd.Context())
	if err != nil {
		return &execError{execFailed, err}
	}
	res, err := a.execOnTerminal(cmd.Context(), c, id, req, in)
	if err != nil {
		return &execError{execFailed, err}
	}
	printOutput(a, res)
	if res.ExitCode != 0 {
		return &execError{code: res.ExitCode}
	}
	return nil
}
