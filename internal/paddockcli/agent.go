package paddockcli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/spf13/cobra"
)

func agentCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent add FILE | ls | show NAME | rm NAME",
		Short: "Agent definitions: who an agent is and what it may call",
		Long: `Agent definitions say what an agent may do, not how it is prompted. A
definition is a TOML file:

  name = "tester"
  description = "reads code and runs the tests"
  workspace = "write"            # write, read or none
  tools = ["read", "glob", "grep", "exec", "verify", "capabilities", "request_access"]
  network = "none"               # none, host, or allow=DOMAIN,…
  env = ["GOFLAGS"]              # NAME, NAME=VALUE or * (not PATH, GOFLAGS, GIT_*, …: name those)
  secrets = []                   # the daemon's secrets, by name
  command = ["my-agent", "--stdio"]   # how paddock starts it (optional)

  [tool.exec]                    # narrow exec by argv prefix
  allow = ["echo", "go test"]
  deny = ["go test -exec"]
  ask = ["git push"]             # each needs a person's approval

  [tool.write]                   # narrow write, edit, move, delete by path glob
  allow = ["docs/**"]

  [limits]
  timeout = "10m"
  procs = 256
  memory = "4GiB"

Tools: read, glob, grep, list, stat, write, edit, move, delete, exec, verify,
diff, submit, capabilities, request_access. Nothing else is offered; an
undeclared tool is refused. An exec rule looks at every command of a shell
line (pipelines, && || ; chains, $(…), sh -c, eval, and what env, xargs,
find -exec and the like run) and refuses what it cannot read with
confidence; the sandbox still confines what it allows. Where exec is
narrowed, env = ["*"] does not cover the protected variables (PATH,
BASH_ENV, LD_*, GIT_*, GOFLAGS and other *FLAGS, …): name each one allowed.

Built in: coder (write), reviewer (read; may run the manifest's checks),
decider (none). 'paddock create --agent NAME' makes a run with one; the run
keeps a copy.

Exit codes: 0 done; 2 the file is not a valid definition (file:line says
where); 3 no such agent; 4 a built-in's name.`,
	}
	cmd.AddCommand(agentAddCmd(a), agentLsCmd(a), agentShowCmd(a), agentRmCmd(a))
	return cmd
}

// The sub-verbs of agent, each with its --json.

func agentAddCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "add FILE",
		Short: "Store a definition (replacing one of its name)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := os.ReadFile(args[0])
			if err != nil {
				return usageError{err.Error()}
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			rec, err := c.AddAgent(cmd.Context(), paddock.AddAgentRequest{File: filepath.Base(args[0]), Source: string(src)})
			if err != nil {
				return err
			}
			return a.output(asJSON, rec, func(w io.Writer) { fmt.Fprintf(w, "agent %s %s\n", rec.Definition.Name, rec.Hash) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func agentLsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the built-in and stored definitions",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			recs, err := c.Agents(cmd.Context())
			if err != nil {
				return err
			}
			return a.output(asJSON, recs, func(w io.Writer) {
				for _, r := range recs {
					kind := "stored"
					if r.Builtin {
						kind = "built-in"
					}
					fmt.Fprintf(w, "%-16s %-8s %-9s %s\n", r.Definition.Name, workspaceOf(&r.Definition), kind, r.Definition.Description)
				}
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func agentShowCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a definition: its tools and how they are narrowed",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			rec, err := c.Agent(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.output(asJSON, rec, func(w io.Writer) { printDefinition(w, &rec.Definition, rec.Hash) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func agentRmCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a stored definition (runs made with it keep their copies)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			if err := c.RemoveAgent(cmd.Context(), args[0]); err != nil {
				return err
			}
			return a.output(asJSON, map[string]string{"removed": args[0]}, func(w io.Writer) { fmt.Fprintf(w, "removed %s\n", args[0]) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func workspaceOf(d *paddock.AgentDefinition) string {
	if d.Workspace == "" {
		return "write"
	}
	return d.Workspace
}

func printDefinition(w io.Writer, d *paddock.AgentDefinition, hash string) {
	fmt.Fprintf(w, "name:        %s\n", d.Name)
	if d.Description != "" {
		fmt.Fprintf(w, "description: %s\n", d.Description)
	}
	fmt.Fprintf(w, "hash:        %s\n", hash)
	fmt.Fprintf(w, "workspace:   %s\n", workspaceOf(d))
	fmt.Fprintf(w, "tools:       %s\n", strings.Join(d.Tools, ", "))
	for t, r := range d.Tool {
		printRule(w, t, r.Allow, r.Deny, r.Ask)
	}
	fmt.Fprintf(w, "network:     %s\n", orNone(d.Net))
	if len(d.Env) > 0 {
		fmt.Fprintf(w, "env:         %s\n", strings.Join(d.Env, ", "))
	}
	if len(d.Secrets) > 0 {
		fmt.Fprintf(w, "secrets:     %s\n", strings.Join(d.Secrets, ", "))
	}
	if len(d.Command) > 0 {
		fmt.Fprintf(w, "command:     %s\n", strings.Join(d.Command, " "))
	}
	if d.Limits != (paddock.AgentLimits{}) {
		fmt.Fprintf(w, "limits:      %+v\n", d.Limits)
	}
}

func printRule(w io.Writer, tool string, allow, deny, ask []string) {
	for _, x := range []struct {
		what  string
		rules []string
	}{{"allow", allow}, {"deny", deny}, {"ask", ask}} {
		if len(x.rules) > 0 {
			fmt.Fprintf(w, "  %s %-5s  %s\n", tool, x.what, strings.Join(quoteAll(x.rules), ", "))
		}
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
