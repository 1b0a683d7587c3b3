package paddockcli

import (
	"fmt"
	"io"

	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

func reviewCmd(a *app) *cobra.Command {
	var asJSON bool
	var agentName string
	cmd := &cobra.Command{
		Use:   "review RUN [--agent NAME]",
		Short: "Make the review run of a run's submitted change set",
		Long: `Make a review run for RUN's submitted change set: a read run whose workspace
is exactly that change set on its base, by hash, for a reviewer (a person, or
an agent given 'paddock mcp REVIEW') to read, build and test.

- The change set is committed from its frozen blobs onto its base: a commit
  no ref of the project names. The review run starts at it, so its git's
  HEAD is the coder's work, with the base as its parent.
- Its commands run over a throwaway layer: builds and tests work, and
  nothing they write (files, a git commit, a git config) outlives them or
  reaches RUN, its change set, the project or its refs.
- Its write tools are not offered and refused if called; it can never
  submit, approve or apply: a reviewer's verdict is a finding, and only a
  person approves RUN's change set.
- Asked again for the same hash, review answers the same live review run.
  When RUN's agent submits again, its live reviews move to the new hash: a
  new review run, the older rejected.

--agent names the review run's definition (a stored one whose workspace is
read; default: the built-in reviewer).

Exit codes: 0 made or found; 3 no such run; 4 nothing submitted, or RUN is
itself a review; 2 a definition that writes.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := c.Review(cmd.Context(), args[0], agentName)
			if err != nil {
				return err
			}
			return a.output(asJSON, r, func(w io.Writer) {
				rv := r.ReviewOf
				fmt.Fprintf(w, "review run %s (agent %s) of run %s's change set %s\n", r.ID, r.Agent.Name, rv.Run, rv.Hash)
				fmt.Fprintf(w, "its HEAD (detached): %s, the change set committed onto run %s's base\n", rv.Commit, rv.Run)
				for _, p := range rv.Skipped {
					fmt.Fprintf(w, "  not in the commit (never applied; see paddock diff %s): %s\n", rv.Run, termsafe.Text(p))
				}
				fmt.Fprintf(w, "read it: paddock exec %s -- CMD, or give an agent: paddock mcp %s\n", r.ID, r.ID)
			})
		},
	}
	cmd.Flags().StringVar(&agentName, "agent", "", "the review run's agent definition (read only; default: reviewer)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the review run as JSON")
	return cmd
}
