package paddockcli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

func lsCmd(a *app) *cobra.Command {
	var project string
	var all, asJSON, toReview bool
	cmd := &cobra.Command{
		Use:   "ls [--project NAME] [--all] [--to-review]",
		Short: "List runs with state, review, kind, base and workspace path",
		Long: `List runs, oldest first, with their workspace state, where their change set
stands (REVIEW: submitted, approved, applied or rejected; - while nothing
is submitted), kind, base revision and workspace path. --to-review lists
only the runs whose change set awaits a decision (submitted). An overlay
workspace has no path on the host: its merged view exists only inside the
run's sandbox (paddock show RUN names its layers). Runs removed with
'paddock rm' are hidden unless --all. --json carries the same (review).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			runs, err := c.Runs(cmd.Context(), paddock.RunFilter{Project: project, Removed: all})
			if err != nil {
				return err
			}
			if toReview {
				runs = slices.DeleteFunc(runs, func(r *paddock.Run) bool { return r.Review != paddock.ReviewSubmitted })
			}
			return a.output(asJSON, runs, func(w io.Writer) { printRuns(w, runs) })
		},
	}
	cmd.Flags().StringVarP(&project, "project", "p", "", "only this project's runs")
	cmd.Flags().BoolVarP(&all, "all", "a", false, "include removed runs")
	cmd.Flags().BoolVar(&toReview, "to-review", false, "only the runs whose change set awaits a decision")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printRuns(w io.Writer, runs []*paddock.Run) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// With nodes that share a store, each run's node, and its state when
	// it is not alive.
	nodes := false
	for _, r := range runs {
		nodes = nodes || r.Node != ""
	}
	head := "RUN\tPROJECT\tKIND\tSTATE\tREVIEW\tBASE\tAGE\tWORKSPACE"
	if nodes {
		head = "RUN\tPROJECT\tNODE\tKIND\tSTATE\tREVIEW\tBASE\tAGE\tWORKSPACE"
	}
	fmt.Fprintln(tw, head)
	for _, r := range runs {
		kind, base, root := "-", "-", "-"
		if w := r.Workspace; w != nil {
			kind, root = string(w.Kind), w.Root
			if w.Kind == paddock.KindOverlay {
				// The path holds only the layers; the view is the sandbox's.
				root = overlaySeen
			}
			base = short(w.BaseRevision)
			if w.Branch != "" {
				base += " (" + w.Branch + ")"
			}
		}
		node := ""
		if nodes {
			node = termsafe.Field(cmp.Or(r.Node, "-"))
			if r.NodeState != "" && r.NodeState != paddock.NodeAlive {
				node += " (" + string(r.NodeState) + ")"
			}
			node += "\t"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s%s\t%s\t%s\t%s\t%s\t%s\n", termsafe.Field(r.ID), termsafe.Field(r.Project), node, kind, r.State(), cmp.Or(r.Review, "-"), termsafe.Field(base), age(r.CreatedAt), termsafe.Field(root))
	}
	tw.Flush()
}

// overlaySeen is where an overlay workspace is: not at a host path.
const overlaySeen = "overlay (seen inside the run's sandbox)"

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func age(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
