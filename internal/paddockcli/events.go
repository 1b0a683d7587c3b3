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
	var follow, asJSON, all bool
	var types []string
	cmd := &cobra.Command{
		Use:   "events (RUN | --all [--types T,…]) [--follow] [--json] [--after SEQ]",
		Short: "Print a run's events, or every run's notices",
		Long: `Print a run's events in order. Every event has a seq, strictly increasing per
run with no gaps; --after SEQ starts after one. --follow keeps waiting for new
events until interrupted, across a restart of the daemon; a daemon that stays
away for 10 seconds ends it (exit 8). --json prints one JSON object per line.

--all follows the notices of every run instead (the firehose: submits,
approvals, applies, rejections, access requests, jobs' ends, lost nodes;
docs/WEBHOOKS.md) until interrupted, each with its notice id, which --after
then names; --types keeps only some.

Exit codes: 0 done; 2 an unknown notice type; 3 no such run; 8 no daemon answers.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if all {
				return exactArgs(0)(cmd, args)
			}
			return exactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(termsafe.JSONWriter{W: a.stdout})
			enc.SetEscapeHTML(false)
			if !all && len(types) > 0 {
				return usageError{"--types goes with --all"}
			}
			if all {
				err := c.FollowNotices(ctx, after, types, func(n *paddock.Notice) error {
					if asJSON {
						return enc.Encode(n)
					}
					printNotice(a, n)
					return nil
				})
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
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
	cmd.Flags().Int64Var(&after, "after", 0, "print only events after this seq (with --all, this notice id)")
	cmd.Flags().BoolVar(&all, "all", false, "follow the notices of every run (the firehose)")
	cmd.Flags().StringSliceVar(&types, "types", nil, "with --all, only notices of these types")
	return cmd
}

// printNotice prints a notice on one line: its id, time, type, run and
// data.
func printNotice(a *app, n *paddock.Notice) {
	fmt.Fprintf(a.stdout, "%4d  %s  %-20s %s %s\n", n.ID, n.Time.Local().Format("2006-01-02 15:04:05.000"), termsafe.Field(n.Type),
		termsafe.Field(n.RunID), termsafe.Field(string(n.Data)))
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
