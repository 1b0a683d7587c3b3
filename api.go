package paddock

import (
	"io"
	"time"
)

// This file holds the request and answer shapes of the /v1 API that are not
// domain records themselves, so that the Go client needs only this package.

// CreateRunRequest asks for a new run.
type CreateRunRequest struct {
	Project string `json:"project"`
	// Kind is the workspace kind; clone if empty.
	Kind string `json:"kind,omitempty"`
	// Base is the revision the workspace starts from; HEAD if empty.
	Base string `json:"base,omitempty"`
	// Dir is the directory handed over, for kind operator_dir only (and
	// required there): never the project's checkout, inside it or above it.
	Dir           string `json:"dir,omitempty"`
	CleanupPolicy string `json:"cleanup_policy,omitempty"`
	// Access is write (default), read, or none (no workspace at all).
	Access string `json:"access,omitempty"`
	// Agent names the agent definition the run is made with (stored with
	// `paddock agent add`, or built in: coder, reviewer, decider); without
	// one, the built-in of the access mode. The run keeps a copy.
	Agent string `json:"agent,omitempty"`
	// Secrets names the daemon's secrets the run's commands may use.
	Secrets []string `json:"secrets,omitempty"`
	// IncludeIgnored puts ignored files (build output, dependencies) into
	// the run's change sets; by default they are listed apart.
	IncludeIgnored bool `json:"include_ignored,omitempty"`
	// Mounts are more host directories shown read-only in this run's
	// view, at their own paths, besides its definition's (paddock run's
	// --mount-ro, and where the command it starts lives).
	Mounts []string `json:"mounts,omitempty"`
	// IncludeUncommitted starts the run from HEAD with the uncommitted
	// changes of the project's checkout (tracked and untracked, not
	// ignored) in its base: committed into a store of the run's own, never
	// the project's; clone and overlay runs only.
	IncludeUncommitted bool `json:"include_uncommitted,omitempty"`
	// Credentials are more credentials this run's requests carry, set by
	// the proxy (paddock run's --credential), besides its definition's.
	Credentials []CredentialRule `json:"credentials,omitempty"`
}

// ReviewRequest asks for the review run of a run's submitted change set.
type ReviewRequest struct {
	// Agent names a read-only agent definition; the built-in reviewer if empty.
	Agent string `json:"agent,omitempty"`
}

// AddProjectRequest declares a project.
type AddProjectRequest struct {
	Path string `json:"path"`
	Name string `json:"name,omitempty"`
	// Protect adds path patterns agents may not write to the default list.
	Protect []string `json:"protect,omitempty"`
	// NoDefaultProtect drops the default list (the .git rule always holds).
	NoDefaultProtect bool `json:"no_default_protect,omitempty"`
	// AllowAttribution names attribution-lint rules the project allows.
	AllowAttribution []string `json:"allow_attribution,omitempty"`
	// Caches are shared caches, each NAME[:cow|:ro|:rw][=PATH] (see Cache).
	Caches []string `json:"caches,omitempty"`
}

// SetProjectRequest changes a project's settings, those AddProjectRequest
// takes besides the path and the name (which identify the project). A
// setting the request leaves out keeps its value.
type SetProjectRequest struct {
	// Protect and NoDefaultProtect set the protected paths as project add
	// does: the default list plus Protect, or Protect alone with
	// NoDefaultProtect. DefaultProtect, alone, goes back to the default
	// list. None of the three keeps the project's paths.
	Protect          []string `json:"protect,omitempty"`
	NoDefaultProtect bool     `json:"no_default_protect,omitempty"`
	DefaultProtect   bool     `json:"default_protect,omitempty"`
	// AllowAttribution, when present, is the whole list of attribution-lint
	// rules the project allows ([] allows none).
	AllowAttribution *[]string `json:"allow_attribution,omitempty"`
	// Caches, when present, is the whole list of shared caches, each
	// NAME[:cow|:ro|:rw][=PATH] ([] for none). RemoveCaches (names) and
	// AddCaches (NAME[:cow|:ro|:rw][=PATH], each replacing the cache of
	// its name) then change the list, in that order.
	Caches       *[]string `json:"caches,omitempty"`
	AddCaches    []string  `json:"add_caches,omitempty"`
	RemoveCaches []string  `json:"remove_caches,omitempty"`
	// Checks, when present, is the whole list of verify overrides, each
	// NAME=COMMAND ([] for none): see Project.Checks.
	Checks *[]string `json:"checks,omitempty"`
	// ApprovalPolicy, when present, replaces the project's approval
	// policy; DefaultPolicy goes back to DefaultApprovalPolicy.
	ApprovalPolicy *ApprovalPolicy `json:"approval_policy,omitempty"`
	DefaultPolicy  bool            `json:"default_policy,omitempty"`
}

// UnlockRequest force-releases a project lock.
type UnlockRequest struct {
	Force bool `json:"force"`
}

// UnlockResult says which lock was released, if any, and who released it.
type UnlockResult struct {
	Released *Lock  `json:"released"`
	By       string `json:"by"`
}

// CheckoutStatus is the state of a project's checkout (its declared root)
// beyond its commits, as the daemon reads it: a run starts at a revision,
// so Uncommitted changes are not in a new run.
type CheckoutStatus struct {
	Root string `json:"root"`
	// Uncommitted counts the paths changed against HEAD or the index, or
	// untracked and not ignored (git status, submodules' own changes aside).
	Uncommitted int `json:"uncommitted"`
}

// CheckpointRequest asks for a checkpoint.
type CheckpointRequest struct {
	Reason string `json:"reason,omitempty"`
}

// ResumeResult is a resumed run and whether its files changed while it was checkpointed.
type ResumeResult struct {
	Run   *Run `json:"run"`
	Drift bool `json:"drift"`
}

// GCRequest asks for a garbage collection.
type GCRequest struct {
	DryRun bool `json:"dry_run"`
}

// Finding is one thing recovery or gc found out of step, and what was done.
type Finding struct {
	RunID  string         `json:"run_id,omitempty"`
	Path   string         `json:"path"`
	State  WorkspaceState `json:"state,omitempty"`
	Issue  string         `json:"issue"`
	Action string         `json:"action"`
}

// Actions reported in findings.
const (
	ActionRolledBack   = "rolled back"
	ActionCleaned      = "cleaned"
	ActionWouldClean   = "would clean"
	ActionCheckpointed = "checkpointed"
	ActionMarked       = "marked orphaned"
	ActionKept         = "kept (retained)"
	ActionFailed       = "failed"
	ActionFinished     = "finished" // a flow's step, taken before a crash
)

// UILogin is a one-time login to the review page: opening URL in a
// browser before Expires starts a session there (see package ui).
type UILogin struct {
	URL     string    `json:"url"`
	Expires time.Time `json:"expires"`
}

// DaemonStatus describes a running daemon.
type DaemonStatus struct {
	Version  string `json:"version"`
	PID      int    `json:"pid"`
	StateDir string `json:"state_dir"`
	Socket   string `json:"socket"`
	Listen   string `json:"listen,omitempty"`
	// MetricsListen is the address of serve --metrics-listen's listener,
	// where Prometheus scrapes /metrics without a token.
	MetricsListen string `json:"metrics_listen,omitempty"`
	// SharedSocket is serve --shared-socket's path: local users mapped to
	// principals call there.
	SharedSocket string `json:"shared_socket,omitempty"`
	// Node is the daemon's node id when it shares its store with others.
	Node      string    `json:"node,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// Recovered lists what the daemon put back in step when it started.
	Recovered []Finding `json:"recovered"`
	// RestartNeeded lists the paddock.toml settings changed since the
	// daemon started that take effect only at its next start.
	RestartNeeded []string `json:"restart_needed,omitempty"`
}

// DoctorReport is what one paddock process finds it can enforce on this
// machine. The daemon's (GET /v1/doctor) is what runs get: the sandbox is
// built by the daemon, as the daemon's user, so the CLI's own process, run
// by another user or in another namespace, may find otherwise. Process
// says which one the checks describe.
type DoctorReport struct {
	Process ProcessInfo `json:"process"`
	Checks  []Check     `json:"checks"`
	// Holds says what holds each property of a command's confinement
	// here: the record of the doctor's own sandboxed /bin/true.
	Holds []Hold `json:"holds,omitempty"`
}

// ProcessInfo names a process of paddock's and who it runs as.
type ProcessInfo struct {
	Role string `json:"role"` // "daemon", or "cli" when no daemon answered
	PID  int    `json:"pid"`
	UID  int    `json:"uid"`
	EUID int    `json:"euid"`
	GID  int    `json:"gid"`
}

// Check is one finding of a doctor: a mechanism, tool or setting, whether
// it works, and the one-line fix where there is one.
type Check struct {
	Name   string      `json:"name"`
	Status CheckStatus `json:"status"`
	Detail string      `json:"detail"`
	Fix    string      `json:"fix,omitempty"`
}

// CheckStatus is the outcome of a Check.
type CheckStatus string

// The outcomes of a Check.
const (
	CheckOK   CheckStatus = "ok"
	CheckWarn CheckStatus = "warn" // missing or restricted; some features will be refused
	CheckFail CheckStatus = "fail" // paddock cannot work as configured
)

// InboxResult describes a file delivered into a run's inbox.
type InboxResult struct {
	Path string `json:"path"` // relative to the workspace root
	Size int64  `json:"size"`
	MIME string `json:"mime"`
}

// ExecRequest runs a command in a run's workspace, confined.
type ExecRequest struct {
	Argv []string `json:"argv"`
	// Dir is the working directory, relative to the workspace root.
	Dir string `json:"dir,omitempty"`
	// Net is none (the default), allow=DOMAIN,… (only those, through a
	// proxy; every connection is an event) or host.
	Net string `json:"net,omitempty"`
	// Env adds KEY=VALUE pairs to the command's environment, which is
	// otherwise built from a fixed allow-list, never inherited.
	Env []string `json:"env,omitempty"`
	// Timeout bounds the wall time, such as "2m"; the default is 10m.
	Timeout string `json:"timeout,omitempty"`
	// Limits override the other per-command limits; zero keeps a default.
	Limits ExecLimits `json:"limits,omitzero"`
	// AllowDegraded runs even where this machine lacks a mechanism; it is
	// recorded in the result and the events.
	AllowDegraded bool `json:"allow_degraded,omitempty"`
	// Stdin is what the command reads on its standard input (base64 in
	// JSON), at most MaxExecStdin bytes; without it the command reads
	// /dev/null. Its size is recorded, never its content.
	Stdin []byte `json:"stdin,omitempty"`
	// Session marks the command as the run's agent session (paddock run's
	// CMD, a bootstrapped agent's job) rather than one command of it: its
	// wall time is the session's (Manager.SessionLimits: none by default
	// at a terminal), its CPU time is not limited, and its output passes
	// whole while it streams. An operator's alone: an agent cannot ask.
	Session bool `json:"session,omitempty"`
	// Terminal runs the command on a terminal of this size: a
	// pseudo-terminal is its stdin, stdout and stderr and its controlling
	// terminal, and all its output is stdout. Its input is the stream
	// ExecAttach hands over (or Stdin).
	Terminal *TerminalSize `json:"terminal,omitempty"`
}

// TerminalSize is a terminal's size in characters.
type TerminalSize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// ExecIO is what an attached command (ExecAttach) streams, both ways.
type ExecIO struct {
	// Stdin is read as it comes and written to the command's stdin (its
	// terminal, or a pipe); its end is the command's end of input (on a
	// terminal, the end-of-file character, ^D). Nil: nothing to read.
	Stdin io.Reader
	// Resize carries the terminal's new sizes while the command runs.
	Resize <-chan TerminalSize
	// Stdout and Stderr get the output, masked, as it comes (a terminal's
	// is all Stdout).
	Stdout, Stderr io.Writer
}

// MaxExecStdin bounds an exec's stdin: it travels in the request and is
// held in the daemon's memory while the command reads it. Larger input goes
// into the workspace as a file (a tool's write, the inbox) and the command
// reads it from there.
const MaxExecStdin = 16 << 20

// ExecLimits are the per-command limits a request may set.
type ExecLimits struct {
	CPU      string `json:"cpu,omitempty"`       // CPU time, such as "30s" (default 10m)
	Procs    int    `json:"procs,omitempty"`     // processes (default 512)
	Memory   int64  `json:"memory,omitempty"`    // address space in bytes (default 8 GiB)
	FileSize int64  `json:"file_size,omitempty"` // largest file written, bytes (default 1 GiB)
	Output   int64  `json:"output,omitempty"`    // bytes kept of stdout and of stderr (default 8 MiB)
	Tmp      int64  `json:"tmp,omitempty"`       // size of /tmp, bytes (default 512 MiB)
}

// SubmitRequest freezes a run's change set. The body is optional.
type SubmitRequest struct {
	// ExpectHash, if set, is the hash of the change set the submitter
	// reviewed: if the change set computed now has another (the workspace
	// changed since), nothing is frozen and the answer is a conflict.
	ExpectHash string `json:"expect_hash,omitempty"`
}

// ApproveRequest approves a submitted change set by its hash.
type ApproveRequest struct {
	Hash string `json:"hash"`
	// Hunks approves only these hunks of it (as diff --blame numbers
	// them): the approval is of the change set they make, by its own hash,
	// and an apply writes only them.
	Hunks []int `json:"hunks,omitempty"`
}

// ApplyRequest applies an approved change set to a new branch of the project.
type ApplyRequest struct {
	// To is "branch" (the default: a commit on a new branch) or "worktree"
	// (the files written into the project's working tree, all or nothing).
	To string `json:"to,omitempty"`
	// Branch is the new branch; paddock/RUN if empty. It must not exist.
	Branch string `json:"branch,omitempty"`
	// ThreeWay, with To "worktree", merges a file the user changed since
	// the base with the approved change (line by line) instead of refusing;
	// overlapping changes still refuse the whole apply.
	ThreeWay bool `json:"three_way,omitempty"`
	// AuthorName and AuthorEmail author the commit; the daemon's configured
	// identity if empty.
	AuthorName  string `json:"author_name,omitempty"`
	AuthorEmail string `json:"author_email,omitempty"`
}

// BootstrapRequest binds a new run to a project, an agent definition, the
// task, the inputs the agent may read and a base revision.
type BootstrapRequest struct {
	Project string `json:"project"`
	// Agent is the definition inline; AgentName names a stored or built-in
	// one instead. Exactly one of the two.
	Agent     AgentDefinition `json:"agent,omitzero"`
	AgentName string          `json:"agent_name,omitempty"`
	Task      string          `json:"task"`
	Inputs    []string        `json:"inputs,omitempty"`
	Base      string          `json:"base,omitempty"`
	Kind      string          `json:"kind,omitempty"`
}

// BootstrapResult is the new run and its bearer token. The token reaches
// only that run's routes, and not those that decide about it (approve,
// apply, reject, retain, rm); it is shown once and stored only as a hash.
type BootstrapResult struct {
	Run   *Run   `json:"run"`
	Token string `json:"token"`
}

// Artifact is one of a run's artifacts.
type Artifact struct {
	Kind    string `json:"kind"`
	Content any    `json:"content"`
}

// AgentHeader marks a request made for a run's agent by an operator's
// client (paddock mcp): like a call with the run's token, it resumes the
// run if a daemon restart checkpointed it.
const AgentHeader = "Paddock-Agent"

// VerifyRequest names the checks to run (build, test, lint,
// format-check); none runs build, lint and test (manifest.VerifyOrder),
// those the manifest declares.
type VerifyRequest struct {
	Checks []string `json:"checks,omitempty"`
}

// VerifyResult is what a verify found, tied to the change set it ran
// against: a reviewer sees whether the submitted bytes passed.
type VerifyResult struct {
	// Hash is the change set's hash when the checks began; Stale says it
	// moved while they ran (the workspace changed meanwhile).
	Hash   string        `json:"hash"`
	Stale  bool          `json:"stale,omitempty"`
	Passed bool          `json:"passed"`
	Checks []CheckResult `json:"checks"`
	// RanIn is where the checks ran: never the agent's run, but a check
	// run made for them (nil when the verified run is itself one).
	RanIn *CheckEnvironment `json:"ran_in,omitempty"`
}

// CheckEnvironment is what a verify's checks ran in: a check run holding
// exactly the change set's bytes (Commit, on Base), a fresh home, no
// network, no secrets, and only the project's read-only caches (Caches);
// Withheld names the caches the agent can write, which a check never
// gets.
type CheckEnvironment struct {
	Run      string        `json:"run"`
	Kind     WorkspaceKind `json:"kind"`
	Commit   string        `json:"commit"`
	Base     string        `json:"base"`
	Home     string        `json:"home"`
	Network  string        `json:"network"`
	Caches   []string      `json:"caches,omitempty"`
	Withheld []string      `json:"withheld_caches,omitempty"`
}

// CheckResult is one command of a check.
type CheckResult struct {
	Name       string   `json:"name"`
	Dir        string   `json:"dir,omitempty"`
	Argv       []string `json:"argv"`
	ExitCode   int      `json:"exit_code"`
	Passed     bool     `json:"passed"`
	DurationMS float64  `json:"duration_ms"`
	// Output is the end of the command's output, masked (stdout then
	// stderr); Truncated says there was more.
	Output    string      `json:"output"`
	Truncated bool        `json:"truncated,omitempty"`
	Tests     *TestCounts `json:"tests,omitempty"`
	// Skipped says why a check did not run (an earlier one failed).
	Skipped string `json:"skipped,omitempty"`
}

// TestCounts are a test run's numbers, read from its structured output
// (go test -json, JUnit XML).
type TestCounts struct {
	Passed   int      `json:"passed"`
	Failed   int      `json:"failed"`
	Skipped  int      `json:"skipped"`
	Failures []string `json:"failures,omitempty"`
}

// AddAgentRequest stores an agent definition: its TOML, and the file's
// name (for the errors, which name the file and the line).
type AddAgentRequest struct {
	File   string `json:"file"`
	Source string `json:"source"`
}

// ImportRequest says how a bundle is imported (the bundle is the body).
type ImportRequest struct {
	// Project receives the run; the bundle's project name if empty. It
	// must hold the bundle's base revision.
	Project string `json:"project,omitempty"`
	// Kind is the new run's workspace kind (the daemon's default if empty).
	Kind string `json:"kind,omitempty"`
	// Trust adds public keys ("ed25519 BASE64") trusted for this import,
	// beside the daemon's own and those in its trusted-keys directory.
	Trust []string `json:"trust,omitempty"`
	// Untrusted imports a bundle whose signer is not trusted: its change
	// set is restored and submitted, its approvals are not.
	Untrusted bool `json:"untrusted,omitempty"`
}

// MaxBundle bounds the bundle an import reads.
const MaxBundle = 2 << 30

// ImportResult is a run restored from a bundle.
type ImportResult struct {
	Run      *Run   `json:"run"`
	FromRun  string `json:"from_run"`
	Hash     string `json:"hash"`
	Signer   string `json:"signer"`
	Trusted  bool   `json:"trusted"`
	Approved bool   `json:"approved"`
	// ApprovedBy is who approved the change set where the bundle was made.
	ApprovedBy string `json:"approved_by,omitempty"`
}

// BundleKey is the public half of the key a daemon signs bundles with.
type BundleKey struct {
	PublicKey string `json:"public_key"` // "ed25519 BASE64"
	KeyID     string `json:"key_id"`
}

// The states of a queue entry (paddock queue).
const (
	QueueQueued   = "queued"   // waiting its turn
	QueueTesting  = "testing"  // replayed onto the branch's tip, the checks running
	QueueLanding  = "landing"  // checks passed; the branch is being moved
	QueueLanded   = "landed"   // the branch holds it
	QueueReturned = "returned" // back to a person: a conflict, a replay that differs, a failed check
	QueueRemoved  = "removed"  // taken out of the queue
	QueueUndone   = "undone"   // landed, then the branch was moved back
)

// QueueEntry is one approved change set in a project's merge queue: replayed
// in order onto the current tip of its branch, checked there with the
// project's manifest checks in a throwaway run, and landed only if they
// pass.
type QueueEntry struct {
	Run     string    `json:"run"`
	Project string    `json:"project"`
	Branch  string    `json:"branch"`
	Hash    string    `json:"hash"` // the approved change set
	State   string    `json:"state"`
	AddedAt time.Time `json:"added_at"`
	AddedBy string    `json:"added_by"`
	// Accept is a replayed tree a person accepted after it came back
	// differing from what was approved.
	Accept string `json:"accept,omitempty"`
	// Tip is the branch's commit the change set was last replayed onto;
	// Commit the commit that landed (or would have), Tree its tree.
	Tip    string `json:"tip,omitempty"`
	Commit string `json:"commit,omitempty"`
	Tree   string `json:"tree,omitempty"`
	// Merged lists the paths the branch had changed too, merged line by
	// line: their diff is not the one approved.
	Merged []string `json:"merged,omitempty"`
	// TestRun is the throwaway run the checks ran in.
	TestRun   string    `json:"test_run,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	// Diff, in one entry's answer (not in lists), is what would land of
	// the Merged paths: the diff from Tip to Commit, for review.
	Diff string `json:"diff,omitempty"`
}

// QueueAddRequest puts an approved run in its project's merge queue.
type QueueAddRequest struct {
	// Branch is where it lands; the project's current branch if empty.
	Branch string `json:"branch,omitempty"`
	// Accept is the tree of a replay that came back differing, which the
	// person reviewed (paddock queue show): it lands only as that tree.
	Accept string `json:"accept,omitempty"`
}

// Blame says where each hunk of a change set came from (paddock diff
// --blame): the tool calls and commands, by event seq, that wrote its
// lines. Hunks are numbered over the whole diff, as approve --hunks takes
// them; a file without hunks (binary, a mode change) is one.
type Blame struct {
	Run     string               `json:"run"`
	Hash    string               `json:"hash"`
	Hunks   []HunkBlame          `json:"hunks"`
	Sources map[int64]HunkSource `json:"sources"`
}

// HunkBlame is one hunk and the events that wrote it (0: not recorded).
type HunkBlame struct {
	N      int     `json:"n"`
	Path   string  `json:"path"`
	Header string  `json:"header,omitempty"`
	Seqs   []int64 `json:"seqs"`
}

// HunkSource is an event a hunk came from.
type HunkSource struct {
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time,omitzero"`
	Type string    `json:"type,omitempty"`
	What string    `json:"what"`
}
