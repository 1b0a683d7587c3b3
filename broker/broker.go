// Package broker decides every tool call an agent's run receives (record
// 003: a broker grants only declared tools, records every use, fails
// closed). A decision is a pure function of the agent's definition, the
// run's grants, the call and the run's state: allow, deny (with the rule
// and the boundary it hit) or needs_approval (a person must grant it
// first). The workspace manager runs the allowed calls, redacts and
// records them; the OS sandbox still confines whatever is allowed.
package broker

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
)

// Rules a denial names (paddock.Error's Rule, a tool call's event).
const (
	RuleNoDefinition   paddock.Rule = "no_definition"
	RuleUnknownTool    paddock.Rule = "unknown_tool"
	RuleUndeclared     paddock.Rule = "undeclared_tool"
	RuleReadOnly       paddock.Rule = "read_only"
	RuleCommand        paddock.Rule = "command_not_allowed"
	RuleUnsure         paddock.Rule = "command_unparsed"
	RulePath           paddock.Rule = "path_not_allowed"
	RuleNetwork        paddock.Rule = "network_not_allowed"
	RuleEnv            paddock.Rule = "env_not_allowed"
	RuleLimit          paddock.Rule = "over_limit"
	RuleState          paddock.Rule = "run_state"
	RuleNeedsApproval  paddock.Rule = "needs_approval"
	RuleUnknownRequest paddock.Rule = "unknown_permission"
)

// Tools every definition may name: the working tools (those that read and
// those that write) and the control tools.
var (
	ReadTools    = []string{"glob", "grep", "list", "read", "stat"}
	WriteTools   = []string{"delete", "edit", "move", "write"}
	ControlTools = []string{paddock.ToolCapabilities, paddock.ToolDiff, paddock.ToolExec, paddock.ToolPlan, paddock.ToolRequestAccess, paddock.ToolSubmit, paddock.ToolVerify}
)

// Known reports whether name is a tool paddock has.
func Known(name string) bool {
	return slices.Contains(ReadTools, name) || slices.Contains(WriteTools, name) || slices.Contains(ControlTools, name)
}

// needsWorkspace: the tools that act on a workspace.
func needsWorkspace(tool string) bool {
	return tool != paddock.ToolCapabilities && tool != paddock.ToolRequestAccess && tool != paddock.ToolPlan
}

// writes: the tools that change the workspace or what is proposed from it.
func writes(tool string) bool {
	return slices.Contains(WriteTools, tool) || tool == paddock.ToolSubmit
}

// Call is one call as the broker sees it.
type Call struct {
	Tool string
	// Paths are the workspace paths a writing tool writes (write, edit,
	// delete: path; move: from and to).
	Paths []string
	// Trees says the paths are trees (a recursive delete, a move): no deny
	// glob may reach below them.
	Trees bool
	// Exec: the argv, the directory it starts in (relative to the
	// workspace), and the network, environment and limits asked for.
	Argv   []string
	Dir    string
	Net    string
	Env    []string
	Limits paddock.AgentLimits
	// Start says the exec is the agent's own start command (a bootstrap
	// job): its definition's command is not one of its tool calls, so the
	// exec rule does not apply to it (network, env and limits do).
	Start bool
}

// State is what the broker knows of the run.
type State struct {
	Access    paddock.Access
	Workspace paddock.WorkspaceState
}

// Verdict is a decision with its reason. Ask, for needs_approval, is the
// access request a person would grant.
type Verdict struct {
	Decision paddock.Decision
	Rule     paddock.Rule
	Reason   string
	Ask      *paddock.AccessRequestInput
}

func allow() Verdict { return Verdict{Decision: paddock.DecisionAllow} }

func deny(rule paddock.Rule, format string, args ...any) Verdict {
	return Verdict{Decision: paddock.DecisionDeny, Rule: rule, Reason: fmt.Sprintf(format, args...)}
}

// Err is the verdict as the error a caller gets (nil for allow).
func (v Verdict) Err() error {
	switch v.Decision {
	case paddock.DecisionAllow:
		return nil
	case paddock.DecisionNeedsApproval:
		return paddock.Errorf(paddock.CodeForbidden, "%s", v.Reason).WithRule(RuleNeedsApproval)
	}
	if v.Rule == RuleState {
		// Not a permission: the run moved on (as the workspace manager says).
		return paddock.Errorf(paddock.CodeConflict, "%s", v.Reason).WithRule(v.Rule)
	}
	return paddock.Errorf(paddock.CodeForbidden, "%s", v.Reason).WithRule(v.Rule)
}

// Decide decides one call. Nothing is allowed by default: a missing
// definition, an unknown tool, an undeclared one or anything a rule cannot
// read with confidence is denied, with the boundary it hit.
func Decide(def *paddock.AgentDefinition, grants []*paddock.AccessRequest, c Call, st State) Verdict {
	if def == nil {
		return deny(RuleNoDefinition, "the run has no agent definition; nothing is allowed without one")
	}
	if !Known(c.Tool) {
		return deny(RuleUnknownTool, "there is no tool %q", c.Tool)
	}
	// A none agent's own start command runs on an instance sandbox, with
	// no workspace (seed 000): the one exec such a run has.
	instance := c.Start && c.Tool == paddock.ToolExec && st.Access == paddock.AccessNone
	if needsWorkspace(c.Tool) && !instance {
		switch {
		case st.Access == paddock.AccessNone:
			return deny(paddock.RuleAccessNone, "this run has no workspace; %s acts on one", c.Tool)
		case st.Access == paddock.AccessRead && writes(c.Tool):
			return deny(RuleReadOnly, "this run may only read the workspace; %s changes it", c.Tool)
		}
		switch st.Workspace {
		case paddock.StateRejected, paddock.StateCleanupPending, paddock.StateCleaned, paddock.StateOrphaned, paddock.StateRetained:
			return deny(RuleState, "the run is %s; its workspace takes no more work", st.Workspace)
		}
	}
	if c.Tool == paddock.ToolPlan {
		// A plan is of work still to come: a run that takes no more has none.
		switch st.Workspace {
		case paddock.StateRejected, paddock.StateCleanupPending, paddock.StateCleaned, paddock.StateOrphaned:
			return deny(RuleState, "the run is %s; it takes no more plans", st.Workspace)
		}
	}
	g := granted(grants)
	if !def.Declares(c.Tool) && !g.tools[c.Tool] && !c.Start {
		return deny(RuleUndeclared, "agent %s is not granted the tool %s", def.Name, c.Tool)
	}
	rule := def.Tool[c.Tool]
	switch {
	case c.Tool == paddock.ToolExec:
		return decideExec(def, rule, g, c)
	case slices.Contains(WriteTools, c.Tool):
		return decidePaths(def, rule, g, c)
	}
	return allow()
}

// grants is a run's granted requests, by kind.
type grantSet struct {
	tools    map[string]bool
	commands [][]string
	paths    map[string][]string // tool → globs
	domains  []string
	limits   map[string]string
}

func granted(rs []*paddock.AccessRequest) grantSet {
	g := grantSet{tools: map[string]bool{}, paths: map[string][]string{}, limits: map[string]string{}}
	for _, r := range rs {
		if r.State != paddock.RequestGranted {
			continue
		}
		switch r.Kind {
		case paddock.AccessTool:
			g.tools[r.Tool] = true
		case paddock.AccessCommand:
			g.commands = append(g.commands, r.Command)
		case paddock.AccessPath:
			g.paths[r.Tool] = append(g.paths[r.Tool], r.Path)
		case paddock.AccessNetwork:
			g.domains = append(g.domains, r.Domain)
		case paddock.AccessLimit:
			g.limits[r.Limit] = r.Value
		}
	}
	return g
}

// harmless are shell builtins that run nothing and reach nothing: a rule
// need not name them for `cd sub && go test` to pass.
// (test and [ are not: test -v evaluates a subscript; set is read by
// safeSet, for the options it may take.)
var harmless = map[string]bool{"cd": true, "pwd": true, "true": true, "false": true, ":": true,
	"exit": true, "set": true, "shift": true, "wait": true, "return": true, "break": true, "continue": true}

// decideExec checks every command the argv would run against the exec
// rule (and the commands granted), then the network, env and limits.
func decideExec(def *paddock.AgentDefinition, rule paddock.ToolRule, g grantSet, c Call) Verdict {
	if len(c.Argv) == 0 {
		return deny(RuleCommand, "exec needs a command")
	}
	restricted := len(rule.Allow) > 0 || len(rule.Ask) > 0
	if c.Start && slices.Equal(c.Argv, def.Command) {
		restricted, rule = false, paddock.ToolRule{}
	}
	narrowed := restricted || len(rule.Deny) > 0
	if narrowed {
		cmds, err := commandsOf(c.Argv)
		if err != nil {
			return deny(RuleUnsure, "agent %s's commands are narrowed, and this command line cannot be read with confidence: %v", def.Name, err)
		}
		if v := decideWrites(def, g, c.Dir, cmds); v.Decision != paddock.DecisionAllow {
			return v
		}
		var ask []string
		for _, cmd := range cmds {
			for _, as := range cmd.assigns {
				if why := envCheck(def.Env, as.name, true); why != "" {
					return deny(RuleEnv, "agent %s may not set the variable %s: %s", def.Name, as.name, why)
				}
				if !as.value.known {
					return deny(RuleUnsure, "agent %s's commands are narrowed, and %s is set to an expansion", def.Name, as.name)
				}
				if f := deniedFlagIn(as.value.lit, rule.Deny); f != "" {
					return deny(RuleCommand, "agent %s may not pass %s (denied by its exec rule), in %s", def.Name, f, as.name)
				}
			}
			if len(cmd.words) == 0 {
				continue
			}
			denied, unsureDeny := matchesDeny(cmd, rule.Deny)
			switch {
			case denied:
				return deny(RuleCommand, "agent %s may not run %q (denied by its exec rule)", def.Name, cmd.String())
			case unsureDeny:
				return deny(RuleUnsure, "agent %s may not run %q: an argument is an expansion, and its exec rule denies a flag", def.Name, cmd.String())
			case cmd.words[0].known && harmless[cmd.words[0].lit]:
			case matchesAny(cmd, rule.Allow) || matchesGranted(cmd, g.commands):
			case matchesAny(cmd, rule.Ask):
				ask = append(ask, cmd.String())
			case restricted:
				return deny(RuleCommand, "agent %s may not run %q; its commands are limited to %s", def.Name, cmd.String(), quoteList(rule.Allow))
			}
		}
		if len(ask) > 0 {
			return Verdict{Decision: paddock.DecisionNeedsApproval, Rule: RuleNeedsApproval,
				Reason: fmt.Sprintf("agent %s needs a person's approval to run %q", def.Name, ask[0]),
				Ask:    &paddock.AccessRequestInput{Kind: paddock.AccessCommand, Command: strings.Fields(ask[0])}}
		}
	}
	if v := decideNet(def, g, c.Net); v.Decision != paddock.DecisionAllow {
		return v
	}
	for _, kv := range c.Env {
		name, value, _ := strings.Cut(kv, "=")
		if why := envCheck(def.Env, name, narrowed); why != "" {
			return deny(RuleEnv, "agent %s may not set the environment variable %s: %s", def.Name, name, why)
		}
		if f := deniedFlagIn(value, rule.Deny); f != "" {
			return deny(RuleCommand, "agent %s may not pass %s (denied by its exec rule), in %s", def.Name, f, name)
		}
	}
	return decideLimits(def, g, c.Limits)
}

// denyRule is a deny rule split into the program it names (its leading
// words) and the flags it denies (its words from the first "-").
func denyRule(r string) (prog, flags []string) {
	for _, w := range strings.Fields(r) {
		if len(flags) > 0 || strings.HasPrefix(w, "-") {
			flags = append(flags, w)
		} else {
			prog = append(prog, w)
		}
	}
	return prog, flags
}

// flagIs: w is the flag f, however spelled: -exec, --exec, -exec=…, --exec=….
func flagIs(w, f string) bool {
	w, f = strings.TrimLeft(w, "-"), strings.TrimLeft(f, "-")
	return f != "" && (w == f || strings.HasPrefix(w, f+"="))
}

// matchesDeny: a deny rule "go test -exec" denies go test with the -exec
// flag anywhere among its arguments, in any of its spellings; a rule of
// words only denies that prefix. unsure: the program matches, the rule
// denies a flag, and an argument is an expansion.
func matchesDeny(cmd command, rules []string) (denied, unsure bool) {
	for _, r := range rules {
		prog, flags := denyRule(r)
		if !matches(cmd, prog) {
			continue
		}
		if len(flags) == 0 {
			return true, false
		}
		for _, w := range cmd.words[len(prog):] {
			if !w.known {
				unsure = true
				continue
			}
			if flagIs(w.lit, flags[0]) {
				return true, false
			}
		}
	}
	return false, unsure
}

// deniedFlagIn finds a flag a deny rule denies among the words of a
// variable's value (GOFLAGS=-exec=curl hands go test the flag).
func deniedFlagIn(value string, rules []string) string {
	for _, r := range rules {
		_, flags := denyRule(r)
		if len(flags) == 0 {
			continue
		}
		for _, w := range strings.Fields(value) {
			if flagIs(w, flags[0]) {
				return flags[0]
			}
		}
	}
	return ""
}

// decideWrites checks the files a line's redirections (and find -fprint,
// time -o, nohup) write against the definition's write rule, when it has
// one: exec does not write around the paths write may not. A relative
// path is the exec's directory's; a line that changes directory (cd,
// env -C, find -execdir) and writes by a relative path is not read.
func decideWrites(def *paddock.AgentDefinition, g grantSet, dir string, cmds []command) Verdict {
	rule, ok := def.Tool["write"]
	if !ok || len(rule.Allow) == 0 && len(rule.Deny) == 0 {
		return allow()
	}
	chdir := slices.ContainsFunc(cmds, func(c command) bool { return c.chdir })
	for _, c := range cmds {
		for _, w := range c.writes {
			if !w.known {
				return deny(RuleUnsure, "agent %s's writes are narrowed, and a file the line writes is an expansion", def.Name)
			}
			switch w.lit {
			case "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty":
				continue
			}
			p := w.lit
			if !path.IsAbs(p) {
				if chdir {
					return deny(RuleUnsure, "agent %s's writes are narrowed, and the line changes directory (cd, env -C, find -execdir) and writes %s: give the exec's dir instead", def.Name, p)
				}
				if dir != "" {
					p = path.Join(dir, p)
				}
			}
			if v := decidePaths(def, rule, g, Call{Tool: "write", Paths: []string{p}}); v.Decision != paddock.DecisionAllow {
				return v
			}
		}
	}
	return allow()
}

func quoteList(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// matchesAny: a rule "go test" matches a command whose first words are
// exactly go and test; the words it compares must be known.
func matchesAny(cmd command, rules []string) bool {
	for _, r := range rules {
		if matches(cmd, strings.Fields(r)) {
			return true
		}
	}
	return false
}

func matchesGranted(cmd command, prefixes [][]string) bool {
	for _, p := range prefixes {
		if matches(cmd, p) {
			return true
		}
	}
	return false
}

func matches(cmd command, prefix []string) bool {
	if len(prefix) == 0 || len(prefix) > len(cmd.words) {
		return false
	}
	for i, p := range prefix {
		// Exact words: a rule naming a program by name does not match
		// another program of that name at a path of the agent's choosing.
		if w := cmd.words[i]; !w.known || w.lit != p {
			return false
		}
	}
	return true
}

// decidePaths checks the paths a writing tool writes against its globs.
func decidePaths(def *paddock.AgentDefinition, rule paddock.ToolRule, g grantSet, c Call) Verdict {
	allowGlobs := append(slices.Clone(rule.Allow), g.paths[c.Tool]...)
	if len(rule.Allow) == 0 && len(rule.Deny) == 0 {
		return allow()
	}
	for _, p := range c.Paths {
		if path.IsAbs(p) {
			return deny(RulePath, "agent %s's paths for %s are narrowed: give %s relative to the workspace", def.Name, c.Tool, p)
		}
		clean := path.Clean(p)
		if globAny(rule.Deny, clean) || foldedGlobAny(rule.Deny, clean) || c.Trees && denyBelow(rule.Deny, clean) {
			return deny(RulePath, "agent %s may not %s %s (denied by its %s rule)", def.Name, c.Tool, clean, c.Tool)
		}
		if len(rule.Allow) > 0 && !globAny(allowGlobs, clean) {
			return deny(RulePath, "agent %s may %s only %s; not %s", def.Name, c.Tool, quoteList(allowGlobs), clean)
		}
	}
	return allow()
}

// denyBelow: a deny glob names something under dir.
func denyBelow(globs []string, dir string) bool {
	for _, g := range globs {
		base, _ := doublestar.SplitPattern(g)
		if dir == "." || base == "." || base == dir || strings.HasPrefix(base, dir+"/") {
			return true
		}
	}
	return false
}

// foldedGlobAny matches deny globs on names as confine compares them
// (case and look-alikes folded): a denied directory is not reached by
// another spelling of its name.
func foldedGlobAny(globs []string, p string) bool {
	parts := strings.Split(p, "/")
	for i, c := range parts {
		parts[i] = confine.Fold(c)
	}
	fp := strings.Join(parts, "/")
	for _, g := range globs {
		if ok, _ := doublestar.Match(strings.ToLower(g), fp); ok {
			return true
		}
	}
	return false
}

func globAny(globs []string, p string) bool {
	for _, g := range globs {
		if ok, _ := doublestar.Match(g, p); ok {
			return true
		}
	}
	return false
}

// Net is the most network a definition and its grants give: none, host,
// or allow= with the domains.
func Net(def *paddock.AgentDefinition, grants []*paddock.AccessRequest) string {
	return netCeiling(def, granted(grants))
}

func netCeiling(def *paddock.AgentDefinition, g grantSet) string {
	kind, domains := splitNet(def.Net)
	if kind == "host" {
		return "host"
	}
	domains = append(domains, g.domains...)
	if len(domains) == 0 {
		return "none"
	}
	return "allow=" + strings.Join(domains, ",")
}

func splitNet(s string) (kind string, domains []string) {
	switch {
	case s == "" || s == "none":
		return "none", nil
	case s == "host":
		return "host", nil
	case strings.HasPrefix(s, "allow="):
		for _, d := range strings.Split(strings.TrimPrefix(s, "allow="), ",") {
			if d = strings.TrimSpace(d); d != "" {
				domains = append(domains, d)
			}
		}
		return "allow", domains
	}
	return "invalid", nil
}

// decideNet: a command may ask for the network its agent has, or less.
func decideNet(def *paddock.AgentDefinition, g grantSet, asked string) Verdict {
	kind, domains := splitNet(asked)
	ceilKind, ceil := splitNet(netCeiling(def, g))
	switch {
	case kind == "none" || ceilKind == "host":
		return allow()
	case kind == "host":
		return deny(RuleNetwork, "agent %s's commands may have the network %s, not the host's", def.Name, netCeiling(def, g))
	case kind == "allow":
		for _, d := range domains {
			if !slices.ContainsFunc(ceil, func(c string) bool { return domainCovers(c, d) }) {
				return deny(RuleNetwork, "agent %s's commands may reach %s; not %s", def.Name, netCeiling(def, g), d)
			}
		}
		return allow()
	}
	return allow() // an invalid form is refused as bad input by the exec itself
}

// domainCovers: a rule covers its domain and, written *.example.com, the
// names below it.
func domainCovers(rule, d string) bool {
	if rule == d {
		return true
	}
	if suffix, ok := strings.CutPrefix(rule, "*."); ok {
		return strings.HasSuffix(d, "."+suffix) || d == rule
	}
	return false
}

// Limits are an agent's ceilings with its grants: what its commands get
// when they ask for nothing, and the most they may ask for.
func Limits(def *paddock.AgentDefinition, grants []*paddock.AccessRequest) paddock.AgentLimits {
	return ceilingOf(def, granted(grants))
}

func ceilingOf(def *paddock.AgentDefinition, g grantSet) paddock.AgentLimits {
	l := def.Limits
	for name, v := range g.limits {
		// A grant raises one ceiling to a positive value; anything else
		// (0 would read as "no ceiling") leaves the definition's.
		if d, err := time.ParseDuration(v); (name == "timeout" || name == "cpu") && (err != nil || d <= 0) {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if name != "timeout" && name != "cpu" && (err != nil || n <= 0) {
			continue
		}
		switch name {
		case "timeout":
			l.Timeout = v
		case "cpu":
			l.CPU = v
		case "procs":
			l.Procs = int(n)
		case "memory":
			l.Memory = n
		case "file_size":
			l.FileSize = n
		case "output":
			l.Output = n
		case "tmp":
			l.Tmp = n
		}
	}
	return l
}

// LimitNames are the limits a definition or a grant may set.
var LimitNames = []string{"timeout", "cpu", "procs", "memory", "file_size", "output", "tmp"}

// decideLimits: a command may ask for its agent's ceilings, or less.
func decideLimits(def *paddock.AgentDefinition, g grantSet, asked paddock.AgentLimits) Verdict {
	ceil := ceilingOf(def, g)
	over := func(name string, a, c int64) Verdict {
		if c > 0 && a > c {
			return deny(RuleLimit, "agent %s's commands may have %s up to %d; %d was asked", def.Name, name, c, a)
		}
		return allow()
	}
	overDur := func(name, a, c string) Verdict {
		if a == "" || c == "" {
			return allow()
		}
		ad, err1 := time.ParseDuration(a)
		cd, err2 := time.ParseDuration(c)
		if err1 == nil && err2 == nil && ad > cd {
			return deny(RuleLimit, "agent %s's commands may have %s up to %s; %s was asked", def.Name, name, c, a)
		}
		return allow()
	}
	for _, v := range []Verdict{
		overDur("timeout", asked.Timeout, ceil.Timeout),
		overDur("cpu", asked.CPU, ceil.CPU),
		over("procs", int64(asked.Procs), int64(ceil.Procs)),
		over("memory", asked.Memory, ceil.Memory),
		over("file_size", asked.FileSize, ceil.FileSize),
		over("output", asked.Output, ceil.Output),
		over("tmp", asked.Tmp, ceil.Tmp),
	} {
		if v.Decision != paddock.DecisionAllow {
			return v
		}
	}
	return allow()
}

// CheckRequest validates what an agent asks for: a known kind and the
// fields that kind needs; anything else is an unknown permission.
func CheckRequest(in paddock.AccessRequestInput) error {
	bad := func(format string, args ...any) error {
		return paddock.Errorf(paddock.CodeBadRequest, format, args...).WithRule(RuleUnknownRequest)
	}
	if strings.TrimSpace(in.Reason) == "" {
		return bad("an access request needs a reason")
	}
	switch in.Kind {
	case paddock.AccessTool:
		if !Known(in.Tool) {
			return bad("there is no tool %q to ask for", in.Tool)
		}
	case paddock.AccessCommand:
		if len(in.Command) == 0 || in.Command[0] == "" {
			return bad("a command request names the command's first words (an argv prefix)")
		}
	case paddock.AccessPath:
		if !slices.Contains(WriteTools, in.Tool) || in.Path == "" || !doublestar.ValidatePattern(in.Path) || path.IsAbs(in.Path) || strings.HasPrefix(path.Clean(in.Path), "..") {
			return bad("a path request names a writing tool (%s) and a glob inside the workspace", strings.Join(WriteTools, ", "))
		}
	case paddock.AccessNetwork:
		if in.Domain == "" || strings.ContainsAny(in.Domain, " ,/:") {
			return bad("a network request names one domain, such as proxy.golang.org")
		}
	case paddock.AccessLimit:
		if !slices.Contains(LimitNames, in.Limit) || in.Value == "" {
			return bad("a limit request names one of %s and the value asked for", strings.Join(LimitNames, ", "))
		}
		if in.Limit == "timeout" || in.Limit == "cpu" {
			if d, err := time.ParseDuration(in.Value); err != nil || d <= 0 {
				return bad("%s %q is not a duration such as 30m", in.Limit, in.Value)
			}
		} else if n, err := strconv.ParseInt(in.Value, 10, 64); err != nil || n <= 0 {
			return bad("%s %q is not a positive number", in.Limit, in.Value)
		}
	default:
		return bad("unknown access kind %q (tool, command, path, network or limit)", in.Kind)
	}
	return nil
}
