package paddockcli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

func nodesCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "List the daemons (nodes) that share this paddock's store",
		Long: `List the nodes: the daemons that share one PostgreSQL store (serve --store
postgres://…) and act as one paddock. Each holds the workspaces of its runs
and renews a lease; a node whose lease ran out is marked lost by the others,
and its runs can be adopted (paddock adopt RUN).

Columns: the node's id, its state (alive, lost, left), its epoch (its fencing
token: a new one at each start), the runs with a live workspace it holds
against its capacity, when its lease ends, and the address other nodes
forward calls to.

Exit codes: 0 listed; 7 this daemon's store is not shared (SQLite).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			nodes, err := c.Nodes(cmd.Context())
			if err != nil {
				return err
			}
			return a.output(asJSON, nodes, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NODE\tSTATE\tEPOCH\tRUNS\tLEASE\tADDRESS")
				for _, n := range nodes {
					lease := time.Until(n.LeaseUntil).Round(time.Second)
					ls := "ends in " + lease.String()
					if lease <= 0 {
						ls = "ended " + (-lease).String() + " ago"
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%s\t%s\n", termsafe.Text(n.ID), n.State, n.Epoch, n.LiveRuns, n.Capacity, ls, termsafe.Text(n.Address))
				}
				tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func adoptCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "adopt RUN",
		Short: "Restore a lost node's run on this node, from its checkpoint",
		Long: `Adopt a run whose node is lost (or stopped): the node this command talks to
makes the run's workspace again at its base, writes into it the files of the
run's last checkpoint in the shared store (stored within 3 seconds of a call
that changed its files, when each job starts and ends, at paddock checkpoint,
and when a node stops), and takes over the run's interrupted job, which runs
again here over those files (they may hold part of that job's first run).

What the lost node did after the checkpoint is lost with it; the run's
run.adopted and workspace.resumed events say which checkpoint was restored
and what could not be (symbolic links, names that are not UTF-8, protected
paths). The run keeps its id, its events and its token; its submission is
made again when the restored files make the submitted hash (an approval is
yours to give again), and named as lost when they do not. A node started
with --node-adopt auto adopts lost nodes' runs by itself.

Exit codes: 0 adopted; 3 no such run, or no checkpoint to restore from;
4 the run's node is alive, or the run is not live; 7 this daemon's store is
not shared.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			// Making the workspace builds this node's snapshot of the
			// project's base the first time: its progress is shown.
			stop := func() {}
			if r, err := c.Run(cmd.Context(), args[0]); err == nil {
				stop = a.showProgress(cmd.Context(), c, r.Project, asJSON)
			}
			res, err := c.Adopt(cmd.Context(), args[0])
			stop()
			if err != nil {
				return err
			}
			return a.output(asJSON, res, func(w io.Writer) {
				fmt.Fprintf(w, "adopted %s from node %s: %d paths restored from the checkpoint of %s (%s)\n",
					res.Run.ID, termsafe.Text(res.FromNode), res.Entries, res.TakenAt.Local().Format(time.DateTime), res.Checkpoint)
				if res.Job != "" {
					fmt.Fprintf(w, "job %s runs again on node %s\n", res.Job, termsafe.Text(res.Run.Node))
				}
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
