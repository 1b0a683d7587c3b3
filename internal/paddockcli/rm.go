package paddockcli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func rmCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rm RUN",
		Short: "Remove a run's workspace and hide the run",
		Long: `Remove a run: an undecided run is rejected first, its workspace is deleted
(a worktree's metadata in the project too), and the run leaves 'paddock ls'.
Its record and events stay ('paddock ls --all', 'paddock events').

Refused for a retained run (paddock never deletes a retained workspace), for
an active one (checkpoint or reject it first) and for one still being prepared.

Exit codes: 0 removed; 3 no such run; 4 retained or active; 5 being prepared.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := c.Remove(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.output(asJSON, r, func(w io.Writer) { fmt.Fprintf(w, "removed %s\n", r.ID) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run as JSON")
	return cmd
}
