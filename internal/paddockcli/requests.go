package paddockcli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

func capabilitiesCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "capabilities RUN",
		Short: "What a run may do now: its tools, their narrowing, network, limits, grants",
		Long: `Show what a run may do now, derived from its agent definition, the grants
made on it and what the sandbox recorded for its latest command; never from
prose. An agent calls the same as its capabilities tool.

Exit codes: 0 shown; 3 no such run.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			caps, err := c.Capabilities(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.output(asJSON, caps, func(w io.Writer) {
				fmt.Fprintf(w, "run:        %s (%s, %s)\n", caps.Run, caps.State, caps.Workspace)
				fmt.Fprintf(w, "agent:      %s %s\n", caps.Agent, caps.AgentHash)
				var names []string
				for _, t := range caps.Tools {
					names = append(names, t.Name)
				}
				fmt.Fprintf(w, "tools:      %s\n", strings.Join(names, ", "))
				for _, t := range caps.Tools {
					printRule(w, t.Name, t.Allow, t.Deny, t.Ask)
				}
				fmt.Fprintf(w, "network:    %s unless a command asks; at most %s\n", caps.Net, cmp.Or(caps.NetCeiling, "none"))
				if len(caps.Checks) > 0 {
					fmt.Fprintf(w, "checks:     %s\n", strings.Join(caps.Checks, ", "))
				}
				for _, g := range caps.Grants {
					fmt.Fprintf(w, "granted:    %s %s\n", g.ID, describeRequest(g))
				}
				for _, g := range caps.Pending {
					fmt.Fprintf(w, "pending:    %s %s\n", g.ID, describeRequest(g))
				}
				if e := caps.Enforcement; e != nil {
					fmt.Fprintf(w, "enforced:   landlock ABI %d, seccomp %v, network %s (the latest command)\n", e.Landlock, e.Seccomp, e.Net)
				}
				holds, of := caps.Holds, "a command with no network, on this daemon's kernel"
				if e := caps.Enforcement; e != nil && len(e.Holds) > 0 {
					holds, of = e.Holds, "the latest command"
				}
				if len(holds) > 0 {
					fmt.Fprintf(w, "held by:    (%s)\n", of)
					PrintHolds(w, holds)
				}
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the capabilities as JSON")
	return cmd
}

// PrintHolds prints what held each property of a confinement, a line each.
func PrintHolds(w io.Writer, holds []paddock.Hold) {
	for _, h := range holds {
		by := strings.Join(h.HeldBy, ", ")
		if by == "" {
			by = "nothing"
		}
		if h.Note != "" {
			by += " (" + h.Note + ")"
		}
		fmt.Fprintf(w, "  %-18s %s\n", h.Property, termsafe.Text(by))
	}
}

// describeRequest says what a request asks for, in a line.
func describeRequest(q *paddock.AccessRequest) string {
	switch q.Kind {
	case paddock.AccessTool:
		return "tool " + q.Tool
	case paddock.AccessCommand:
		return "command " + fmt.Sprintf("%q", strings.Join(q.Command, " "))
	case paddock.AccessPath:
		return q.Tool + " on " + q.Path
	case paddock.AccessNetwork:
		return "network " + q.Domain
	case paddock.AccessLimit:
		return "limit " + q.Limit + "=" + q.Value
	}
	return string(q.Kind)
}

func requestsCmd(a *app) *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "requests RUN [--all]",
		Short: "A run's pending access requests (--all: decided ones too)",
		Long: `List the requests a run's agent made for more than its definition grants
(a tool, a command, a path, a network domain, a limit), with their reasons.
Decide each with 'paddock grant RUN ID' or 'paddock deny RUN ID'.

Exit codes: 0 listed; 3 no such run.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			qs, err := c.AccessRequests(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			shown := []*paddock.AccessRequest{}
			for _, q := range qs {
				if all || q.State == paddock.RequestPending {
					shown = append(shown, q)
				}
			}
			return a.output(asJSON, shown, func(w io.Writer) {
				if len(shown) == 0 {
					fmt.Fprintln(w, "no pending requests")
				}
				for _, q := range shown {
					fmt.Fprintf(w, "%s  %-8s %s\n    reason: %s\n", q.ID, q.State, describeRequest(q), q.Reason)
				}
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "list decided requests too")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the requests as JSON")
	return cmd
}

func grantCmd(a *app) *cobra.Command { return decideCmd(a, true) }
func denyCmd(a *app) *cobra.Command  { return decideCmd(a, false) }

func decideCmd(a *app, grant bool) *cobra.Command {
	var asJSON bool
	var note string
	verb, past := "deny", "denied"
	if grant {
		verb, past = "grant", "granted"
	}
	cmd := &cobra.Command{
		Use:   verb + " RUN REQUEST [--note TEXT]",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a run's pending access request",
		Long: `Decide a pending access request (see 'paddock requests RUN'). A grant is an
event on the run and takes effect on the agent's next call; an agent's own
token can never grant.

Exit codes: 0 ` + past + `; 3 no such run or request; 4 decided already; 6 not an operator.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			decide := c.Deny
			if grant {
				decide = c.Grant
			}
			q, err := decide(cmd.Context(), args[0], args[1], note)
			if err != nil {
				return err
			}
			return a.output(asJSON, q, func(w io.Writer) { fmt.Fprintf(w, "%s %s: %s\n", past, q.ID, describeRequest(q)) })
		},
	}
	cmd.Flags().StringVar(&note, "note", "", "what to tell the agent")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the request as JSON")
	return cmd
}

func verifyCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify RUN [build|test|lint|format-check]...",
		Short: "Run the project manifest's checks in a run (build, lint and test by default)",
		Long: `Run the checks the project's manifest declares (read from the base revision
as the host sees it, never from the workspace) in the run's sandbox, one
after the other, network off, until one fails. An agent picks checks by
name, never a command line. The result says which change set (by hash) the
checks ran against, whether each passed, the end of its output and, where
the tool reports them, its test counts. 'paddock manifest PROJECT' shows
the checks.

With no CHECK named it runs build, lint and test by default (those of them
the manifest declares, in that order); format-check runs only when named.

Exit codes: 0 every check passed; 1 a check failed; 3 no such run; 6 the
run's agent may not verify; 7 the manifest declares no such check.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 {
				return usageError{"usage: " + cmd.UseLine()}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			stop := a.followChecks(cmd.Context(), c, args[0], asJSON)
			res, err := c.Verify(cmd.Context(), args[0], paddock.VerifyRequest{Checks: args[1:]})
			stop()
			if err != nil {
				return err
			}
			if err := a.output(asJSON, res, func(w io.Writer) { printVerify(w, res) }); err != nil {
				return err
			}
			if !res.Passed {
				return &execError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}

// lastLines keeps the last n lines of s (the whole output is in --json).
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return s
	}
	return fmt.Sprintf("… %d lines before (--json has them)\n", len(lines)-n) + strings.Join(lines[len(lines)-n:], "\n")
}

// followChecks prints each check on stderr as it ends (a verify can take
// minutes), from the run's exec events, unless the output is JSON for a
// script. The returned function stops it.
func (a *app) followChecks(ctx context.Context, c *client.Client, id string, quiet bool) func() {
	r, err := c.Run(ctx, id)
	if quiet || err != nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		after := r.LastSeq
		for ctx.Err() == nil {
			evs, err := c.WaitEvents(ctx, id, after, 0)
			if err != nil {
				return
			}
			for _, ev := range evs {
				after = ev.Seq
				if ev.Type != paddock.EventExec {
					continue
				}
				var e struct {
					Argv       []string `json:"argv"`
					ExitCode   int      `json:"exit_code"`
					DurationMS float64  `json:"duration_ms"`
				}
				json.Unmarshal(ev.Data, &e)
				fmt.Fprintf(a.stderr, "paddock: ran %s: exit %d, %.1fs\n", strings.Join(e.Argv, " "), e.ExitCode, e.DurationMS/1000)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// printVerify says how each check of a verify went, and for which change set.
func printVerify(w io.Writer, res *paddock.VerifyResult) {
	for _, ch := range res.Checks {
		state := "passed"
		switch {
		case ch.Skipped != "":
			state = "skipped (" + ch.Skipped + ")"
		case !ch.Passed:
			state = fmt.Sprintf("FAILED (exit %d)", ch.ExitCode)
		}
		fmt.Fprintf(w, "%-12s %-40s %s %.1fs\n", ch.Name, strings.Join(ch.Argv, " "), state, ch.DurationMS/1000)
		if ch.Tests != nil {
			fmt.Fprintf(w, "             tests: %d passed, %d failed, %d skipped\n", ch.Tests.Passed, ch.Tests.Failed, ch.Tests.Skipped)
			if len(ch.Tests.Failures) > 0 {
				fmt.Fprintf(w, "             failed: %s\n", strings.Join(ch.Tests.Failures, ", "))
			}
		}
		if !ch.Passed && ch.Skipped == "" && ch.Output != "" {
			fmt.Fprintf(w, "%s\n", indent(lastLines(ch.Output, 40)))
		}
	}
	stale := ""
	if res.Stale {
		stale = " (the workspace changed while the checks ran)"
	}
	fmt.Fprintf(w, "change set %s: %s%s\n", res.Hash, map[bool]string{true: "passed", false: "failed"}[res.Passed], stale)
}
