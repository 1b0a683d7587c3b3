package paddockcli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func gcCmd(a *app) *cobra.Command {
	var dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "gc [--dry-run]",
		Short: "Find and clean orphaned workspaces",
		Long: `Reconcile the records with the disk and clean what is left over:

  - a run whose workspace directory is gone becomes orphaned, and its
    remaining metadata (a worktree's record in the project) is removed;
  - a rejected workspace kept by the manual cleanup policy is removed;
  - a directory under the workspaces directory with no live record is deleted;
  - a cleanup that did not finish is finished.

Nothing retained is ever deleted: not a retained run, and not a directory with
a retention marker even if its record is lost. --dry-run only reports.

Exit codes: 0 done (findings are listed; a failed cleanup is reported as such).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			fs, err := c.GC(cmd.Context(), dryRun)
			if err != nil {
				return err
			}
			return a.output(asJSON, fs, func(w io.Writer) {
				if len(fs) == 0 {
					fmt.Fprintln(w, "nothing to collect")
					return
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "RUN\tACTION\tISSUE\tPATH")
				for _, f := range fs {
					run := f.RunID
					if run == "" {
						run = "-"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", run, f.Action, f.Issue, f.Path)
				}
				tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVarP(&dryRun, "dry-run", "n", false, "only report what would be cleaned")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
