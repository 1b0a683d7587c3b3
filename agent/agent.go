// Package agent reads agent definitions (TOML files, unknown keys refused
// with the file and the line) and holds the built-in ones: coder (write),
// reviewer (read; may run the manifest's checks) and decider (none). What
// a definition grants is decided by package broker; this package only
// says what a definition is.
package agent

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/broker"
)

// file is a definition as TOML spells it.
type file struct {
	Name         string              `toml:"name"`
	Description  string              `toml:"description"`
	Instructions string              `toml:"instructions"`
	Workspace    string              `toml:"workspace"`
	Tools        *[]string           `toml:"tools"`
	Tool         map[string]toolRule `toml:"tool"`
	Network      string              `toml:"network"`
	Limits       limits              `toml:"limits"`
	Env          []string            `toml:"env"`
	Secrets      []string            `toml:"secrets"`
	Command      []string            `toml:"command"`
	Mounts       []string            `toml:"mounts"`
	Credential   []credentialRule    `toml:"credential"`
}

type credentialRule struct {
	Use    string `toml:"use"`
	Host   string `toml:"host"`
	Header string `toml:"header"`
	Prefix string `toml:"prefix"`
	Secret string `toml:"secret"`
	Env    string `toml:"env"`
}

type toolRule struct {
	Allow []string `toml:"allow"`
	Deny  []string `toml:"deny"`
	Ask   []string `toml:"ask"`
}

type limits struct {
	Timeout  string `toml:"timeout"`
	CPU      string `toml:"cpu"`
	Procs    int    `toml:"procs"`
	Memory   string `toml:"memory"`
	FileSize string `toml:"file_size"`
	Output   string `toml:"output"`
	Tmp      string `toml:"tmp"`
}

// Error is a definition that cannot be accepted, with where it is.
type Error struct {
	File string
	Line int // 0 when the problem has no one line
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Parse reads a definition from TOML; name is the file's name, for errors.
// Every key must be known, every tool one paddock has, `tools` present
// (a file says what it grants), and the rest valid.
func Parse(name string, src []byte) (*paddock.AgentDefinition, error) {
	var f file
	md, err := toml.NewDecoder(bytes.NewReader(src)).Decode(&f)
	if err != nil {
		if pe, ok := err.(toml.ParseError); ok {
			return nil, &Error{File: name, Line: pe.Position.Line, Msg: pe.Message}
		}
		return nil, &Error{File: name, Msg: err.Error()}
	}
	if un := md.Undecoded(); len(un) > 0 {
		return nil, &Error{File: name, Line: lineOf(src, un[0]), Msg: fmt.Sprintf("unknown key %q", un[0].String())}
	}
	at := func(key ...string) int { return lineOf(src, toml.Key(key)) }
	if f.Tools == nil {
		return nil, &Error{File: name, Msg: `no "tools": a definition lists the tools it grants`}
	}
	d := &paddock.AgentDefinition{Name: f.Name, Description: f.Description, Instructions: f.Instructions,
		Workspace: f.Workspace, Tools: *f.Tools, Net: f.Network, Env: f.Env, Secrets: f.Secrets, Command: f.Command, Mounts: f.Mounts}
	for _, c := range f.Credential {
		d.Credentials = append(d.Credentials, paddock.CredentialRule(c))
	}
	if len(f.Tool) > 0 {
		d.Tool = map[string]paddock.ToolRule{}
		for t, r := range f.Tool {
			d.Tool[t] = paddock.ToolRule{Allow: r.Allow, Deny: r.Deny, Ask: r.Ask}
		}
	}
	var lerr error
	size := func(key, s string) int64 {
		n, err := paddock.ParseSize(s)
		if err != nil && lerr == nil {
			lerr = &Error{File: name, Line: at("limits", key), Msg: fmt.Sprintf("limits.%s: %v", key, err)}
		}
		return n
	}
	d.Limits = paddock.AgentLimits{Timeout: f.Limits.Timeout, CPU: f.Limits.CPU, Procs: f.Limits.Procs,
		Memory: size("memory", f.Limits.Memory), FileSize: size("file_size", f.Limits.FileSize),
		Output: size("output", f.Limits.Output), Tmp: size("tmp", f.Limits.Tmp)}
	if lerr != nil {
		return nil, lerr
	}
	if err := Validate(d); err != nil {
		var key []string
		if pe, ok := err.(*paddock.Error); ok {
			if k, ok := pe.Details["key"].(string); ok && k != "" {
				key = strings.Split(k, ".")
			}
		}
		return nil, &Error{File: name, Line: at(key...), Msg: paddock.ErrorMessage(err)}
	}
	return d, nil
}

// invalid is a definition's fault, with the key it is at.
func invalid(key []string, format string, args ...any) error {
	return paddock.Errorf(paddock.CodeBadRequest, format, args...).WithDetail("key", strings.Join(key, "."))
}

// Validate checks a definition, from a file or given inline to the API.
func Validate(d *paddock.AgentDefinition) error {
	if err := paddock.ValidateName(d.Name); err != nil {
		return invalid([]string{"name"}, "name: %s", paddock.ErrorMessage(err))
	}
	if _, err := paddock.ParseAccess(d.Workspace); err != nil {
		return invalid([]string{"workspace"}, "workspace %q: want write, read or none", d.Workspace)
	}
	for _, t := range d.Tools {
		if !broker.Known(t) {
			return invalid([]string{"tools"}, "tools: there is no tool %q (%s)", t, strings.Join(AllTools(), ", "))
		}
	}
	for t, r := range d.Tool {
		key := []string{"tool", t}
		switch {
		case !broker.Known(t):
			return invalid(key, "[tool.%s]: there is no tool %q", t, t)
		case !d.Declares(t):
			return invalid(key, "[tool.%s] narrows a tool that tools does not list", t)
		case t != paddock.ToolExec && !slices.Contains(broker.WriteTools, t):
			return invalid(key, "[tool.%s]: only exec (by command) and %s (by path) can be narrowed", t, strings.Join(broker.WriteTools, ", "))
		case t != paddock.ToolExec && len(r.Ask) > 0:
			return invalid(key, "[tool.%s]: ask is for exec's commands", t)
		}
		for _, rules := range [][]string{r.Allow, r.Deny, r.Ask} {
			for _, s := range rules {
				if strings.TrimSpace(s) == "" {
					return invalid(key, "[tool.%s]: an empty rule", t)
				}
			}
		}
	}
	switch {
	case d.Net == "" || d.Net == "none" || d.Net == "host":
	case strings.HasPrefix(d.Net, "allow=") && len(strings.TrimPrefix(d.Net, "allow=")) > 0:
	default:
		return invalid([]string{"network"}, "network %q: want none, host or allow=DOMAIN,…", d.Net)
	}
	for _, e := range d.Env {
		n, _, _ := strings.Cut(e, "=")
		if e != "*" && (n == "" || strings.ContainsAny(n, " \x00") || strings.HasPrefix(n, "LD_")) {
			return invalid([]string{"env"}, "env %q: want NAME, NAME=VALUE or * (LD_* is not allowed)", e)
		}
	}
	for _, s := range d.Secrets {
		if !secretName(s) {
			return invalid([]string{"secrets"}, "secret name %q: use upper-case letters, digits and _", s)
		}
	}
	if err := CheckCredentials(d.Credentials); err != nil {
		return invalid([]string{"credential"}, "[[credential]]: %s", paddock.ErrorMessage(err))
	}
	if err := CheckMountPaths(d.Mounts); err != nil {
		return invalid([]string{"mounts"}, "mounts: %s", paddock.ErrorMessage(err))
	}
	for k, v := range map[string]string{"timeout": d.Limits.Timeout, "cpu": d.Limits.CPU} {
		if v == "" {
			continue
		}
		if dur, err := time.ParseDuration(v); err != nil || dur <= 0 {
			return invalid([]string{"limits", k}, "limits.%s %q: want a duration such as 10m", k, v)
		}
	}
	if d.Limits.Procs < 0 {
		return invalid([]string{"limits", "procs"}, "limits.procs %s: want a positive number", strconv.Itoa(d.Limits.Procs))
	}
	return nil
}

// lineOf finds the line where key is set or its table opens; 0 if unsure.
func lineOf(src []byte, key toml.Key) int {
	if len(key) == 0 {
		return 0
	}
	table := ""
	full := strings.Join(key, ".")
	for i, line := range strings.Split(string(src), "\n") {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "[") {
			table = strings.Trim(strings.TrimSpace(strings.SplitN(l, "#", 2)[0]), "[] ")
			if table == full {
				return i + 1
			}
			continue
		}
		k, _, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		k = strings.Trim(strings.TrimSpace(k), `"'`)
		got := k
		if table != "" {
			got = table + "." + k
		}
		if got == full || (len(key) > 1 && strings.HasPrefix(full, got+".")) {
			return i + 1
		}
	}
	return 0
}

// AllTools lists every tool a definition may name.
func AllTools() []string {
	all := slices.Concat(broker.ReadTools, broker.WriteTools, broker.ControlTools)
	slices.Sort(all)
	return all
}

// Built-in definitions.
const (
	Coder    = "coder"
	Reviewer = "reviewer"
	Decider  = "decider"
)

// Builtin returns a built-in definition by name.
func Builtin(name string) (*paddock.AgentDefinition, bool) {
	control := []string{paddock.ToolCapabilities, paddock.ToolPlan, paddock.ToolRequestAccess}
	switch name {
	case Coder:
		return &paddock.AgentDefinition{Name: Coder, Description: "changes the workspace, runs commands, submits its change set",
			Workspace: string(paddock.AccessWrite), Net: "none", Env: []string{"*"},
			Tools: slices.Concat(broker.ReadTools, broker.WriteTools, []string{paddock.ToolExec, paddock.ToolVerify, paddock.ToolDiff, paddock.ToolSubmit}, control)}, true
	case Reviewer:
		return &paddock.AgentDefinition{Name: Reviewer, Description: "reads the workspace and runs the project's checks; changes nothing",
			Workspace: string(paddock.AccessRead), Net: "none", Env: []string{"*"},
			Tools: slices.Concat(broker.ReadTools, []string{paddock.ToolExec, paddock.ToolVerify, paddock.ToolDiff}, control)}, true
	case Decider:
		return &paddock.AgentDefinition{Name: Decider, Description: "has no workspace: decides from what it is given",
			Workspace: string(paddock.AccessNone), Tools: control}, true
	}
	return nil, false
}

// Builtins are the built-in definitions.
func Builtins() []*paddock.AgentDefinition {
	var out []*paddock.AgentDefinition
	for _, n := range []string{Coder, Reviewer, Decider} {
		d, _ := Builtin(n)
		out = append(out, d)
	}
	return out
}

// ForAccess is the built-in a run of that access gets when it names none.
func ForAccess(a paddock.Access) *paddock.AgentDefinition {
	name := map[paddock.Access]string{paddock.AccessWrite: Coder, paddock.AccessRead: Reviewer, paddock.AccessNone: Decider}[a]
	d, _ := Builtin(name)
	return d
}

// Complete fills what an inline API definition may leave out: its tools
// are then the built-in set of its workspace mode, written down in the
// copy the run keeps.
func Complete(d *paddock.AgentDefinition) *paddock.AgentDefinition {
	out := *d
	if len(out.Tools) == 0 {
		a, err := paddock.ParseAccess(out.Workspace)
		if err != nil {
			return &out // Validate says why
		}
		out.Tools = ForAccess(a).Tools
		if len(out.Env) == 0 {
			out.Env = []string{"*"}
		}
		// The network stays as written: none unless the definition asks
		// (issue #29: a definition that names no network has none).
	}
	return &out
}

// secretName is ^[A-Z_][A-Z0-9_]{0,63}$, the daemon's rule for secret names.
func secretName(s string) bool {
	if s == "" || len(s) > 64 || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// MaxMounts bounds the directories a run shows read-only besides its own.
const MaxMounts = 8

// viewPaths are where a run's view has its own: a mount must not cover
// them or sit in them. The system directories are the host's already.
var viewPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc",
	"/proc", "/dev", "/run/paddock", "/home/paddock"}

// CheckMountPaths refuses mounts the view cannot show as they are:
// each an absolute, clean path, neither a directory of the view's own nor
// in one nor above one, at most MaxMounts. Where they are on the host is
// the daemon's to check (lifecycle).
func CheckMountPaths(mounts []string) error {
	if len(mounts) > MaxMounts {
		return paddock.Errorf(paddock.CodeBadRequest, "%d mounts, at most %d", len(mounts), MaxMounts)
	}
	for _, m := range mounts {
		if !path.IsAbs(m) || path.Clean(m) != m || m == "/" || m == "/tmp" || strings.ContainsAny(m, "\x00\n") {
			return paddock.Errorf(paddock.CodeBadRequest, "mount %q: want an absolute, clean directory other than / and /tmp (below /tmp is fine)", m)
		}
		for _, v := range viewPaths {
			if m == v || strings.HasPrefix(m, v+"/") || strings.HasPrefix(v, m+"/") {
				return paddock.Errorf(paddock.CodeBadRequest, "mount %s: it would cover or sit in %s, which the run's view has of its own (the system directories are shown already)", m, v)
			}
		}
	}
	return nil
}

// CheckCredentials refuses a credential rule that names no built-in and
// leaves out a host, a header or a secret, or whose names are not names.
func CheckCredentials(rules []paddock.CredentialRule) error {
	for _, c := range rules {
		if _, ok := paddock.BuiltinCredentials[c.Use]; c.Use != "" && !ok {
			return paddock.Errorf(paddock.CodeBadRequest, "credential use %q: the built-ins are anthropic and openai", c.Use)
		}
		r := c.Resolved()
		switch {
		case r.Host == "" || strings.ContainsAny(r.Host, "/:@ *") || !strings.Contains(r.Host, ".") && r.Host != "localhost":
			return paddock.Errorf(paddock.CodeBadRequest, "credential host %q: want a host name, exactly", r.Host)
		case r.Header == "" || strings.ContainsAny(r.Header, " :\r\n"):
			return paddock.Errorf(paddock.CodeBadRequest, "credential header %q: want a header name", r.Header)
		case !secretName(r.Secret):
			return paddock.Errorf(paddock.CodeBadRequest, "credential secret %q: the name of one of the daemon's secrets (upper-case letters, digits and _)", r.Secret)
		case r.Env != "" && !secretName(r.Env):
			return paddock.Errorf(paddock.CodeBadRequest, "credential env %q: a variable name (upper-case letters, digits and _)", r.Env)
		case strings.ContainsAny(r.Prefix, "\r\n"):
			return paddock.Errorf(paddock.CodeBadRequest, "credential prefix: one line")
		}
	}
	return nil
}
