package main

import (
	"fmt"
	"io"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

func (a *app) showCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "Show a run and its workspace",
		Long: `Show everything paddock records of a run: its workspace's kind, path, base
revision, state and the reason for it, cleanup policy, retention and latest
checkpoint. An overlay workspace's path is where its run sees it, inside
its sandbox; on the host that directory holds only the upper and work
layers, listed with the lower one (--json: overlay_layers). Look at the
view with paddock tool, exec or diff.

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
			return a.output(asJSON, r, func(w io.Writer) { printRun(w, r) })
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
	if cp := ws.Checkpoint; cp != nil {
		line("checkpoint", fmt.Sprintf("%s, %d files, %s (%s)", ts(cp.At), cp.Files, cp.Digest, cp.Reason))
	}
}
