package paddock

import (
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Project is a declared root: a git repository on the host that paddock
// guards. Nothing writes into Root except an approved apply (a later issue)
// and the git metadata a worktree workspace needs, which cleanup removes.
type Project struct {
	Name string `json:"name"`
	Root string `json:"root"` // absolute, symlinks resolved
	// Fingerprint identifies the repository behind Root, so that a root
	// replaced by another repository is noticed rather than trusted.
	Fingerprint string    `json:"repository_fingerprint"`
	CreatedAt   time.Time `json:"created_at"`
	// Protected lists the path patterns agents may not write in this
	// project's workspaces (besides .git, always). Nil (null) means the
	// default list; empty ([]) protects .git alone.
	Protected []string `json:"protected"`
	// AttributionAllow names the attribution-lint rules this project allows.
	AttributionAllow []string `json:"attribution_allow,omitempty"`
	// Caches are the shared caches the project's runs see.
	Caches []Cache `json:"caches,omitempty"`
	// Checks are the operator's overrides of the capability manifest:
	// a check named here runs this command (sh -c, at the workspace's
	// top) instead of what was detected; an empty command drops it. They
	// live in the registration, never in the repository.
	Checks []CheckOverride `json:"checks,omitempty"`
	// Policy is the project's approval policy; nil is
	// DefaultApprovalPolicy.
	Policy *ApprovalPolicy `json:"approval_policy,omitempty"`
	// Lock is the current holder of the project lock, if any (read-only view).
	Lock *Lock `json:"lock,omitempty"`
}

// Lock is the exclusive project lock, scoped run × project (record 001): the
// run that holds it is the only one that may write the project tree.
type Lock struct {
	Project    string    `json:"project"`
	RunID      string    `json:"run_id"`
	AcquiredAt time.Time `json:"acquired_at"`
}

// Run is one agent's bounded session against one project at one base revision.
type Run struct {
	ID      string `json:"id"`
	Project string `json:"project"`
	// Access is what the run's agent may do to its workspace.
	Access Access `json:"access"`
	// Agent is the copy of the definition the run was made with, and
	// AgentHash its hash: editing the definition later changes nothing
	// here. Nil only for runs made before definitions existed.
	Agent     *AgentDefinition `json:"agent,omitempty"`
	AgentHash string           `json:"agent_hash,omitempty"`
	// Secrets names the secrets the run's commands get in their environment.
	// Their values are never stored or shown; outputs have them masked.
	Secrets []string `json:"secrets,omitempty"`
	// IncludeIgnored puts files the base's ignore rules leave out into the
	// run's change sets.
	IncludeIgnored bool      `json:"include_ignored,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	// RemovedAt is set by `paddock rm`: the run leaves listings, but its
	// record and events stay for the audit trail.
	RemovedAt time.Time `json:"removed_at,omitzero"`
	// ReviewOf, on a review run, is what it reviews: another run's
	// submitted change set, by hash, on its base. A review run is read
	// only and can never submit, approve or apply.
	ReviewOf *ReviewOf `json:"review_of,omitempty"`
	// Review is where its change set stands: submitted (awaiting a
	// decision), approved, applied or rejected; empty while nothing is
	// submitted. Read from the run's submission, on the node that holds it.
	Review string `json:"review,omitempty"`
	// LastSeq is the seq of the run's latest event.
	LastSeq   int64      `json:"last_seq"`
	Workspace *Workspace `json:"workspace,omitempty"`
	// Node, with a store that several daemons share (package postgres),
	// is the node that holds the run's workspace, and NodeState that
	// node's state; both are empty on a daemon of its own.
	Node      string    `json:"node,omitempty"`
	NodeState NodeState `json:"node_state,omitempty"`
}

// ReviewOf names the change set a review run's workspace holds: run Run's
// submission Hash, committed onto its base as Commit (the review run's
// base revision). Skipped lists the entries the commit leaves out, those
// never applied (under .git, links into it), which the reviewer sees only
// in the change set itself.
type ReviewOf struct {
	// Flow is the flow the review run works in, if a flow made it (the
	// flow moves it; Review and a resubmission do not).
	Flow   string `json:"flow,omitempty"`
	Run    string `json:"run"`
	Hash   string `json:"hash"`
	Commit string `json:"commit"`
	// Base is the reviewed run's base revision, where the review's
	// manifest is read (never from the change set under review); Commit
	// is its child holding the change set, in the review run's own
	// object store, or Base itself for an empty change set.
	Base    string   `json:"base,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
	// Check marks a check run: one paddock makes to run a verify's checks
	// of that change set (never a reviewer's, never in a review's list),
	// in a home of its own and with no cache the agent could write.
	Check bool `json:"check,omitempty"`
	// Masks are the names of the reviewed run's secrets (its own, its
	// agent's credentials, and those it masks in turn): the change set
	// under review may hold their values, so this run's answers mask
	// them too. The run is never given them.
	Masks []string `json:"masks,omitempty"`
}

// Where a run's change set stands (Run.Review).
const (
	ReviewSubmitted = "submitted"
	ReviewApproved  = "approved"
	ReviewApplied   = "applied"
	ReviewRejected  = "rejected"
)

// State is the run's state as the user sees it: its workspace's state.
func (r *Run) State() WorkspaceState {
	if r.Workspace == nil {
		return ""
	}
	return r.Workspace.State
}

// Cache is a directory shared by a project's runs, shown in each run's
// home where its tool looks for it (Go's module cache at
// ~/go/pkg/mod, its build cache at ~/.cache/go-build, npm's at ~/.npm,
// pip's at ~/.cache/pip, cargo's registry at ~/.cargo/registry).
//
// Its mode says what a run's writes there do:
//
//   - cow (the default): each run sees the cache through a copy-on-write
//     layer of its own. The shared directory is read and never written;
//     what the run writes (a build's outputs) is the run's alone, kept for
//     its life and removed with it. Tools that must write their cache (Go
//     refuses a read-only GOCACHE) work, and no run can leave anything
//     there for another.
//   - ro: strictly read-only: the run reads what the operator filled the
//     cache with, and writes nothing there at all.
//   - rw: the shared directory itself, written by runs: state shared
//     between runs, where one run can put what another then uses (a
//     poisoned module, a build output), so only a project whose runs trust
//     each other should ask. A check run never gets it.
type Cache struct {
	Name string `json:"name"` // go-mod, go-build, npm, pip, cargo
	Mode string `json:"mode"` // cow (the default), ro or rw
	// Path is the host directory; empty means the daemon's own,
	// <state>/caches/PROJECT/NAME.
	Path string `json:"path,omitempty"`
}

// The cache modes (Cache.Mode).
const (
	CacheCOW = "cow"
	CacheRO  = "ro"
	CacheRW  = "rw"
)

// CacheKinds maps each cache name to where its tool looks for it, under
// a run's home.
var CacheKinds = map[string]string{
	"go-mod":   "go/pkg/mod",
	"go-build": ".cache/go-build",
	"npm":      ".npm",
	"pip":      ".cache/pip",
	"cargo":    ".cargo/registry",
}

// ParseCache reads NAME[:cow|:ro|:rw][=PATH], as project add --cache takes
// it; the mode defaults to cow.
func ParseCache(s string) (Cache, error) {
	spec, path, _ := strings.Cut(s, "=")
	name, mode, _ := strings.Cut(spec, ":")
	if mode == "" {
		mode = CacheCOW
	}
	if err := CheckCacheName(name); err != nil {
		return Cache{}, err
	}
	if mode != CacheCOW && mode != CacheRO && mode != CacheRW {
		return Cache{}, Errorf(CodeBadRequest, "cache %q: mode %q is cow, ro or rw", name, mode)
	}
	if path != "" && !filepath.IsAbs(path) {
		return Cache{}, Errorf(CodeBadRequest, "cache %q: the path %q must be absolute", name, path)
	}
	return Cache{Name: name, Mode: mode, Path: path}, nil
}

// CheckCacheName refuses a name that is not one of CacheKinds.
func CheckCacheName(name string) error {
	if _, ok := CacheKinds[name]; ok {
		return nil
	}
	names := make([]string, 0, len(CacheKinds))
	for n := range CacheKinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return Errorf(CodeBadRequest, "cache %q: the caches are %s", name, strings.Join(names, ", "))
}

// CheckOverride is an operator's command for one verify check.
type CheckOverride struct {
	Name    string `json:"name"`
	Command string `json:"command"`
}

// CheckNames are the checks verify knows.
var CheckNames = []string{"build", "test", "lint", "format-check"}

// ParseCheckOverrides reads NAME=COMMAND settings (project set --check); a
// name given twice, or one verify does not know, is refused.
func ParseCheckOverrides(specs []string) ([]CheckOverride, error) {
	var out []CheckOverride
	seen := map[string]bool{}
	for _, s := range specs {
		name, cmd, ok := strings.Cut(s, "=")
		known := false
		for _, n := range CheckNames {
			known = known || n == name
		}
		if !ok || !known {
			return nil, Errorf(CodeBadRequest, "check %q: want NAME=COMMAND with NAME one of %s (an empty COMMAND drops the check)", s, strings.Join(CheckNames, ", "))
		}
		if seen[name] {
			return nil, Errorf(CodeBadRequest, "check %s is given twice", name)
		}
		seen[name] = true
		out = append(out, CheckOverride{Name: name, Command: strings.TrimSpace(cmd)})
	}
	return out, nil
}
