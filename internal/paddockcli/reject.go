package paddockcli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func rejectCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "reject RUN",
		Short: "Discard a run's result",
		Long: `Reject a run: its result is discarded and the project is left exactly as it
was before the run was created. Under the on_reject cleanup policy (the
default) the workspace is removed at once; under manual it stays until
'paddock rm' or 'paddock gc'. A retained run cannot be rejected.

Exit codes: 0 rejected; 3 no such run; 4 the run's state forbids it.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := c.Reject(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.output(asJSON, r, func(w io.Writer) {
				fmt.Fprintf(w, "rejected %s (workspace %s)\n", r.ID, r.State())
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run as JSON")
	return cmd
}
