package paddockcli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/spf13/cobra"
)

func queueCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue add|ls|show|rm|undo",
		Short: "Land approved change sets on a moving branch, in order, checked",
		Long: `The merge queue lands approved change sets on a branch one after the other.
Each is replayed onto the branch's tip as it is when its turn comes: a file
the branch did not change since the run's base is taken as approved; a file
the branch changed too is merged line by line, and the entry comes back for
a person's look (what would land is no longer exactly what was approved);
overlapping changes come back as a conflict. The commit it would make is
checked with the project's manifest checks (paddock verify's) in a throwaway
read run; it lands only if they pass, by moving the branch with one
compare-and-swap (a branch that moved meanwhile is replayed again). Every
step is an event of the run (queue.*); a daemon restart finishes or undoes a
step it cut.

  paddock queue add RUN --to BRANCH [--wait]    queue an approved run
  paddock queue add RUN --to BRANCH --accept TREE   after reviewing a replay that came back
  paddock queue ls [--project P] [--all]        the queue
  paddock queue show RUN                        an entry, with what would land where it was merged
  paddock queue rm RUN                          take a waiting or returned entry out
  paddock queue undo RUN                        move the branch back, if nothing landed since

The branch checked out in the project's working tree is refused (landing
would move it under your files).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Sprintf("unknown queue verb %q: add, ls, show, rm or undo", args[0])}
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(queueAddCmd(a), queueLsCmd(a), queueShowCmd(a), queueRmCmd(a), queueUndoCmd(a))
	return cmd
}

func queueAddCmd(a *app) *cobra.Command {
	var req paddock.QueueAddRequest
	var wait time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "add RUN --to BRANCH [--accept TREE] [--wait[=DURATION]] [--json]",
		Short: "Queue an approved run to land on BRANCH",
		Long: `Queue an approved run to land on BRANCH (see paddock queue --help).

With --wait, wait until the entry has landed or come back, showing each
step, at most 10 minutes, or as long as --wait=DURATION says (with the =).
Without it, queue add returns at once and the queue works on.

Exit codes: 0 queued (with --wait: landed), 3 no such run or branch,
4 not approved, applied already, the checked-out branch, or (with --wait)
it came back or is still waiting when the time is up, 2 bad input.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			e, err := c.QueueAdd(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("wait") {
				if e, err = a.waitQueue(cmd.Context(), c, args[0], wait, asJSON); err != nil {
					return err
				}
			}
			if err := a.output(asJSON, e, func(w io.Writer) { printQueueEntry(w, e) }); err != nil {
				return err
			}
			if e.State == paddock.QueueReturned {
				return paddock.Errorf(paddock.CodeConflict, "run %s came back: %s", e.Run, e.Reason)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&req.Branch, "to", "", "the branch it lands on (required)")
	cmd.Flags().StringVar(&req.Accept, "accept", "", "the replayed tree you reviewed (paddock queue show prints it)")
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Minute, "wait until it lands or comes back (--wait=DURATION: at most that long)")
	cmd.Flags().Lookup("wait").NoOptDefVal = "10m"
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// waitQueue follows run id's entry until it lands or comes back, printing
// each new state on stderr.
func (a *app) waitQueue(ctx context.Context, c *client.Client, id string, limit time.Duration, quiet bool) (*paddock.QueueEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	last := ""
	for {
		e, err := c.QueueEntry(ctx, id)
		if err != nil {
			return nil, err
		}
		if e.State != last && !quiet {
			fmt.Fprintf(a.stderr, "%s: %s\n", id, e.State)
			last = e.State
		}
		switch e.State {
		case paddock.QueueQueued, paddock.QueueTesting, paddock.QueueLanding:
		default:
			return e, nil
		}
		select {
		case <-ctx.Done():
			return nil, paddock.Errorf(paddock.CodeConflict, "run %s is still %s after %s (paddock queue show %s)", id, e.State, limit, id)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func printQueueEntry(w io.Writer, e *paddock.QueueEntry) {
	fmt.Fprintf(w, "run %s → %s: %s\n", e.Run, e.Branch, e.State)
	fmt.Fprintf(w, "  change set %s, queued by %s at %s\n", e.Hash, e.AddedBy, e.AddedAt.Local().Format(time.DateTime))
	if e.Tip != "" {
		fmt.Fprintf(w, "  replayed onto %s: commit %s (tree %s)\n", e.Tip, e.Commit, e.Tree)
	}
	if len(e.Merged) > 0 {
		fmt.Fprintf(w, "  merged with the branch's own changes: %v\n", e.Merged)
	}
	if e.TestRun != "" {
		fmt.Fprintf(w, "  checked in run %s\n", e.TestRun)
	}
	if e.Reason != "" {
		fmt.Fprintf(w, "  %s\n", e.Reason)
	}
	if e.Diff != "" {
		fmt.Fprintf(w, "\nwhat would land in the merged files:\n%s", e.Diff)
	}
}

func queueLsCmd(a *app) *cobra.Command {
	var project string
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "ls [--project P] [--all] [--json]",
		Short: "List the merge queue",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			es, err := c.Queue(cmd.Context(), project, all)
			if err != nil {
				return err
			}
			return a.output(asJSON, es, func(w io.Writer) {
				if len(es) == 0 {
					fmt.Fprintln(w, "the queue is empty")
					return
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "RUN\tPROJECT\tBRANCH\tSTATE\tQUEUED\tREASON")
				for _, e := range es {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Run, e.Project, e.Branch, e.State, e.AddedAt.Local().Format(time.DateTime), e.Reason)
				}
				tw.Flush()
			})
		},
	}
	cmd.Flags().StringVarP(&project, "project", "p", "", "only this project's entries")
	cmd.Flags().BoolVar(&all, "all", false, "also the landed, removed and undone ones")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// queueOneCmd is a queue verb on one run that prints its entry.
func queueOneCmd(a *app, use, short string, do func(*client.Client, context.Context, string) (*paddock.QueueEntry, error)) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   use + " RUN [--json]",
		Short: short,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			e, err := do(c, cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.output(asJSON, e, func(w io.Writer) { printQueueEntry(w, e) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func queueShowCmd(a *app) *cobra.Command {
	return queueOneCmd(a, "show", "Show a run's queue entry, and what would land where it was merged", (*client.Client).QueueEntry)
}

func queueRmCmd(a *app) *cobra.Command {
	return queueOneCmd(a, "rm", "Take a waiting or returned run out of the queue", (*client.Client).QueueRemove)
}

func queueUndoCmd(a *app) *cobra.Command {
	return queueOneCmd(a, "undo", "Move the branch a run landed on back, if nothing landed since", (*client.Client).QueueUndo)
}
