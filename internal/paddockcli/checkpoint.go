package paddockcli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func checkpointCmd(a *app) *cobra.Command {
	var reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "checkpoint RUN [--reason TEXT]",
		Short: "Record a run's workspace state and detach its session",
		Long: `Checkpoint a ready or active run: paddock records a digest of the workspace's
files (paths, modes, contents; .git excluded) and moves it to checkpointed.
'paddock resume' later compares against it and reports any drift. The daemon
checkpoints active runs itself when it stops or restarts.

Exit codes: 0 checkpointed; 3 no such run; 4 the run's state forbids it.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := c.Checkpoint(cmd.Context(), args[0], reason)
			if err != nil {
				return err
			}
			return a.output(asJSON, r, func(w io.Writer) {
				cp := r.Workspace.Checkpoint
				fmt.Fprintf(w, "checkpointed %s: %d files, %s\n", r.ID, cp.Files, cp.Digest)
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded with the checkpoint)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run as JSON")
	return cmd
}
