package paddockcli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func resumeCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "resume RUN",
		Short: "Attach a session to a ready or checkpointed run again",
		Long: `Resume a run: it becomes active. If its files changed since its checkpoint,
the drift is recorded as an event and reported here.

Exit codes: 0 resumed; 3 no such run; 4 the run's state forbids it.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			res, err := c.Resume(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.output(asJSON, res, func(w io.Writer) {
				fmt.Fprintf(w, "resumed %s\n", res.Run.ID)
				if res.Drift {
					fmt.Fprintln(w, "warning: the workspace changed while it was checkpointed")
				}
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
