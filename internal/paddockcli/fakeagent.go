package paddockcli

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/paddock-dev/paddock/fakeagent"
	"github.com/spf13/cobra"
)

func fakeAgentCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fake-agent SCRIPT.json",
		Short: "Play a scripted agent and orchestrator against the daemon",
		Long: `Play a JSON script of protocol steps (bootstrap, tool, exec, start, wait,
cancel, status, events, artifact, submit, approve, apply, reject, create)
against the daemon, acting as the run's agent (with its own token) or as the
operator, and check each step's outcome: success, or the error code the step
expects. It prints one line per step and stops at the first surprise. See
package fakeagent for the format, and cmd/paddockd/testdata/contract.json.

Exit codes: 0 every step went as written; 1 a step did not; 2 a bad script.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(args[0])
			if err != nil {
				return usageError{err.Error()}
			}
			var steps []fakeagent.Step
			if err := json.Unmarshal(b, &steps); err != nil {
				return usageError{fmt.Sprintf("%s: %v", args[0], err)}
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			r := &fakeagent.Runner{Operator: c, Log: a.stdout}
			return r.Run(cmd.Context(), steps)
		},
	}
	return cmd
}
