package paddock

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AgentDefinition is who an agent is and what it may call (records 000 and
// 003): its access to the workspace, the tools it is granted (each with an
// optional narrowing), its network, limits, environment and secrets, and
// the command that starts it if paddock does. It says what an agent may do,
// not how it is prompted; Instructions is only shown to it.
//
// A run keeps a copy of the definition it was made with (Run.Agent, with
// its hash), so editing a definition never changes a running run.
type AgentDefinition struct {
	Name         string `json:"name"`
	Description  string `json:"description,omitempty"`
	Instructions string `json:"instructions,omitempty"`
	// Workspace is write (default), read or none.
	Workspace string `json:"workspace,omitempty"`
	// Tools are the tools the agent may call: working tools (read, write,
	// …), exec, and control tools (verify, diff, submit, capabilities,
	// request_access). Nothing else is offered. Empty in a definition
	// given inline to the API means the built-in set of its workspace mode.
	Tools []string `json:"tools,omitempty"`
	// Tool narrows a granted tool: exec by argv prefixes, the tools that
	// write by path globs.
	Tool map[string]ToolRule `json:"tool,omitempty"`
	// Command starts the agent, when paddock does (a bootstrap job).
	Command []string `json:"command,omitempty"`
	// Net is the most network the agent's commands may have: none (the
	// default), allow=DOMAIN,… or host. A command may ask for less.
	Net string `json:"net,omitempty"`
	// Env lists the variables the agent's commands may be given: a NAME
	// (the request may set it), NAME=VALUE (always set, as is), or "*"
	// (any name, as the built-in agents have).
	Env []string `json:"env,omitempty"`
	// Secrets names the daemon's secrets the agent's commands get.
	Secrets []string `json:"secrets,omitempty"`
	// Mounts are host directories the run's view shows read-only, at
	// their own paths: where the agent's own program lives outside the
	// system directories (an npm prefix, nvm, ~/.local/bin). One named
	// bin or .bin is put first on the run's PATH.
	Mounts []string `json:"mounts,omitempty"`
	// Credentials are what the agent's requests to a host carry, set by
	// paddock's proxy on the way out: the run holds only a placeholder.
	Credentials []CredentialRule `json:"credentials,omitempty"`
	// Limits are the ceilings of the agent's commands, below the daemon's.
	Limits AgentLimits `json:"limits,omitzero"`
}

// ToolRule narrows one tool. For exec, Allow and Deny are argv prefixes
// ("go test" allows `go test ./...`), checked on every command of a shell
// line; Ask names prefixes that need a person's approval each time. For
// write, edit, move and delete, Allow and Deny are path globs (doublestar
// syntax) relative to the workspace. Deny wins over Allow.
type ToolRule struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	Ask   []string `json:"ask,omitempty"`
}

// AgentLimits are an agent's command ceilings: its wall time and the
// per-command limits. Zero keeps the daemon's.
type AgentLimits struct {
	Timeout  string `json:"timeout,omitempty"`
	CPU      string `json:"cpu,omitempty"`
	Procs    int    `json:"procs,omitempty"`
	Memory   int64  `json:"memory,omitempty"`
	FileSize int64  `json:"file_size,omitempty"`
	Output   int64  `json:"output,omitempty"`
	Tmp      int64  `json:"tmp,omitempty"`
}

// LimitsOf is what an exec request asks for, as an agent's limits are said.
func LimitsOf(timeout string, l ExecLimits) AgentLimits {
	return AgentLimits{Timeout: timeout, CPU: l.CPU, Procs: l.Procs, Memory: l.Memory, FileSize: l.FileSize, Output: l.Output, Tmp: l.Tmp}
}

// Hash is the definition's identity: sha256 of its JSON encoding.
func (d *AgentDefinition) Hash() string {
	b, _ := json.Marshal(d)
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// Declares reports whether the definition grants tool.
func (d *AgentDefinition) Declares(tool string) bool { return slices.Contains(d.Tools, tool) }

// AgentRecord is a stored agent definition: the definition, its hash, and
// the TOML it was read from.
type AgentRecord struct {
	Definition AgentDefinition `json:"definition"`
	Hash       string          `json:"hash"`
	Source     string          `json:"source,omitempty"`
	Builtin    bool            `json:"builtin,omitempty"`
	UpdatedAt  time.Time       `json:"updated_at,omitzero"`
}

// The control tools: what an agent calls besides the working tools.
const (
	ToolExec          = "exec"
	ToolVerify        = "verify"
	ToolDiff          = "diff"
	ToolSubmit        = "submit"
	ToolCapabilities  = "capabilities"
	ToolRequestAccess = "request_access"
	ToolPlan          = "plan"
)

// Decision is the broker's verdict on one call.
type Decision string

const (
	DecisionAllow         Decision = "allow"
	DecisionDeny          Decision = "deny"
	DecisionNeedsApproval Decision = "needs_approval"
)

// AccessKind is what an access request asks for.
type AccessKind string

const (
	AccessTool    AccessKind = "tool"    // a tool the definition does not grant
	AccessCommand AccessKind = "command" // an exec argv prefix
	AccessPath    AccessKind = "path"    // a path glob for a narrowed write tool
	AccessNetwork AccessKind = "network" // a domain for the commands' network
	AccessLimit   AccessKind = "limit"   // a higher ceiling for one limit
)

// Request states.
const (
	RequestPending = "pending"
	RequestGranted = "granted"
	RequestDenied  = "denied"
)

// AccessRequest is an agent's request for more than its definition grants,
// with its reason, pending until a person or the orchestrator decides. A
// granted request is a grant: the broker reads the run's grants with its
// definition.
type AccessRequest struct {
	ID    string     `json:"id"`
	RunID string     `json:"run_id"`
	Kind  AccessKind `json:"kind"`
	// Tool is the tool asked for (kind tool), or the tool a path is for
	// (kind path: write, edit, move or delete).
	Tool string `json:"tool,omitempty"`
	// Command is an argv prefix (kind command).
	Command []string `json:"command,omitempty"`
	Path    string   `json:"path,omitempty"`   // a path glob (kind path)
	Domain  string   `json:"domain,omitempty"` // kind network
	// Limit and Value: a limit's name (timeout, cpu, procs, memory,
	// file_size, output, tmp) and the ceiling asked for (kind limit).
	Limit     string    `json:"limit,omitempty"`
	Value     string    `json:"value,omitempty"`
	Reason    string    `json:"reason"`
	State     string    `json:"state"`
	CreatedAt time.Time `json:"created_at"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	DecidedBy string    `json:"decided_by,omitempty"`
	// Note is what the person who decided said.
	Note string `json:"note,omitempty"`
}

// AccessRequestInput is what an agent asks for (the request's fields it
// may set).
type AccessRequestInput struct {
	Kind    AccessKind `json:"kind"`
	Tool    string     `json:"tool,omitempty"`
	Command []string   `json:"command,omitempty"`
	Path    string     `json:"path,omitempty"`
	Domain  string     `json:"domain,omitempty"`
	Limit   string     `json:"limit,omitempty"`
	Value   string     `json:"value,omitempty"`
	Reason  string     `json:"reason"`
}

// DecideRequest grants or denies a pending access request.
type DecideRequest struct {
	Note string `json:"note,omitempty"`
}

// Capabilities is what a run may do now, derived from its definition, its
// grants and the sandbox's recorded enforcement, never from prose.
type Capabilities struct {
	Run       string `json:"run"`
	Agent     string `json:"agent"`
	AgentHash string `json:"agent_hash"`
	Workspace Access `json:"workspace"`
	// State is the run's state; Working says whether its workspace takes
	// work now.
	State   WorkspaceState `json:"state"`
	Working bool           `json:"working"`
	// Tools are the tools offered now, with their narrowing (grants
	// included).
	Tools []ToolCapability `json:"tools"`
	// Net is the network a command gets when it asks for none: always
	// "none". NetCeiling is the most it may ask for (its definition's
	// network and the domains granted since); only the operator gives a
	// command more.
	Net        string      `json:"net"`
	NetCeiling string      `json:"net_ceiling"`
	Limits     AgentLimits `json:"limits,omitzero"`
	Env        []string    `json:"env,omitempty"`
	Secrets    []string    `json:"secrets,omitempty"`
	// Unavailable names the tools the definition gives that are not
	// offered here, and why (exec and verify where this daemon cannot
	// confine a command).
	Unavailable map[string]string `json:"unavailable,omitempty"`
	// AgentToolsOff are the agent clients' own tools (CLIENT:TOOL) that
	// the run's home turns off, read-only to the run: their work goes
	// through paddock's tools and broker instead.
	AgentToolsOff []string `json:"agent_tools_off,omitempty"`
	// Holds says what holds each property of the confinement of the
	// run's commands on this daemon's kernel (a command with no network).
	Holds []Hold `json:"holds,omitempty"`
	// Checks are the verify checks the project's manifest declares.
	Checks []string `json:"checks,omitempty"`
	// Enforcement is what the sandbox enforced for the run's latest
	// command, as it recorded it (nil before the first).
	Enforcement *Enforcement `json:"enforcement,omitempty"`
	// Grants are the access requests granted so far; Pending those not
	// decided yet.
	Grants  []*AccessRequest `json:"grants,omitempty"`
	Pending []*AccessRequest `json:"pending,omitempty"`
	// Menu is what the run's agent may pick from its flow now, and what it
	// is given (nil when the run is in no flow).
	Menu *Menu `json:"menu,omitempty"`
}

// ToolCapability is one offered tool and how it is narrowed.
type ToolCapability struct {
	Name  string   `json:"name"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	Ask   []string `json:"ask,omitempty"`
}

// ParseSize reads a size in bytes, or with KiB, MiB or GiB (100MiB); "" is 0.
func ParseSize(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	num, mult := s, int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			num, mult = strings.TrimSpace(n), m
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q: want a size such as 100MiB (bytes, or with KiB, MiB or GiB)", s)
	}
	return n * mult, nil
}

// CredentialRule is a credential the requests of a run's commands to Host
// carry in Header, set by the proxy of their allow-list network from the
// daemon's secret Secret (with Prefix before it, such as "Bearer "): the
// run holds only a placeholder, in the variable Env. Use names a built-in
// rule instead (anthropic, openai), whose fields the others may override.
type CredentialRule struct {
	Use    string `json:"use,omitempty"`
	Host   string `json:"host,omitempty"`
	Header string `json:"header,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Secret string `json:"secret,omitempty"`
	Env    string `json:"env,omitempty"`
}

// BuiltinCredentials are the rules Use names.
var BuiltinCredentials = map[string]CredentialRule{
	"anthropic": {Host: "api.anthropic.com", Header: "x-api-key", Secret: "ANTHROPIC_API_KEY", Env: "ANTHROPIC_API_KEY"},
	"openai":    {Host: "api.openai.com", Header: "Authorization", Prefix: "Bearer ", Secret: "OPENAI_API_KEY", Env: "OPENAI_API_KEY"},
}

// Resolved is the rule with its built-in's fields where it leaves them out.
func (c CredentialRule) Resolved() CredentialRule {
	b, ok := BuiltinCredentials[c.Use]
	if !ok {
		return c
	}
	if c.Host == "" {
		c.Host = b.Host
	}
	if c.Header == "" {
		c.Header, c.Prefix = b.Header, b.Prefix
	}
	if c.Secret == "" {
		c.Secret = b.Secret
	}
	if c.Env == "" {
		c.Env = b.Env
	}
	return c
}

// CredentialPlaceholder is what a run holds in a credential's variable.
func CredentialPlaceholder(secret string) string {
	return "paddock-placeholder-" + strings.ToLower(strings.ReplaceAll(secret, "_", "-"))
}
