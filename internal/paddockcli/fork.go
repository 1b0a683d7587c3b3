package paddockcli

import (
	"fmt"
	"io"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

func forkCmd(a *app) *cobra.Command {
	var asJSON bool
	var n int
	var at string
	cmd := &cobra.Command{
		Use:   "fork RUN [-n N] [--at LAYER]",
		Short: "Freeze a run's files and make N runs stacked on them",
		Long: `Fork RUN: its files as they are now become a frozen layer, and N new runs
(default 1, at most 32) are made on it, each with an empty layer of its own
over the frozen one and the base (overlay over overlay), in milliseconds
whatever the repository's size.

- The new runs have RUN's project, base revision, agent definition, access
  and grants; each gets its own git (on paddock/NEW), home and harness.
- Their change sets are against the original base and hold RUN's changes
  as frozen (a file RUN deleted stays deleted) and then their own.
- RUN goes on over the same frozen layer: what it writes afterwards no fork
  sees, and the reverse. Reject or remove any of them: the others stay.
- The frozen layer is kept while a run stacks on it; gc removes it after.
- Only an overlay run forks (make it with --kind overlay, or auto where
  overlays work). A run with a command, job or tool call under way is busy.
  --at LAYER forks RUN as it was when an earlier fork froze it: LAYER is
  one of its frozen layers (each fork prints the layer it froze, and its
  run.forked event names it), and the new runs stack on it and what is
  below it, not on what RUN wrote since. Each fork is thus a checkpoint
  to fork at again; a checkpoint made with paddock checkpoint records a
  digest, not a layer.

Compare the forks afterwards with paddock compare.

Exit codes: 0 forked; 2 a count out of range; 3 no such run; 4 RUN is not
ready, active or checkpointed, or is a review run; 5 busy; 7 not an overlay
run.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			res, err := c.Fork(cmd.Context(), args[0], paddock.ForkRequest{Count: n, At: at})
			if err != nil {
				return err
			}
			return a.output(asJSON, res, func(w io.Writer) {
				fmt.Fprintf(w, "run %s frozen as layer %s; %d run(s) on it:\n", res.Run.ID, res.Layer, len(res.Runs))
				for _, r := range res.Runs {
					fmt.Fprintln(w, r.ID)
				}
			})
		},
	}
	cmd.Flags().IntVarP(&n, "count", "n", 1, "how many runs to make")
	cmd.Flags().StringVar(&at, "at", "", "fork as the run was when an earlier fork froze this layer of it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run, the layer and the new runs as JSON")
	return cmd
}

func compareCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "compare RUN RUN...",
		Short: "Show where sibling runs' change sets differ",
		Long: `Compare the change sets of runs at one base (the forks of a run, or any
runs of a project at the same base revision): for every path any of them
changes, which runs change it (with what: create, modify, delete) and
whether every run ends with the same bytes there.

Each line: same or DIFFERS, the path, then each run that changes it with
its op and the first 12 hex digits of its new blob; runs that leave the
path as the base has it are listed as unchanged.

Exit codes: 0 compared; 2 fewer than two runs; 3 no such run; 4 runs at
different bases, or one with no workspace.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageError{fmt.Sprintf("usage: %s", cmd.UseLine())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			var sets []*paddock.ChangeSet
			for _, id := range args {
				cs, err := c.ChangeSet(cmd.Context(), id)
				if err != nil {
					return err
				}
				sets = append(sets, cs)
			}
			cmp, err := paddock.Compare(sets)
			if err != nil {
				return err
			}
			return a.output(asJSON, cmp, func(w io.Writer) {
				differ := 0
				for _, p := range cmp.Paths {
					verdict := "same   "
					if !p.Same {
						verdict = "DIFFERS"
						differ++
					}
					var who []string
					for _, ch := range p.Changes {
						s := ch.Run + " " + string(ch.Op)
						if ch.NewBlob != "" {
							s += " " + ch.NewBlob[:min(12, len(ch.NewBlob))]
						}
						who = append(who, s)
					}
					if len(p.Unchanged) > 0 {
						who = append(who, "unchanged: "+strings.Join(p.Unchanged, " "))
					}
					fmt.Fprintf(w, "%s  %s  (%s)\n", verdict, termsafe.Field(p.Path), strings.Join(who, "; "))
				}
				fmt.Fprintf(w, "%d path(s), %d differ, at base %.12s\n", len(cmp.Paths), differ, cmp.BaseRevision)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the comparison as JSON")
	return cmd
}
