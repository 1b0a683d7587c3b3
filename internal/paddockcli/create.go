package paddockcli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

func createCmd(a *app) *cobra.Command {
	var req paddock.CreateRunRequest
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "create --project NAME [--kind auto|overlay|clone|worktree|operator_dir] [--base REF]",
		Short: "Create a run with its own workspace; prints the run id",
		Long: `Create a run of a project and prepare its workspace at a base revision.

Kinds:
  auto          overlay where this machine can mount one in the sandbox,
                clone elsewhere; the run records which (default)
  overlay       copy-on-write: a read-only snapshot of the base, built once per
                base and shared, under the run's own upper layer. Creating one
                at a snapshotted base does not depend on the repository's size.
                The merged view exists only in the run's sandbox: look at it
                with paddock tool, exec or diff, not on disk. Needs resident
                sandboxes (sandbox_mode = resident); no .git inside
  clone         git clone --shared into the state directory: its own .git, so
                nothing done with git in it touches the project's .git
  worktree      git worktree add --detach in the state directory; it writes
                .git/worktrees/RUN in the project, which cleanup removes
  operator_dir  a directory you hand over (--dir, required): never the
                project's checkout, a directory inside it or above it (an
                agent's writes would stay in your tree after a reject); the
                run holds the exclusive project lock for its whole life, and
                paddock never deletes the directory

--base takes any revision git understands (a branch, tag or sha); it is
resolved to a sha once, and the run records both. A run starts at that
revision: uncommitted changes in the project's checkout are not in it, and
create says so on stderr when there are some, after its answer (they are
counted beside the create). The run is ready when this
returns; on failure nothing is left behind. The first overlay run at a base
builds the base's snapshot; its progress is shown on stderr (and recorded as
workspace.progress events) unless --json.

Agent: --agent NAME makes the run with that agent definition (see 'paddock
agent'): the tools it may call, how they are narrowed, its network, limits,
environment and secrets. The run keeps a copy; editing the definition later
changes nothing in it. Every tool call on the run, from any interface, is
decided by that definition and the run's grants.

Access (what the run's agent may do to the workspace): write (default, every
working tool), read (read, glob, grep, list and stat only), none (no workspace
at all and no working tool; kind, base and dir do not apply). Without --agent
the access picks the built-in coder, reviewer or decider.

Secrets: --secret NAME gives the run's commands the daemon's secret NAME (from
<state dir>/secrets/NAME or the daemon's PADDOCK_SECRET_NAME) in their
environment. Only declared secrets are injected; their values are masked in
every output paddock returns or records.

Cleanup policy: on_reject (default) removes the files when the run is
rejected; manual keeps them until 'paddock rm' or 'paddock gc'.

Exit codes: 0 created; 2 bad input; 3 no such project; 5 the project lock is held.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if req.Project == "" {
				return usageError{"create needs --project NAME"}
			}
			if req.Dir != "" {
				abs, err := filepath.Abs(req.Dir)
				if err != nil {
					return usageError{err.Error()}
				}
				req.Dir = abs
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			stop := a.showProgress(cmd.Context(), c, req.Project, asJSON)
			dirty := a.uncommitted(cmd.Context(), c, req)
			r, err := c.Create(cmd.Context(), req)
			stop()
			if err != nil {
				return err
			}
			// The answer first, the note after: the run is made, and a
			// script reading stdout has it while a large checkout's status
			// is still being read.
			if err := a.output(asJSON, r, func(w io.Writer) { fmt.Fprintln(w, r.ID) }); err != nil {
				return err
			}
			if d := <-dirty; d.n > 0 && r.Workspace != nil {
				w := r.Workspace
				fmt.Fprintf(a.stderr, "paddock: run %s starts at the base revision (%s = %s); the %d uncommitted change(s) in %s are not in it: commit them first to give them to a run\n",
					r.ID, termsafe.Field(w.BaseRef), short(w.BaseRevision), d.n, termsafe.Field(d.root))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&req.Project, "project", "p", "", "project name (required)")
	f.StringVar(&req.Kind, "kind", "", "workspace kind: auto, overlay, clone, worktree or operator_dir (default auto, or the daemon's default_kind)")
	f.StringVar(&req.Base, "base", "", "base revision (default HEAD)")
	f.StringVar(&req.Dir, "dir", "", "directory to hand over, with --kind operator_dir (required; never the project's checkout)")
	f.StringVar(&req.CleanupPolicy, "cleanup", "", "cleanup policy: on_reject or manual (default on_reject)")
	f.StringVar(&req.Access, "access", "", "workspace access: write, read or none (default write, or the agent's)")
	f.StringVar(&req.Agent, "agent", "", "the agent definition the run is made with (paddock agent ls; default the built-in of its access: coder, reviewer or decider)")
	f.StringArrayVar(&req.Secrets, "secret", nil, "give the run's commands this secret of the daemon's, by name (repeatable)")
	f.BoolVar(&req.IncludeUncommitted, "include-uncommitted", false, "start from HEAD with the checkout's uncommitted changes in the run's base (never written into the project; clone and overlay runs)")
	f.BoolVar(&req.IncludeIgnored, "include-ignored", false, "put files the base's ignore rules leave out into the run's change sets")
	f.BoolVar(&asJSON, "json", false, "print the run as JSON")
	return cmd
}

// dirtyCheckout is what the project's checkout holds beyond its commits.
type dirtyCheckout struct {
	root string
	n    int
}

// uncommitted counts, beside a create, the project checkout's uncommitted
// changes: a run starts at a revision, so they are not in it, which a user
// who just edited a file expects otherwise. The daemon reads the checkout
// (GET /v1/projects/{name}/checkout: it is the one that holds the project,
// whether the CLI is on its machine or not). It runs alongside the create
// (a large checkout's status takes a while) and gives up quietly: it is a
// note, not a check.
func (a *app) uncommitted(ctx context.Context, c *client.Client, req paddock.CreateRunRequest) <-chan dirtyCheckout {
	out := make(chan dirtyCheckout, 1)
	if req.Access == string(paddock.AccessNone) {
		out <- dirtyCheckout{}
		return out
	}
	go func() {
		var d dirtyCheckout
		defer func() { out <- d }()
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if s, err := c.ProjectCheckout(ctx, req.Project); err == nil {
			d = dirtyCheckout{root: s.Root, n: s.Uncommitted}
		}
	}()
	return out
}

// showProgress prints, on stderr, the progress events of the project's runs
// being prepared while a create waits (building an overlay's snapshot of a
// large repository takes a while), unless the output is JSON for a script.
// The returned function stops it.
func (a *app) showProgress(ctx context.Context, c *client.Client, project string, quiet bool) func() {
	if quiet {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		seen := map[string]int64{}
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			runs, err := c.Runs(ctx, paddock.RunFilter{Project: project})
			if err != nil {
				continue
			}
			for _, r := range runs {
				if r.State() != paddock.StatePreparing {
					continue
				}
				evs, err := c.Events(ctx, r.ID, seen[r.ID], 0)
				if err != nil {
					continue
				}
				for _, ev := range evs {
					seen[r.ID] = ev.Seq
					if ev.Type == paddock.EventProgress {
						var p struct{ Message string }
						json.Unmarshal(ev.Data, &p)
						fmt.Fprintf(a.stderr, "paddock: %s\n", p.Message)
					}
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}
