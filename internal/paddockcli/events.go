package paddockcli

import (
	"encoding/json"
	"fmt"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

func eventsCmd(a *app) *cobra.Command {
	var after int64
	var follow, asJSON bool
	cmd := &cobra.Command{
		Use:   "events RUN [--follow] [--json] [--after SEQ]",
		Short: "Print a run's events",
		Long: `Print a run's events in order. Every event has a seq, strictly increasing per
run with no gaps; --after SEQ starts after one. --follow keeps waiting for new
events until interrupted, across a restart of the daemon; a daemon that stays
away for 10 seconds ends it (exit 8). --json prints one JSON object per line.

Exit codes: 0 done; 3 no such run; 8 no daemon answers.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(termsafe.JSONWriter{W: a.stdout})
			enc.SetEscapeHTML(false)
			print := func(e *paddock.Event) error {
				if asJSON {
					return enc.Encode(e)
				}
				printEvent(a, e)
				return nil
			}
			if follow {
				// Server-sent events, resumed where they left off if the
				// connection drops, until interrupted.
				err := c.Follow(ctx, args[0], after, print)
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			for {
				evs, err := c.Events(ctx, args[0], after, 500)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				for _, e := range evs {
					print(e)
					after = e.Seq
				}
				if len(evs) < 500 {
					return nil
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep waiting for new events")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line")
	cmd.Flags().Int64Var(&after, "after", 0, "print only events after this seq")
	return cmd
}

func printEvent(a *app, e *paddock.Event) {
	data := string(e.Data)
	if e.Type == paddock.TransitionEvent {
		var d paddock.TransitionData
		if json.Unmarshal(e.Data, &d) == nil {
			data = fmt.Sprintf("%s -> %s", d.From, d.To)
			if d.Reason != "" {
				data += " (" + d.Reason + ")"
			}
		}
	}
	// Event data names agents' files: shown escaped, on one line.
	fmt.Fprintf(a.stdout, "%4d  %s  %-20s %s\n", e.Seq, e.Time.Local().Format("2006-01-02 15:04:05.000"), termsafe.Field(e.Type), termsafe.Field(data))
}
