package paddockcli

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

func showCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "Show a run and its workspace",
		Long: `Show everything paddock records of a run: its workspace's kind, path, base
revision, state and the reason for it, cleanup policy, retention and latest
checkpoint. An overlay workspace's path is where its run sees it, inside
its sandbox; on the host that directory holds only the upper and work
layers, listed with the lower one (--json: overlay_layers). Look at the
view with paddock tool, exec or diff. Then where its jobs stand (idle before
its first) and the plan its agent gave last, if it gave one (--json: the
run alone; GET /v1/runs/RUN/status and /artifacts/plan give the rest).

Exit codes: 0 shown; 3 no such run.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := c.Run(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return a.output(true, r, nil)
			}
			// The jobs and the plan are the run's too; a daemon that has
			// neither route (an older one) shows the run alone.
			st, _ := c.JobStatus(cmd.Context(), r.ID)
			var plan *paddock.Plan
			if art, err := c.Artifact(cmd.Context(), r.ID, "plan"); err == nil {
				plan = new(paddock.Plan)
				if b, err := json.Marshal(art.Content); err != nil || json.Unmarshal(b, plan) != nil {
					plan = nil
				}
			}
			return a.output(false, r, func(w io.Writer) {
				printRun(w, r)
				printJobsAndPlan(w, st, plan)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printRun(w io.Writer, r *paddock.Run) {
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-16s %s\n", k+":", termsafe.Field(v))
		}
	}
	ts := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format(time.RFC3339)
	}
	line("run", r.ID)
	line("project", r.Project)
	line("access", string(r.Access))
	line("created", ts(r.CreatedAt))
	line("removed", ts(r.RemovedAt))
	line("events", fmt.Sprint(r.LastSeq))
	if r.Node != "" {
		line("node", r.Node+" ("+string(r.NodeState)+")")
	}
	ws := r.Workspace
	if ws == nil {
		line("workspace", "none")
		return
	}
	line("state", string(ws.State))
	line("review", r.Review)
	line("reason", ws.Reason)
	line("kind", string(ws.Kind))
	if l := ws.OverlayLayers; ws.Kind == paddock.KindOverlay {
		line("workspace", overlaySeen+" at "+ws.Root)
		if l != nil {
			line("lower layer", l.Lower)
			line("upper layer", l.Upper)
		}
	} else {
		line("workspace", ws.Root)
	}
	line("base", ws.BaseRef+" = "+ws.BaseRevision)
	line("branch", ws.Branch)
	line("fingerprint", ws.Fingerprint)
	line("cleanup policy", string(ws.CleanupPolicy))
	line("retained", ts(ws.RetainedAt))
	if cp := ws.Checkpoint; cp != nil && cp.Digest == "" {
		line("checkpoint", fmt.Sprintf("%s (%s)", ts(cp.At), cp.Reason))
	} else if cp != nil {
		line("checkpoint", fmt.Sprintf("%s, %d files, %s (%s)", ts(cp.At), cp.Files, cp.Digest, cp.Reason))
	}
}

// printJobsAndPlan prints where a run's jobs stand and its agent's plan.
func printJobsAndPlan(w io.Writer, st *paddock.JobStatus, plan *paddock.Plan) {
	if st != nil && st.State != "" {
		v := string(st.State)
		if j := st.Job; j != nil {
			v += fmt.Sprintf(" (job %s, %s", j.ID, j.Kind)
			if j.ExitCode != nil {
				v += fmt.Sprintf(", exit %d", *j.ExitCode)
			}
			if j.Reason != "" {
				v += ", " + j.Reason
			}
			v += ")"
		}
		fmt.Fprintf(w, "%-16s %s\n", "jobs:", termsafe.Field(v))
	}
	if plan == nil {
		return
	}
	fmt.Fprintf(w, "%-16s revision %d, %s\n", "plan:", plan.Revision, plan.UpdatedAt.Local().Format(time.RFC3339))
	if plan.Explanation != "" {
		fmt.Fprintf(w, "  %s\n", termsafe.Field(plan.Explanation))
	}
	mark := map[string]string{paddock.StepCompleted: "[x]", paddock.StepInProgress: "[>]", paddock.StepPending: "[ ]"}
	for _, s := range plan.Steps {
		m, ok := mark[s.Status]
		if !ok {
			m = "[?]"
		}
		fmt.Fprintf(w, "  %s %s\n", m, termsafe.Field(s.Step))
	}
}
