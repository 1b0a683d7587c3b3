package paddockcli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

type runOptions struct {
	project, agent, kind, net, apply, timeout string
	mounts, credentials, secrets, env         []string
	noVerify, includeUncommitted              bool
}

func runCmd(a *app) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [--project DIR] [--agent NAME] [--kind K] [--net N] [--mount-ro DIR]... [--apply branch|worktree] -- CMD [ARG]...",
		Short: "Run an agent (any command) in a new run of this repository, then review what it did",
		Long: `The everyday path for one developer: put a command, an agent's CLI say, in a
run of the repository you are in, then decide what lands.

1. The project is the git repository at --project (default: the one the
   current directory is in); it is registered if it is not yet.
2. A run is made with --agent's definition (default: the built-in coder),
   and CMD runs in its sandbox with the workspace (or, from a subdirectory
   of the repository, that subdirectory of it) as its working directory,
   its own home and --net's network (default none), its output shown as it
   comes. Ctrl-C stops it and keeps the run. CMD is the run's agent
   session: at a terminal it runs as long as it needs (--timeout bounds
   it; the daemon's session_limits.terminal_wall, if set, is the most),
   otherwise up to session_limits.wall (8h); the commands it asks for
   through paddock (exec) keep their own limits (exec_limits, 10m), and
   each gets no network unless it asks, even when CMD has one.
   When stdin is a terminal, CMD gets one too: a pseudo-terminal of your
   window's size, resized with it, TERM as yours, so that interactive,
   full-screen agents (Claude Code, Codex) work. Your terminal is in raw
   mode meanwhile and restored when CMD ends: every key goes to CMD, Ctrl-C
   included, which stops it as at any terminal (an agent decides how; a
   command that leaves SIGINT to its default, as the first process of its
   sandbox, does not stop: kill -INT paddock, or close the terminal, stops
   it and keeps the run).
3. When CMD ends, the change set is shown (paths, sizes, risk labels), and
   the project's checks run (paddock verify; --no-verify skips them).
4. On a terminal you choose: approve (and with --apply, apply to a new
   branch or into the working tree), reject (the workspace is removed), or
   keep it for later. Otherwise the change set is submitted for review and
   the commands that decide it are printed.

CMD is found on your PATH as your shell would find it. A run shows the
system directories (/usr, /bin, /lib, /etc) and nothing else of this
machine, so when CMD lives elsewhere (a user npm prefix, nvm, Claude Code's
~/.local/bin, a project's node_modules) paddock shows the run what it needs,
read-only, at the same paths, and says so: the directory it was found in,
its package (the outermost node_modules above the file it is) and its #!
interpreter's. --mount-ro DIR shows more; an agent definition's mounts too.
Never the daemon's state, the project's checkout or a directory holding
credentials (~/.ssh and the like): those are refused. A CMD found nowhere
makes no run; one that never starts in its run leaves none behind.

Uncommitted changes in your checkout are not in the run, which starts at
the base revision: paddock says so, as paddock create does.

A run whose command changed nothing is rejected at once.

Inside the run, CMD finds paddock's MCP server for this run already
configured: Claude Code in ~/.claude.json (its own shell and file-writing
tools turned off, so that every act goes through paddock's tools), Codex
in ~/.codex/config.toml, any other client in $PADDOCK_MCP_CONFIG; the
server is /run/paddock/bin/paddock mcp, over the run's own socket (see
paddock mcp --help).

Exit codes: CMD's own when it failed; 0 when it succeeded, whatever was
decided; 130 when stopped with Ctrl-C; 125 when paddock failed.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &execError{execFailed, usageError{"run needs a command: paddock run [flags] -- CMD [ARG]..."}}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := a.runAgent(cmd.Context(), o, args)
			if err != nil {
				return &execError{execFailed, err}
			}
			if code != 0 {
				return &execError{code: code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.project, "project", "", "the repository (default: the one the current directory is in)")
	f.StringVar(&o.agent, "agent", "", "the agent definition the run is made with (default: coder)")
	f.StringVar(&o.kind, "kind", "", "workspace kind (default auto)")
	f.StringVar(&o.net, "net", "", "CMD's network: none (default), allow=DOMAIN,… or host")
	f.StringVar(&o.timeout, "timeout", "", "CMD's wall-time limit, such as 2h (default: none at a terminal, else the daemon's session_limits.wall, 8h); the commands CMD asks for keep theirs")
	f.StringVar(&o.apply, "apply", "", "once approved, apply: branch[=NAME] or worktree")
	f.BoolVar(&o.noVerify, "no-verify", false, "do not run the project's checks when CMD ends")
	f.BoolVar(&o.includeUncommitted, "include-uncommitted", false, "start from HEAD with your checkout's uncommitted changes in the run's base (never written into the project; applied into the working tree only)")
	f.StringArrayVar(&o.mounts, "mount-ro", nil, "show this host directory read-only in the run, at its own path (repeatable; where CMD lives is found and shown already)")
	f.StringArrayVar(&o.credentials, "credential", nil, "anthropic, openai, or host=H,header=X,secret=S[,prefix=P][,env=V]: set by paddock's proxy on CMD's requests to that host from the daemon's secret; CMD holds a placeholder (repeatable; adds the host to --net's allow-list)")
	f.StringArrayVar(&o.secrets, "secret", nil, "give the run's commands this secret of the daemon's, by name, in their environment (repeatable)")
	f.StringArrayVar(&o.env, "env", nil, "pass this variable of your environment (NAME) or NAME=VALUE to CMD (repeatable; CMD sees it: use --credential for keys)")
	return cmd
}

// runAgent plays paddock run; it returns CMD's exit code.
func (a *app) runAgent(ctx context.Context, o runOptions, argv []string) (int, error) {
	apply, err := applyRequest(o.apply)
	if err != nil {
		return 0, err
	}
	root, err := repositoryAt(o.project)
	if err != nil {
		return 0, err
	}
	mounts, argv, err := a.commandMounts(o.mounts, argv)
	if err != nil {
		return 0, err
	}
	dir := ""
	if o.project == "" {
		dir = subdirectoryOf(root)
	}
	c, err := a.client(ctx)
	if err != nil {
		return 0, err
	}
	p, err := ensureProject(ctx, c, root)
	if err != nil {
		return 0, err
	}
	creds, netSpec, err := runCredentials(o.credentials, o.net)
	if err != nil {
		return 0, err
	}
	if netSpec != o.net {
		fmt.Fprintf(a.stderr, "paddock: %s's network: %s (its credentials' hosts)\n", argv[0], netSpec)
		o.net = netSpec
	}
	env, err := envGiven(o.env)
	if err != nil {
		return 0, err
	}
	create := paddock.CreateRunRequest{Project: p.Name, Agent: o.agent, Kind: o.kind, Mounts: mounts, Credentials: creds, Secrets: o.secrets,
		IncludeUncommitted: o.includeUncommitted}
	r, late, err := a.createAgentRun(ctx, c, create, argv[0])
	if err != nil {
		return 0, err
	}
	req := paddock.ExecRequest{Argv: argv, Net: o.net, Timeout: o.timeout, Session: true, Dir: dir, Env: env}
	res, interrupted, err := a.runInRun(ctx, c, r.ID, req)
	if late != nil {
		a.noteUncommitted(<-late, r, argv[0], "were")
	}
	if interrupted {
		fmt.Fprintf(a.stderr, "paddock: stopped; run %s is kept (paddock diff %s, paddock reject %s)\n", r.ID, r.ID, r.ID)
		return 130, nil
	}
	if err != nil {
		// CMD never started (not found in the run, a bad request, a
		// sandbox that cannot be set up): a run it never touched is litter.
		if res == nil && a.removeUntouched(ctx, c, r.ID) {
			return 0, fmt.Errorf("%w; run %s, which %s never started in, is removed", err, r.ID, argv[0])
		}
		return 0, fmt.Errorf("run %s is kept: %w", r.ID, err)
	}
	code := res.ExitCode
	if res.Killed != "" {
		fmt.Fprintf(a.stderr, "paddock: %s was stopped: it reached %s\n", argv[0], res.Killed)
	}
	fmt.Fprintf(a.stderr, "paddock: %s ended: exit %d, %.1fs\n", argv[0], code, res.DurationMS/1000)
	return code, a.reviewAgentRun(ctx, c, r.ID, argv[0], o.noVerify, apply)
}

// subdirectoryOf is the working directory relative to the repository at
// root, if it is below it, else "": from a subdirectory of the
// repository, CMD starts in that subdirectory of the run, as it would
// here.
func subdirectoryOf(root string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(root, wd); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			return filepath.ToSlash(rel)
		}
	}
	return ""
}

// envGiven is --env's variables: KEY=VALUE as given, KEY with its value
// here.
func envGiven(given []string) ([]string, error) {
	var env []string
	for _, e := range given {
		if strings.Contains(e, "=") {
			env = append(env, e)
		} else if v, ok := os.LookupEnv(e); ok {
			env = append(env, e+"="+v)
		} else {
			return nil, usageError{fmt.Sprintf("--env %s: it is not set here", e)}
		}
	}
	return env, nil
}

// createAgentRun makes the run for the agent cmd, and says what it is and,
// unless they are included, the checkout's uncommitted changes it is
// without. Those are counted beside the create and said before cmd starts
// when the count is in by then; a large checkout's status never holds cmd
// back: late then brings it, to be said when cmd ends.
func (a *app) createAgentRun(ctx context.Context, c *client.Client, create paddock.CreateRunRequest, cmd string) (r *paddock.Run, late <-chan dirtyCheckout, err error) {
	var dirty <-chan dirtyCheckout
	if create.IncludeUncommitted {
		none := make(chan dirtyCheckout, 1)
		none <- dirtyCheckout{}
		dirty = none
	} else {
		dirty = a.uncommitted(ctx, c, create)
	}
	if r, err = c.Create(ctx, create); err != nil {
		return nil, nil, err
	}
	select {
	case d := <-dirty:
		a.noteUncommitted(d, r, cmd, "are")
	default:
		late = dirty
	}
	agent := "coder"
	if r.Agent != nil {
		agent = r.Agent.Name
	}
	fmt.Fprintf(a.stderr, "paddock: run %s of %s, agent %s, at %s\n", r.ID, create.Project, agent, short(r.Workspace.BaseRevision))
	return r, late, nil
}

// noteUncommitted says, when dc counts any, that the checkout's
// uncommitted changes are (or, said after cmd ended, were) not in run r.
func (a *app) noteUncommitted(dc dirtyCheckout, r *paddock.Run, cmd, verb string) {
	if dc.n > 0 && r.Workspace != nil {
		fmt.Fprintf(a.stderr, "paddock: the %d uncommitted change(s) in %s %s not in the run, which starts at %s: commit them first, or --include-uncommitted, to give them to %s\n",
			dc.n, termsafe.Field(dc.root), verb, short(r.Workspace.BaseRevision), cmd)
	}
}

// runInRun runs the agent, req, in run id until it ends or Ctrl-C stops it
// (interrupted; the run stays). On a terminal, Ctrl-C is the agent's; a
// signal to paddock, or the terminal's end, stops it there. A job the
// agent started through its run's socket ends with it: what is reviewed
// next must be what it left, not what a job goes on writing.
func (a *app) runInRun(ctx context.Context, c *client.Client, id string, req paddock.ExecRequest) (res *paddock.ExecResult, interrupted bool, err error) {
	agentCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	if in, ok := terminalIn(a.stdin); ok {
		res, err = a.execOnTerminal(agentCtx, c, id, req, in)
	} else {
		res, err = c.ExecStream(agentCtx, id, req, a.stdout, a.stderr)
	}
	interrupted = agentCtx.Err() != nil && ctx.Err() == nil
	stop()
	if jobs, jerr := c.Jobs(ctx, id); jerr == nil {
		for _, j := range jobs {
			if j.State == paddock.JobRunning {
				if _, err := c.CancelJob(ctx, id, j.ID); err == nil {
					fmt.Fprintf(a.stderr, "paddock: cancelled job %s (%s), which %s left running\n", j.ID, j.Kind, req.Argv[0])
				}
			}
		}
	}
	return res, interrupted, err
}

// reviewAgentRun shows what the agent cmd did in run id, verifies it
// unless noVerify, submits it, and on a terminal asks what becomes of it;
// a run that changed nothing is rejected.
func (a *app) reviewAgentRun(ctx context.Context, c *client.Client, id, cmd string, noVerify bool, apply *paddock.ApplyRequest) error {
	cs, err := c.ChangeSet(ctx, id)
	if err != nil {
		return fmt.Errorf("run %s is kept: %w", id, err)
	}
	if len(cs.Entries) == 0 {
		if _, err := c.Reject(ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(a.stderr, "paddock: %s changed nothing; run %s rejected\n", cmd, id)
		return nil
	}
	out := bufio.NewWriter(a.stdout)
	printChangeSet(out, cs, true)
	out.Flush()
	if !noVerify {
		if v, err := a.verifyIfDeclared(ctx, c, id); err != nil {
			fmt.Fprintf(a.stderr, "paddock: verify: %s\n", paddock.ErrorMessage(err))
		} else if v != nil {
			printVerify(a.stdout, v)
		}
	}
	sub, err := c.SubmitExpecting(ctx, id, cs.Hash)
	if err != nil {
		return fmt.Errorf("run %s is kept: %w", id, err)
	}
	if !isTerminal(a.stdin) || !isTerminal(a.stdout) {
		fmt.Fprintf(a.stdout, "submitted for review: paddock approve %s --hash %s (or paddock reject %s)\n", id, sub.Hash, id)
		return nil
	}
	return a.decide(ctx, c, id, sub, apply)
}

// decide asks the person at the terminal what becomes of the change set:
// one key, no Enter (a line, where stdin is not a terminal). d shows the
// diff in $PAGER, s the change set's files again, v runs the project's
// checks, ? says what each key does.
func (a *app) decide(ctx context.Context, c *client.Client, id string, cs *paddock.ChangeSet, apply *paddock.ApplyRequest) error {
	hash := cs.Hash
	keys := newKeyReader(a.stdin)
	what := "[a]pprove"
	if apply != nil {
		what = "[a]pprove and apply"
	}
	for {
		fmt.Fprintf(a.stdout, "%s, [r]eject, [k]eep for later, or [d]iff, [s]tat, [v]erify, [?] help? ", what)
		key := keys.next()
		fmt.Fprintln(a.stdout)
		switch key {
		case 'a', 'A':
			if _, err := c.Approve(ctx, id, hash); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "approved %s\n", hash)
			if apply == nil {
				fmt.Fprintf(a.stdout, "apply it with: paddock apply %s [--to worktree]\n", id)
				return nil
			}
			s, err := c.Apply(ctx, id, *apply)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "applied to %s\n", s.AppliedTo)
			return nil
		case 'r', 'R':
			_, err := c.Reject(ctx, id)
			if err == nil {
				fmt.Fprintf(a.stdout, "rejected %s\n", id)
			}
			return err
		case 'k', 'K', 'q', 'Q', '\r', '\n', 0, 3, 4: // 0: the input ended; ^C, ^D
			fmt.Fprintf(a.stdout, "kept: paddock approve %s --hash %s, or paddock reject %s\n", id, hash, id)
			return nil
		case 'd', 'D':
			if err := a.page(ctx, func(w io.Writer) error { _, err := c.CopyDiff(ctx, id, hash, w); return err }); err != nil {
				fmt.Fprintf(a.stderr, "paddock: the diff: %s\n", paddock.ErrorMessage(err))
			}
		case 's', 'S':
			out := bufio.NewWriter(a.stdout)
			printChangeSet(out, cs, true)
			out.Flush()
		case 'v', 'V':
			if v, err := a.verifyIfDeclared(ctx, c, id); err != nil {
				fmt.Fprintf(a.stderr, "paddock: verify: %s\n", paddock.ErrorMessage(err))
			} else if v == nil {
				fmt.Fprintln(a.stdout, "the project declares no checks this run may run")
			} else {
				printVerify(a.stdout, v)
			}
		default:
			fmt.Fprint(a.stdout, decideHelp)
		}
	}
}

const decideHelp = `  a  approve the change set (and with --apply, apply it)
  r  reject it: the run's workspace is removed
  k  keep it for later (Enter, q and Ctrl-C too): paddock approve or reject decide it
  d  show the diff in $PAGER (less -R when unset)
  s  show the change set's files, sizes and risk labels again
  v  run the project's checks on it (paddock verify)
  ?  this help
`

// page shows what write writes in the person's $PAGER (less -R where it
// is unset and installed; else written out as it is).
func (a *app) page(ctx context.Context, write func(io.Writer) error) error {
	pager := strings.TrimSpace(a.getenv("PAGER"))
	if pager == "" {
		if _, err := exec.LookPath("less"); err == nil {
			pager = "less -R"
		}
	}
	if pager == "" || pager == "cat" {
		return write(a.stdout)
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", pager)
	cmd.Stdout, cmd.Stderr = a.stdout, a.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("$PAGER %q: %w", pager, err)
	}
	werr := write(in)
	in.Close()
	if err := cmd.Wait(); err != nil && werr == nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) { // a pager quit early is no failure
			return err
		}
	}
	if errors.Is(werr, syscall.EPIPE) {
		return nil
	}
	return werr
}

// keyReader reads one key at a time: from a terminal, in raw mode while it
// waits (no Enter needed); from anything else, a line's first character.
type keyReader struct {
	term *os.File
	in   *bufio.Reader
}

func newKeyReader(r io.Reader) *keyReader {
	if f, ok := terminalIn(r); ok {
		return &keyReader{term: f}
	}
	return &keyReader{in: bufio.NewReader(r)}
}

// next is the key pressed; 0 when the input ended.
func (k *keyReader) next() byte {
	if k.term != nil {
		restore, err := makeRaw(int(k.term.Fd()))
		if err == nil {
			defer restore()
			var b [1]byte
			if n, err := k.term.Read(b[:]); n == 1 && err == nil {
				return b[0]
			}
			return 0
		}
		k.in = bufio.NewReader(k.term) // not a terminal after all: lines
		k.term = nil
	}
	line, err := k.in.ReadString('\n')
	if err != nil && line == "" {
		return 0
	}
	if t := strings.TrimSpace(line); t != "" {
		return t[0]
	}
	return '\n'
}

// verifyIfDeclared runs the project's checks when the run may and the
// manifest declares some; nil when there is nothing to run.
func (a *app) verifyIfDeclared(ctx context.Context, c *client.Client, id string) (*paddock.VerifyResult, error) {
	caps, err := c.Capabilities(ctx, id)
	if err != nil {
		return nil, err
	}
	if len(caps.Checks) == 0 || !slices.ContainsFunc(caps.Tools, func(t paddock.ToolCapability) bool { return t.Name == paddock.ToolVerify }) {
		return nil, nil
	}
	stop := a.followChecks(ctx, c, id, false)
	defer stop()
	return c.Verify(ctx, id, paddock.VerifyRequest{})
}

// applyRequest reads --apply.
func applyRequest(s string) (*paddock.ApplyRequest, error) {
	switch {
	case s == "":
		return nil, nil
	case s == "worktree":
		return &paddock.ApplyRequest{To: "worktree"}, nil
	case s == "branch":
		return &paddock.ApplyRequest{}, nil
	case strings.HasPrefix(s, "branch="):
		return &paddock.ApplyRequest{Branch: strings.TrimPrefix(s, "branch=")}, nil
	}
	return nil, usageError{fmt.Sprintf("--apply %q: branch[=NAME] or worktree", s)}
}

// repositoryAt finds the top of the git repository dir is in (default: the
// current directory), by its .git entry: the CLI runs no git of its own in
// the user's repository.
func repositoryAt(dir string) (string, error) {
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return "", err
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", usageError{err.Error()}
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", usageError{fmt.Sprintf("%s is not in a git repository (give --project DIR)", abs)}
		}
	}
}

// ensureProject returns the project whose root is root, declaring it if
// there is none.
func ensureProject(ctx context.Context, c *client.Client, root string) (*paddock.Project, error) {
	ps, err := c.Projects(ctx)
	if err != nil {
		return nil, err
	}
	real, _ := filepath.EvalSymlinks(root)
	for _, p := range ps {
		if p.Root == root || p.Root == real {
			return p, nil
		}
	}
	p, err := c.AddProject(ctx, paddock.AddProjectRequest{Path: root})
	var pe *paddock.Error
	if errors.As(err, &pe) && pe.Code == paddock.CodeConflict {
		return nil, fmt.Errorf("%s cannot be registered: %s", root, pe.Message)
	}
	return p, err
}

// commandMounts is what run shows of this machine for argv to start: the
// directories of --mount-ro, and, when argv[0] is a name found on PATH
// outside the system directories, where it lives (findcmd.go); argv[0]
// becomes the path found. It says so on stderr.
func (a *app) commandMounts(extra, argv []string) ([]string, []string, error) {
	var mounts []string
	for _, d := range extra {
		abs, err := filepath.Abs(d)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return nil, nil, usageError{fmt.Sprintf("--mount-ro %s: %v", d, err)}
		}
		mounts = append(mounts, abs)
	}
	if strings.Contains(argv[0], "/") {
		return mounts, argv, nil // a path: the run's, as it is
	}
	wd, _ := os.Getwd()
	pathEnv := a.getenv("PATH")
	if pathEnv == "" {
		pathEnv = os.Getenv("PATH")
	}
	f, err := findCommand(argv[0], pathEnv, wd)
	if err != nil {
		return nil, nil, usageError{fmt.Sprintf("%v: nothing was made (give CMD's path, or install it; --mount-ro DIR shows more of this machine to the run)", err)}
	}
	if len(f.Mounts) == 0 {
		return mounts, argv, nil // in the system directories, which every run shows
	}
	argv = slices.Clone(argv)
	argv[0] = f.Path
	mounts = append(mounts, f.Mounts...)
	line := fmt.Sprintf("paddock: %s is %s", filepath.Base(f.Path), f.Path)
	if f.Real != f.Path {
		line += " (" + f.Real + ")"
	}
	if f.Interpreter != "" {
		line += ", run by " + f.Interpreter
	}
	fmt.Fprintf(a.stderr, "%s; shown read-only in the run: %s\n", termsafe.Field(line), termsafe.Field(strings.Join(f.Mounts, ", ")))
	return mounts, argv, nil
}

// removeUntouched removes run id if nothing in it changed, and says
// whether it did.
func (a *app) removeUntouched(ctx context.Context, c *client.Client, id string) bool {
	cs, err := c.ChangeSet(ctx, id)
	if err != nil || len(cs.Entries) > 0 {
		return false
	}
	if _, err := c.Reject(ctx, id); err != nil {
		return false
	}
	_, err = c.Remove(ctx, id)
	return err == nil
}

// runCredentials reads --credential, and the network that reaches their
// hosts: net's allow-list with them added, or one of them alone.
func runCredentials(specs []string, net string) ([]paddock.CredentialRule, string, error) {
	var rules []paddock.CredentialRule
	for _, s := range specs {
		var r paddock.CredentialRule
		if _, ok := paddock.BuiltinCredentials[s]; ok {
			r.Use = s
		} else {
			for _, kv := range strings.Split(s, ",") {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "host":
					r.Host = v
				case "header":
					r.Header = v
				case "secret":
					r.Secret = v
				case "prefix":
					r.Prefix = v
				case "env":
					r.Env = v
				case "use":
					r.Use = v
				default:
					return nil, "", usageError{fmt.Sprintf("--credential %q: anthropic, openai, or host=H,header=X,secret=S[,prefix=P][,env=V]", s)}
				}
			}
		}
		rules = append(rules, r)
	}
	if len(rules) == 0 {
		return nil, net, nil
	}
	var allow []string
	switch {
	case net == "" || net == "none":
	case strings.HasPrefix(net, "allow="):
		allow = strings.Split(strings.TrimPrefix(net, "allow="), ",")
	default:
		return nil, "", usageError{fmt.Sprintf("--credential needs an allow-list network, whose proxy sets it (--net allow=…), not %q", net)}
	}
	for _, r := range rules {
		if h := r.Resolved().Host; h != "" && !slices.Contains(allow, h) {
			allow = append(allow, h)
		}
	}
	return rules, "allow=" + strings.Join(allow, ","), nil
}
