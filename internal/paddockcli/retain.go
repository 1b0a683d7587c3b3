package paddockcli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func retainCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "retain RUN",
		Short: "Keep a run's workspace for good",
		Long: `Retain a run's workspace. Retention is a hard stop: no later command, policy,
garbage collection or crash recovery deletes a retained workspace. It stays
where 'paddock show' says until you delete it yourself.

Exit codes: 0 retained; 3 no such run; 4 the run's state forbids it.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := c.Retain(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.output(asJSON, r, func(w io.Writer) {
				fmt.Fprintf(w, "retained %s at %s\n", r.ID, r.Workspace.Root)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run as JSON")
	return cmd
}
