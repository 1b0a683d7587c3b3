package paddockcli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/approval"
	"github.com/paddock-dev/paddock/strictjson"
	"github.com/spf13/cobra"
)

func projectCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "project",
		Short: "Declare and manage projects (the git repositories paddock guards)",
		Long: `A project is a declared root: a git repository on this machine that paddock
guards. Runs are made against a project; nothing writes into its root except
an approved apply and the metadata a worktree workspace needs (which cleanup
removes again). A project's settings (protected paths, attribution rules)
can be changed with paddock project set, also while it has runs; paddock
project show prints them, its approval policy in words.`,
	}
	cmd.AddCommand(projectAddCmd(a), projectSetCmd(a), projectShowCmd(a), projectLsCmd(a), projectRmCmd(a), projectUnlockCmd(a))
	return cmd
}

func projectAddCmd(a *app) *cobra.Command {
	var req paddock.AddProjectRequest
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "add PATH [--name NAME] [--protect PATTERN]...",
		Short: "Declare a git repository as a project",
		Long: `Declare the repository whose top-level directory is PATH as a project.

PATH must be the top of a non-bare git work tree with at least one commit.
The name defaults to the directory's name made plain (lower-case ASCII
letters, digits, '.', '_' and '-'); a name must be 1-63 of those characters.
A root can be declared once.

Protected paths: agents may never write under a path component that folds to
.git; by default they may not write agent or editor configuration either
(.claude/settings*.json, .codex/, .cursor/, .gemini/, .mcp.json,
.vscode/settings.json, .vscode/tasks.json, .devcontainer.json, .exrc, .envrc,
…: the README lists them). A pattern matches at any depth and by
folded names (case, Unicode look-alikes and invisible characters do not
count), so sub/.envrc and .Claude/settings.json are protected too; a change
set holding a protected path is never applied. --protect adds patterns;
--no-default-protect drops the default list.

Attribution lint: a submitted change set that credits a model or a tool with
the work is refused (attribution_leak), naming the file, the line, what
matched and the rule. The rules: robot-generated (the "🤖 Generated with …"
signature), co-author-trailer (Co-authored-by: naming an AI tool),
credit-trailer (Generated-by:, Assisted-by:, Signed-off-by: … naming one),
generated-with ("Generated with Claude Code", "This file was written by
ChatGPT"), co-author-line ("Co-written with Copilot"). Code and prose that
only name a model (a model id in configuration or a comment, docs about
using Claude or GPT) pass. --allow-attribution RULE allows one rule for this
project.

Shared caches: --cache NAME[:cow|:ro|:rw][=DIR] (repeatable) shows a cache in
every run's home where its tool looks: go-mod (~/go/pkg/mod), go-build
(~/.cache/go-build), npm (~/.npm), pip (~/.cache/pip), cargo
(~/.cargo/registry). cow, the default: each run sees the cache through a
copy-on-write layer of its own, so its tools read what the cache holds and
write as they need to (Go cannot use a read-only build cache), while the
cache itself is never written; a run's writes are its own and go with it.
Fill the cache yourself (e.g. GOMODCACHE=DIR go mod download, as the
sandbox's user), or once through a :rw run. :ro is strictly read-only: runs
write nothing there. :rw lets runs write the cache itself: state shared
between runs, so one run can leave there what another then uses; ask for it
only where a project's runs trust each other (check runs never get it).
Without =DIR the cache is the daemon's own, <state>/caches/PROJECT/NAME.

Change any of these settings later with paddock project set.

Exit codes: 0 added; 2 bad path or name; 4 name or root already declared.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := filepath.Abs(args[0])
			if err != nil {
				return usageError{err.Error()}
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			req.Path = path
			p, err := c.AddProject(cmd.Context(), req)
			if err != nil {
				return err
			}
			return a.output(asJSON, p, func(w io.Writer) {
				fmt.Fprintf(w, "added project %s (%s)\n", p.Name, p.Root)
			})
		},
	}
	cmd.Flags().StringVar(&req.Name, "name", "", "project name (default: derived from the directory name)")
	cmd.Flags().StringArrayVar(&req.Protect, "protect", nil, "also protect paths matching this pattern (repeatable)")
	cmd.Flags().BoolVar(&req.NoDefaultProtect, "no-default-protect", false, "drop the default protected paths (.git stays protected)")
	cmd.Flags().StringArrayVar(&req.AllowAttribution, "allow-attribution", nil, "allow this attribution-lint rule in the project's submissions (repeatable)")
	cmd.Flags().StringArrayVar(&req.Caches, "cache", nil, "a shared cache runs see: NAME[:cow|:ro|:rw][=DIR] (go-mod, go-build, npm, pip, cargo; cow by default; repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the project as JSON")
	return cmd
}

const projectSetLong = `Change the settings project add takes, besides the path and the name (which
identify the project: to change those, remove the project and add it again).
A setting not named keeps its value. Allowed while the project has runs: their
tool calls and next commands follow the new protected paths, their next
submission the new rules. The change is recorded on every live run of the
project (event project.settings_changed, with who made it) and in the
daemon's log.

Protected paths, as project add sets them: --protect PATTERN (repeatable)
gives the default list plus these patterns; with --no-default-protect, these
patterns alone; --default-protect goes back to the default list.

Attribution rules: --allow-attribution RULE (repeatable) is the whole list of
rules the project allows from now on; --no-allow-attribution allows none.
Rules: robot-generated, co-author-trailer, credit-trailer, generated-with,
co-author-line (see paddock project add --help).

Shared caches: --cache NAME[:cow|:ro|:rw][=DIR] (repeatable) adds a cache to
the project's list, or changes the one of that name; --no-cache NAME
(repeatable) removes one, --no-cache all removes them all, before any
--cache is added (see paddock project add --help). A live run's next
command gets the new caches, in a new sandbox once its current one is idle:
no checkpoint or resume needed.

Verify overrides: --check NAME=COMMAND (repeatable) is the whole list of
overrides from now on; a check named here runs COMMAND (sh -c, at the
workspace's top) instead of what the capability manifest detected, and an
empty COMMAND drops it; --no-check removes them all. They live in the
project's registration, never in the repository ('paddock manifest PROJECT'
shows the result).

Approval policy: --policy FILE reads an approval policy from FILE (- for
stdin), JSON read strictly (an unknown or repeated key is refused):
  {"approvals": 1, "from": ["role:reviewer", "role:admin"],
   "labels": [{"label": "ci_config", "approvals": 2}],
   "auto": {"max_lines": 20, "risky": ["ci_config", "secret"]}}
--policy team is the preset: one reviewer (or admin), two for a change set
with a risky label (ci_config, agent_config, executable, secret,
dependency_manifest); --policy default goes back to one approval by whoever
may approve. Neither ever lets a run's own principal approve it. Apply and
the merge queue decide by the policy as it is then (docs/POLICIES.md).

Exit codes: 0 changed; 2 nothing to set, or a bad pattern, rule or policy; 3 no such project.`

func projectSetCmd(a *app) *cobra.Command {
	var req paddock.SetProjectRequest
	var allow, caches, noCaches []string
	var noAllow, noCheck, asJSON bool
	var checks []string
	var policy string
	cmd := &cobra.Command{
		Use:   "set NAME [--protect PATTERN]... [--no-default-protect | --default-protect] [--allow-attribution RULE]... [--no-allow-attribution] [--cache SPEC]... [--no-cache NAME|all]... [--policy FILE|team|default]",
		Short: "Change a project's settings (protected paths, attribution rules, caches, approval policy)",
		Long:  projectSetLong,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case noAllow && len(allow) > 0:
				return usageError{"--no-allow-attribution and --allow-attribution contradict each other"}
			case noAllow:
				req.AllowAttribution = &[]string{}
			case len(allow) > 0:
				req.AllowAttribution = &allow
			}
			for _, n := range noCaches {
				if n == "all" {
					req.Caches = &[]string{}
				} else {
					req.RemoveCaches = append(req.RemoveCaches, n)
				}
			}
			req.AddCaches = caches
			switch {
			case noCheck && len(checks) > 0:
				return usageError{"--no-check and --check contradict each other"}
			case noCheck:
				req.Checks = &[]string{}
			case len(checks) > 0:
				req.Checks = &checks
			}
			if err := a.policyRequest(policy, &req); err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			p, err := c.SetProject(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			return a.output(asJSON, p, func(w io.Writer) { printSetProject(w, p) })
		},
	}
	cmd.Flags().StringArrayVar(&req.Protect, "protect", nil, "protect paths matching this pattern, besides the default list (repeatable)")
	cmd.Flags().BoolVar(&req.NoDefaultProtect, "no-default-protect", false, "protect only the --protect patterns (.git stays protected)")
	cmd.Flags().BoolVar(&req.DefaultProtect, "default-protect", false, "go back to the default protected paths")
	cmd.Flags().StringArrayVar(&allow, "allow-attribution", nil, "the attribution-lint rules the project allows (repeatable; replaces the list)")
	cmd.Flags().BoolVar(&noAllow, "no-allow-attribution", false, "allow no attribution-lint rule")
	cmd.Flags().StringArrayVar(&caches, "cache", nil, "add a shared cache, or change the one of its name: NAME[:cow|:ro|:rw][=DIR] (repeatable)")
	cmd.Flags().StringArrayVar(&noCaches, "no-cache", nil, "remove the shared cache NAME, or all of them with all (repeatable)")
	cmd.Flags().StringArrayVar(&checks, "check", nil, "verify's command for a check, NAME=COMMAND (build, test, lint, format-check; run with sh -c at the workspace's top; empty drops the check); the whole list from now on (repeatable)")
	cmd.Flags().BoolVar(&noCheck, "no-check", false, "drop every check override: verify runs what the manifest detects")
	cmd.Flags().StringVar(&policy, "policy", "", "the approval policy: a JSON FILE (- for stdin), team, or default")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the project as JSON")
	return cmd
}

// printSetProject is project set's answer: the settings as they are now.
func printSetProject(w io.Writer, p *paddock.Project) {
	prot := "the default list"
	if p.Protected != nil {
		prot = strings.Join(p.Protected, ", ")
		if len(p.Protected) == 0 {
			prot = "only .git"
		}
	}
	rules := "none"
	if len(p.AttributionAllow) > 0 {
		rules = strings.Join(p.AttributionAllow, ", ")
	}
	var cs []string
	for _, c := range p.Caches {
		cs = append(cs, c.Name+":"+c.Mode)
	}
	if len(cs) == 0 {
		cs = []string{"none"}
	}
	fmt.Fprintf(w, "project %s\n  protected: %s\n  attribution rules allowed: %s\n  caches: %s\n", p.Name, prot, rules, strings.Join(cs, ", "))
	printPolicy(w, p.Policy)
}

// maxPolicy bounds the approval policy --policy reads.
const maxPolicy = 64 << 10

// policyRequest puts --policy's policy in req: the team preset, the
// default, or a file's, read strictly.
func (a *app) policyRequest(arg string, req *paddock.SetProjectRequest) error {
	switch arg {
	case "":
		return nil
	case "team":
		req.ApprovalPolicy = paddock.TeamApprovalPolicy()
		return nil
	case "default":
		req.DefaultPolicy = true
		return nil
	}
	var raw []byte
	var err error
	switch {
	case arg == "-" && a.stdin == nil:
		return usageError{"--policy -: no stdin to read"}
	case arg == "-":
		raw, err = io.ReadAll(io.LimitReader(a.stdin, maxPolicy+1))
		if err == nil && len(raw) > maxPolicy {
			return usageError{"--policy -: stdin holds more than a policy (64 KiB)"}
		}
	default:
		raw, err = os.ReadFile(arg)
	}
	if err != nil {
		return usageError{fmt.Sprintf("--policy: %v", err)}
	}
	if err := strictjson.Check(raw); err != nil {
		return usageError{fmt.Sprintf("--policy %s: %v", arg, err)}
	}
	var pol paddock.ApprovalPolicy
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pol); err != nil {
		return usageError{fmt.Sprintf("--policy %s: want one JSON object of an approval policy: %v", arg, err)}
	}
	if dec.More() {
		return usageError{fmt.Sprintf("--policy %s: want one JSON object, and nothing after it", arg)}
	}
	if err := approval.Validate(&pol); err != nil {
		return usageError{fmt.Sprintf("--policy %s: %s", arg, paddock.ErrorMessage(err))}
	}
	req.ApprovalPolicy = &pol
	return nil
}

// printPolicy says a project's approval policy in words.
func printPolicy(w io.Writer, pol *paddock.ApprovalPolicy) {
	fmt.Fprintln(w, "  approval policy:")
	for _, l := range approval.Describe(pol) {
		fmt.Fprintf(w, "    %s\n", l)
	}
}

func projectShowCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a project's settings and its approval policy",
		Long: `Show a project's root, its settings (protected paths, attribution rules,
caches, verify overrides), who holds its lock, and its approval policy in
words: how many approvals, from whom, for which risk labels, and when the
policy approves by itself.

Exit codes: 0 shown; 3 no such project.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			p, err := c.Project(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.output(asJSON, p, func(w io.Writer) { printProject(w, p) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the project as JSON")
	return cmd
}

// printProject is project show's page.
func printProject(w io.Writer, p *paddock.Project) {
	fmt.Fprintf(w, "project %s\n  root: %s\n", p.Name, p.Root)
	prot := "the default list"
	if p.Protected != nil {
		prot = "only .git"
		if len(p.Protected) > 0 {
			prot = strings.Join(p.Protected, ", ")
		}
	}
	fmt.Fprintf(w, "  protected: %s\n", prot)
	if len(p.AttributionAllow) > 0 {
		fmt.Fprintf(w, "  attribution rules allowed: %s\n", strings.Join(p.AttributionAllow, ", "))
	}
	for _, c := range p.Caches {
		fmt.Fprintf(w, "  cache: %s:%s\n", c.Name, c.Mode)
	}
	for _, c := range p.Checks {
		fmt.Fprintf(w, "  check %s: %s\n", c.Name, c.Command)
	}
	if p.Lock != nil {
		fmt.Fprintf(w, "  locked by run %s\n", p.Lock.RunID)
	}
	printPolicy(w, p.Policy)
}

func projectLsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List projects",
		Long:  "List the declared projects with their roots and who holds each project lock.",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			ps, err := c.Projects(cmd.Context())
			if err != nil {
				return err
			}
			return a.output(asJSON, ps, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tLOCK\tROOT")
				for _, p := range ps {
					lock := "-"
					if p.Lock != nil {
						lock = p.Lock.RunID
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, lock, p.Root)
				}
				tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func projectRmCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rm NAME",
		Short: "Forget a project (its repository is not touched)",
		Long: `Forget a project and the records of its finished runs. The repository itself
is never touched. Refused while any of its runs still has a workspace on disk:
remove those runs first (retained workspaces stay until an operator deletes them).

Exit codes: 0 removed; 3 no such project; 4 runs still have workspaces.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			if err := c.RemoveProject(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "removed project %s\n", args[0])
			return nil
		},
	}
	return cmd
}

func projectUnlockCmd(a *app) *cobra.Command {
	var force, asJSON bool
	cmd := &cobra.Command{
		Use:   "unlock NAME --force",
		Short: "Force-release a project's lock",
		Long: `Release the project lock whatever run holds it. The lock is held by a run that
works in an operator directory, for its whole life; releasing it under a live
run is an operator's decision, so --force is required. The release is
recorded as an event on the run that held it, with who released it.

Exit codes: 0 released (or it was free); 2 without --force; 3 no such project.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			res, err := c.Unlock(cmd.Context(), args[0], force)
			if err != nil {
				return err
			}
			return a.output(asJSON, res, func(w io.Writer) {
				if res.Released == nil {
					fmt.Fprintf(w, "project %s was not locked\n", args[0])
					return
				}
				fmt.Fprintf(w, "released the lock of project %s held by run %s (by %s)\n", args[0], res.Released.RunID, res.By)
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "really release the lock")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
