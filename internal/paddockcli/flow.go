package paddockcli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/termsafe"
	"github.com/spf13/cobra"
)

func flowCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "flow start WORKFLOW --project P --task TEXT | ls | show ID | events ID",
		Short: "Workflows: agents in states, each picking only from its menu",
		Long: `A workflow is a state machine over runs. Each state names the agent
definition whose run works in it; its transitions are the events that agent
may pick (its menu, offered as MCP tools and at POST /v1/runs/RUN/menu/EVENT).
An event off the menu is refused (forbidden, rule not_on_menu) and recorded
in the flow's log.

Built in: task-with-review.
  coding (coder, write)  --done-->  reviewing
  reviewing (reviewer: a review run of exactly what the coder submitted)
      --approve [head]-->                awaiting_approval (a person approves)
      --request_changes [head, findings]--> coding (at most 3 rounds, then failed)
A reviewer's approve is a finding: it approves no change set. Only a person
(paddock approve CODER-RUN --hash H) approves what lands. done submits the
coder's change set if it is not submitted; a coder that changed nothing
leaves the reviewer an empty change set, and its menu says so. An event
guarded by the head carries the hash the agent reviewed and is refused
(conflict) if the change set moved since.

A workflow file (TOML), for 'flow start FILE.toml':

  name = "docs-review"
  start = "writing"
  max_rounds = 2
  [[state]]
  name = "writing"
  agent = "coder"
  [[state.transition]]
  event = "done"
  to = "reviewing"
  [[state]]
  name = "reviewing"
  agent = "reviewer"
  reviews = "writing"
  [[state.transition]]
  event = "approve"
  to = "accepted"
  guard = "head == context.head"
  [[state.transition]]
  event = "request_changes"
  to = "writing"
  guard = "head == context.head"
  round = true
  findings = true
  [[state]]
  name = "accepted"
  end = true
  [[state]]
  name = "failed"
  end = true

Each state's run is made when the flow enters it, told its task (paddock
show, and the task artifact); if its definition has a command, paddock
starts it; otherwise an orchestrator drives the agent through the API or
MCP. Flows are kept in the state store: they survive daemon restarts in
every state.

Exit codes: 0 done; 2 a bad workflow or request; 3 no such flow, project
or workflow.`,
	}
	cmd.AddCommand(flowStartCmd(a), flowLsCmd(a), flowShowCmd(a), flowEventsCmd(a))
	return cmd
}

// The sub-verbs of flow, each with its --json.

func flowStartCmd(a *app) *cobra.Command {
	var asJSON bool
	var project, task string
	start := &cobra.Command{
		Use:   "start WORKFLOW|FILE.toml --project P --task TEXT",
		Short: "Start a flow of a built-in workflow or a workflow file",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := paddock.StartFlowRequest{Project: project, Task: task}
			if strings.HasSuffix(args[0], ".toml") {
				b, err := os.ReadFile(args[0])
				if err != nil {
					return usageError{fmt.Sprintf("workflow file: %v", err)}
				}
				req.Source, req.File = string(b), filepath.Base(args[0])
			} else {
				req.Workflow = args[0]
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			f, err := c.StartFlow(cmd.Context(), req)
			if err != nil {
				return err
			}
			return a.output(asJSON, f, func(w io.Writer) { printFlow(w, f) })
		},
	}
	start.Flags().StringVar(&project, "project", "", "the project (required)")
	start.Flags().StringVar(&task, "task", "", "what the flow is to do (required)")
	start.MarkFlagRequired("project")
	start.MarkFlagRequired("task")
	start.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return start
}

func flowLsCmd(a *app) *cobra.Command {
	var asJSON bool
	var project string
	ls := &cobra.Command{
		Use:   "ls [--project P]",
		Short: "List flows",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			fs, err := c.Flows(cmd.Context(), project)
			if err != nil {
				return err
			}
			return a.output(asJSON, fs, func(w io.Writer) {
				for _, f := range fs {
					fmt.Fprintf(w, "%s  %-18s  %-18s  round %d  %s  %s\n", f.ID, f.Workflow.Name, f.State, f.Round, f.Project, termsafe.Text(firstLine(f.Task)))
				}
			})
		},
	}
	ls.Flags().StringVar(&project, "project", "", "only this project's flows")
	ls.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return ls
}

func flowShowCmd(a *app) *cobra.Command {
	var asJSON bool
	show := &cobra.Command{
		Use:   "show ID",
		Short: "A flow: its state, its runs, what it waits for",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			f, err := c.Flow(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.output(asJSON, f, func(w io.Writer) { printFlow(w, f) })
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return show
}

func flowEventsCmd(a *app) *cobra.Command {
	var asJSON bool
	events := &cobra.Command{
		Use:   "events ID",
		Short: "A flow's log: every step and every refusal",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			f, err := c.Flow(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.output(asJSON, f.Events, func(w io.Writer) {
				for _, e := range f.Events {
					b, _ := json.Marshal(e.Data)
					fmt.Fprintf(w, "%4d  %s  %-12s  %s\n", e.Seq, e.At.Format("15:04:05"), e.Type, termsafe.Text(string(b)))
				}
			})
		},
	}
	events.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return events
}

func printFlow(w io.Writer, f *paddock.Flow) {
	fmt.Fprintf(w, "flow %s (%s) of %s: %s, round %d\n", f.ID, f.Workflow.Name, f.Project, f.State, f.Round)
	fmt.Fprintf(w, "task: %s\n", termsafe.Text(f.Task))
	states := make([]string, 0, len(f.Runs))
	for s := range f.Runs {
		states = append(states, s)
	}
	sort.Strings(states)
	for _, s := range states {
		fmt.Fprintf(w, "  %-18s run %s\n", s, f.Runs[s])
	}
	if f.Head != "" {
		fmt.Fprintf(w, "under review: %s\n", f.Head)
	}
	for _, x := range f.Findings {
		fmt.Fprintf(w, "finding: %s\n", termsafe.Text(x))
	}
	switch {
	case f.State == "awaiting_approval" && f.Unsubmitted:
		fmt.Fprintf(w, "nothing to approve: run %s submitted no change set (its agent changed nothing); start another flow to try again\n", f.Runs[f.Workflow.Start])
	case f.State == "awaiting_approval":
		coder := f.Runs[f.Workflow.Start]
		fmt.Fprintf(w, "waiting for a person: paddock diff %s, then paddock approve %s --hash H (a reviewer's approve approves nothing)\n", coder, coder)
	case !f.Ended.IsZero():
		fmt.Fprintf(w, "ended in %s\n", f.State)
	default:
		fmt.Fprintf(w, "working: run %s (paddock capabilities %s shows its menu)\n", f.Runs[f.State], f.Runs[f.State])
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

func menuCmd(a *app) *cobra.Command {
	var asJSON bool
	var head, note string
	var findings []string
	cmd := &cobra.Command{
		Use:   "menu RUN [EVENT [--head H] [--finding TEXT]... [--note TEXT]]",
		Short: "A run's workflow menu; with EVENT, pick it",
		Long: `Without EVENT, print what RUN's agent may pick from its flow now, and what
it is given (the task, the change set under review, findings). With EVENT,
pick it, as the agent: only an event on the menu is taken, a guarded one
needs --head (the change-set hash reviewed), a findings one --finding.
Inside a run, RUN may be "$PADDOCK_RUN".

Exit codes: 0 done; 2 a missing head or findings; 4 the head moved;
6 not on the menu.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			if len(args) == 2 {
				f, err := c.ForAgent().PickEvent(cmd.Context(), args[0], args[1], paddock.MenuEventRequest{Head: head, Findings: findings, Note: note})
				if err != nil {
					return err
				}
				return a.output(asJSON, f, func(w io.Writer) { printFlow(w, f) })
			}
			caps, err := c.ForAgent().Capabilities(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			menu := caps.Menu
			if menu == nil {
				menu = &paddock.Menu{Items: []paddock.MenuItem{}}
			}
			return a.output(asJSON, menu, func(w io.Writer) {
				if menu.Flow == "" {
					fmt.Fprintf(w, "run %s works in no flow: its menu is empty\n", args[0])
					return
				}
				fmt.Fprintf(w, "flow %s, state %s\n", menu.Flow, menu.State)
				for _, it := range menu.Items {
					var needs []string
					if it.Guarded {
						needs = append(needs, "--head "+menu.Head)
					}
					if it.Findings {
						needs = append(needs, "--finding …")
					}
					fmt.Fprintf(w, "  %-18s %s  %s\n", it.Event, strings.Join(needs, " "), termsafe.Text(it.Description))
				}
				if len(menu.Items) == 0 {
					fmt.Fprintln(w, "  (nothing to pick now)")
				}
				keys := make([]string, 0, len(menu.Inputs))
				for k := range menu.Inputs {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					b, _ := json.Marshal(menu.Inputs[k])
					fmt.Fprintf(w, "%s: %s\n", k, termsafe.Text(string(b)))
				}
			})
		},
	}
	cmd.Flags().StringVar(&head, "head", "", "the change-set hash you reviewed (a guarded event)")
	cmd.Flags().StringArrayVar(&findings, "finding", nil, "a finding (repeat)")
	cmd.Flags().StringVar(&note, "note", "", "a note for the flow's log")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
