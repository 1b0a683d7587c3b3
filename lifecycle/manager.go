// Package lifecycle is the workspace manager: it takes a run from request to
// cleanup through the states of paddock.Transition, keeps the records in the
// store and the directories on disk in step, and puts them back in step after
// a crash.
//
// # Guarantees
//
//   - Every state change is one store transaction holding the new state and
//     its event; disk work happens between transactions, and the state names
//     what is in flight (preparing, cleanup_pending), so a restart knows what
//     to finish or roll back.
//   - Nothing deletes a retained workspace: the lifecycle table has no edge
//     from retained towards cleanup, Transition refuses cleanup of anything
//     ever retained, and gc keeps a directory that carries a retention marker
//     even when its record is gone.
//   - A workspace holds its project's lock while it is live if its kind needs
//     it (operator_dir); every path out of the live states releases it.
//   - An apply into a project's working tree follows no symbolic link in
//     it: every directory on the way to a path is opened by itself with
//     O_NOFOLLOW at the moment of use (apply/tree.go), so a link there, or one
//     swapped in meanwhile, refuses the apply or fails it before anything
//     is written through it. Type changes (a link or a file becoming a
//     directory, a directory becoming a file or a link) are planned before
//     anything is written (apply/plan.go). The apply verifies the tree it
//     leaves and rolls itself back if it is not the approved one; a journal
//     finishes or rolls back an apply or an undo killed at any step; undo
//     gives back the tree exactly, directories' and files' permission bits
//     included.
//   - No apply, to a branch or into the working tree, takes an entry under
//     .git, or a link into .git, to a protected path or out of the project,
//     judged again from the frozen content whatever the labels say.
//
// # Limitations
//
//   - A link's target is judged by its text (changeset.NeverApplied): one
//     that reaches .git through another link already in the working tree
//     is applied. No apply writes through it; a person's tools might.
//   - Another process writing the working tree during an apply (the project
//     lock keeps only paddock's own runs out) is noticed by the verification
//     when it touches the apply's paths; the rollback then puts those paths
//     back as they were before the apply, over that process's writes.
package lifecycle

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base32"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/sandbox"
	"go.opentelemetry.io/otel/trace"
)

// Config is what a Manager is made of. NewManager needs Store, Git and
// WorkspacesDir; every other field has a default or may stay empty. The
// Manager owns Harnesses: Close closes it.
type Config struct {
	Store paddock.Store
	Git   *gitx.Git
	// Providers make and remove workspaces, one per kind.
	Providers map[paddock.WorkspaceKind]paddock.WorkspaceProvider
	// WorkspacesDir holds the clone and worktree workspaces, one directory per run.
	WorkspacesDir string
	// DefaultKind is the kind of a run that asks for none; clone if empty.
	DefaultKind paddock.WorkspaceKind
	// SandboxUID is the host uid commands run as; 0 means the daemon's own.
	// A daemon running as root must set it, and then hands each new clone or
	// worktree workspace to that uid.
	SandboxUID int
	// Harnesses keeps each active run's resident sandbox and runs its
	// commands there; nil runs every command in a sandbox of its own.
	Harnesses *sandbox.Pool
	// Secret returns the value of a named secret, if the daemon has it.
	Secret func(name string) (string, bool)
	// ArtifactsDir keeps submitted change sets and their decisions.
	ArtifactsDir string
	// BundleKeyFile is the key bundles are signed with (PKCS#8 PEM, made
	// on first use); TrustedKeysDir holds files of public keys ("ed25519
	// BASE64" lines) whose bundles an import trusts, beside the daemon's
	// own. Empty: no bundles.
	BundleKeyFile  string
	TrustedKeysDir string
	// Identity authors the commits Apply makes, unless a request names one
	// (the operator's apply_name and apply_email); SetIdentity replaces it
	// while serving. A field it leaves empty is taken from the user's git
	// configuration, found through GitUser.
	Identity gitx.Identity
	// GitUser is where the user's global git configuration is; its
	// user.name and user.email (and the project's own) author an apply
	// when Identity names none.
	GitUser gitx.UserConfig
	// ExecLimits is the most any command of a run gets, and what it gets
	// unless its request asks for less: a request (an agent's, with its run
	// token, or an operator's) may only lower a limit, never raise it.
	// Zero fields take sandbox.DefaultLimits.
	ExecLimits paddock.CommandLimits
	// SessionLimits bound an agent's session (ExecRequest.Session): its
	// wall time only; its commands keep ExecLimits.
	SessionLimits SessionLimits
	// ProxyCA is the daemon's proxy authority, with which the proxy of a
	// run with credentials opens its HTTPS to their hosts to set them
	// (credentials.go); nil: HTTPS requests carry none. ProxyUpstreamRoots
	// verify those hosts (nil: the system's; a test's own).
	ProxyCA            *sandbox.ProxyCA
	ProxyUpstreamRoots *x509.CertPool
	// NetAllowAddrs are the local or private addresses an allow-list
	// network's names may reach (the operator's); no other loopback,
	// private, link-local or reserved address is ever reached.
	NetAllowAddrs []netip.Prefix
	// DiskLimits bound what runs write to the state disk (disk.go).
	DiskLimits DiskLimits
	// ChangeSetLimits bound change sets; zero fields take the defaults.
	ChangeSetLimits ChangeSetLimits
	// RunAPI, if set, serves each run its own API on a socket in its view
	// (runapi.go).
	RunAPI RunAPI
	// Cluster, when several daemons share the store as nodes (package
	// postgres), stores each run's checkpoint for an adoption by another
	// node and moves a lost node's run here (cluster.go). Nil on a daemon
	// of its own.
	Cluster paddock.Cluster
	// Webhooks are told of the notices (webhooks.go); WebhookTiming
	// paces their deliveries (zero: the defaults).
	Webhooks      []WebhookConfig
	WebhookTiming WebhookTiming
	// CrashAt, when positive, kills the process at that step of an apply
	// into a working tree or an undo. Tests use it; nothing else sets it.
	CrashAt int
	// Observer is told of each tool call and command (the daemon's
	// metrics); nil observes nothing.
	Observer Observer
	// Tracer makes the spans of tool calls, commands, verifies, applies
	// and queue landings (OpenTelemetry), each under its caller's span in
	// the call's context; nil makes none.
	Tracer trace.Tracer
	Logger *slog.Logger
}

// Manager runs the workspace lifecycle. Make one with NewManager, call
// Recover once before serving, and Close it to stop: Close is the one call
// that ends and waits for everything the Manager started. Its Config
// fields are read at each use; set them before serving.
type Manager struct {
	*kernel

	// The services, one per concern; each holds the kernel and the few
	// services it calls.
	Projects   *Projects
	Runs       *Runs
	views      *views
	Broker     *Broker
	executor   *executor
	Jobs       *Jobs
	Changes    *Changes
	Policies   *Policies
	Provenance *Provenance
	Verifier   *Verifier
	Flows      *Flows
	Reviews    *Reviews
	Queue      *Queue
	Forks      *Forks
	Bundles    *Bundles
	Nodes      *Nodes
	Stats      *Stats
	Webhooks   *Webhooks
	Calls      *Calls

	closeOnce sync.Once
	closeErr  error
}

// ErrClosed is in the chain of the error of a job or a command asked for
// once Close has begun: the Manager starts nothing after it. The error's
// code is busy, as when the sandbox pool is closed.
var ErrClosed = errors.New("lifecycle: the manager is closed")

// errClosed is the error a refused job or command gets after Close.
func errClosed() error {
	return &paddock.Error{Code: paddock.CodeBusy, Message: "the daemon is shutting down", Err: ErrClosed}
}

// NewManager makes a Manager of cfg, ready to serve. ctx's values (not its
// end) are passed on to the Manager's background work, which lasts until
// Close.
func NewManager(ctx context.Context, cfg Config) (*Manager, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("lifecycle: NewManager needs a Store")
	case cfg.Git == nil:
		return nil, errors.New("lifecycle: NewManager needs a Git")
	case cfg.WorkspacesDir == "":
		return nil, errors.New("lifecycle: NewManager needs a WorkspacesDir")
	}
	k := &kernel{Config: cfg}
	k.ctx, k.stop = context.WithCancel(context.WithoutCancel(ctx))
	k.redactors = &redactors{secret: func(name string) (string, bool) {
		if k.Secret == nil {
			return "", false
		}
		return k.Secret(name)
	}}
	m := &Manager{kernel: k}
	m.Projects = &Projects{kernel: k}
	m.Runs = &Runs{kernel: k}
	m.views = &views{kernel: k}
	m.Broker = &Broker{kernel: k}
	m.executor = &executor{kernel: k}
	m.Jobs = &Jobs{kernel: k}
	m.Changes = &Changes{kernel: k}
	m.Policies = &Policies{kernel: k}
	m.Provenance = &Provenance{kernel: k}
	m.Provenance.watches.log, m.Provenance.watches.from = k.log, watchFrom
	m.Verifier = &Verifier{kernel: k}
	m.Flows = &Flows{kernel: k}
	m.Reviews = &Reviews{kernel: k}
	m.Queue = &Queue{kernel: k}
	m.Forks = &Forks{kernel: k}
	m.Bundles = &Bundles{kernel: k}
	m.Nodes = &Nodes{kernel: k}
	m.Stats = &Stats{kernel: k}
	m.Webhooks = &Webhooks{kernel: k}
	m.Calls = &Calls{kernel: k}
	m.wire()
	m.Jobs.instanceID = newInstanceID()
	m.Calls.owner, m.Calls.life = m.Jobs.instanceID, newLifetime(k.ctx)
	m.Jobs.runner = newJobRunner(k.ctx, m.Jobs.renewLease, m.Jobs.recordJobEnd, k.log)
	m.Queue.life, m.Nodes.life, m.executor.life = newLifetime(k.ctx), newLifetime(k.ctx), newLifetime(k.ctx)
	m.Webhooks.life, m.Provenance.life = newLifetime(k.ctx), newLifetime(k.ctx)
	m.executor.quotas = newDiskQuotas(cfg.WorkspacesDir, cfg.DiskLimits.quota(), k.log)
	for _, s := range m.services() {
		if f, ok := s.(forgetter); ok {
			k.forgetters = append(k.forgetters, f.forget)
		}
	}
	k.plans = &planBook{dir: k.runDir, record: m.Broker.recordEvents}
	k.uncommitted = &uncommittedBase{git: k.Git, aux: k.auxDir, log: k.log}
	m.Webhooks.start()
	return m, nil
}

// wire gives each service the few others it calls (docs/ARCHITECTURE.md,
// "Services", draws who calls whom).
func (m *Manager) wire() {
	m.Projects.nodes = m.Nodes
	m.Runs.broker = m.Broker
	m.Runs.changes = m.Changes
	m.Runs.executor = m.executor
	m.Runs.jobs = m.Jobs
	m.Runs.nodes = m.Nodes
	m.Runs.projects = m.Projects
	m.Runs.reviews = m.Reviews
	m.Runs.views = m.views
	m.views.reviews = m.Reviews
	m.Broker.executor = m.executor
	m.Broker.flows = m.Flows
	m.Broker.forks = m.Forks
	m.Broker.provenance = m.Provenance
	m.Broker.runs = m.Runs
	m.Broker.verifier = m.Verifier
	m.Broker.views = m.views
	m.executor.broker = m.Broker
	m.executor.jobs = m.Jobs
	m.executor.views = m.views
	m.Jobs.broker = m.Broker
	m.Jobs.executor = m.executor
	m.Jobs.flows = m.Flows
	m.Jobs.nodes = m.Nodes
	m.Jobs.projects = m.Projects
	m.Jobs.runs = m.Runs
	m.Jobs.verifier = m.Verifier
	m.Jobs.views = m.views
	m.Changes.flows = m.Flows
	m.Changes.projects = m.Projects
	m.Changes.queue = m.Queue
	m.Changes.reviews = m.Reviews
	m.Changes.views = m.views
	m.Changes.policies = m.Policies
	m.Provenance.changes = m.Changes
	m.Provenance.policies = m.Policies
	m.Provenance.forks = m.Forks
	m.Provenance.nodes = m.Nodes
	m.Provenance.projects = m.Projects
	m.Provenance.reviews = m.Reviews
	m.Provenance.runs = m.Runs
	m.Verifier.broker = m.Broker
	m.Verifier.policies = m.Policies
	m.Verifier.changes = m.Changes
	m.Verifier.executor = m.executor
	m.Verifier.reviews = m.Reviews
	m.Verifier.runs = m.Runs
	m.Verifier.views = m.views
	m.Flows.changes = m.Changes
	m.Flows.jobs = m.Jobs
	m.Flows.reviews = m.Reviews
	m.Flows.runs = m.Runs
	m.Reviews.changes = m.Changes
	m.Reviews.projects = m.Projects
	m.Reviews.queue = m.Queue
	m.Reviews.runs = m.Runs
	m.Reviews.views = m.views
	m.Queue.broker = m.Broker
	m.Queue.changes = m.Changes
	m.Queue.projects = m.Projects
	m.Queue.reviews = m.Reviews
	m.Queue.runs = m.Runs
	m.Queue.verifier = m.Verifier
	m.Forks.broker = m.Broker
	m.Forks.jobs = m.Jobs
	m.Forks.runs = m.Runs
	m.Forks.views = m.views
	m.Forks.settleEffects = m.Provenance.settle
	m.Bundles.broker = m.Broker
	m.Bundles.policies = m.Policies
	m.Bundles.changes = m.Changes
	m.Bundles.runs = m.Runs
	m.Nodes.changes = m.Changes
	m.Nodes.jobs = m.Jobs
	m.Nodes.runs = m.Runs
	m.Nodes.views = m.views
	m.Stats.executor = m.executor
	m.Stats.queue = m.Queue
}

// Close stops the Manager. New jobs and commands are refused (ErrClosed);
// running jobs and commands are cancelled (their sandboxes killed), and
// Close waits for each job's goroutine to record the job's end, whatever
// ctx says: a cancelled job ends at once, and its end is recorded within
// endRetryFor. Then every active workspace is checkpointed, under ctx, so
// that a restart finds each one with a recorded state; the harnesses are
// given back (Harnesses is closed); and Close returns once the disk
// watchdogs have stopped. Calls after the first return the first's result.
func (m *Manager) Close(ctx context.Context) error {
	m.closeOnce.Do(func() { m.closeErr = m.close(ctx) })
	return m.closeErr
}

func (m *Manager) close(ctx context.Context) error {
	m.stop() // checkOpen refuses from here; every service's lifetime ends
	m.Jobs.runner.close()
	// Checkpoints before the harnesses go: an overlay run's workspace is
	// seen through its harness, which must still be there to be read.
	err := m.checkpointActive(ctx)
	if m.Harnesses != nil {
		m.Harnesses.Close()
	}
	for _, l := range m.lifetimes() {
		l.close()
	}
	// After the looks begun so far, which the lifetimes waited for; one
	// begun later (its call's answer flushed once Close had begun) runs
	// at once in its handler and walks the files, the watches closed.
	m.Provenance.watches.close()
	return err
}

// forgetter is a service that keeps something in memory about a run: it
// forgets it when the run is gone from this node (forgetRun).
type forgetter interface{ forget(id string) }

// services are the Manager's services, each once.
func (m *Manager) services() []any {
	return []any{m.Projects, m.Runs, m.views, m.Broker, m.executor, m.Jobs, m.Changes, m.Policies, m.Provenance,
		m.Verifier, m.Flows, m.Reviews, m.Queue, m.Forks, m.Bundles, m.Nodes, m.Stats, m.Webhooks, m.Calls}
}

// lifetimes are the services' own, which Close waits for: the queue's
// worker, the checkpoints due with nodes, the disk watchdogs, the
// webhooks' deliverers.
func (m *Manager) lifetimes() []*lifetime {
	return []*lifetime{m.Queue.life, m.Nodes.life, m.executor.life, m.Webhooks.life, m.Provenance.life, m.Calls.life}
}

// checkpointActive checkpoints every active workspace, so that a restart
// finds each one with a recorded state.
func (m *Manager) checkpointActive(ctx context.Context) error {
	var ws []*paddock.Workspace
	if err := m.Store.View(ctx, func(tx paddock.Tx) (err error) {
		ws, err = tx.Workspaces(ctx, paddock.StateActive)
		return err
	}); err != nil {
		return err
	}
	var errs []error
	for _, w := range ws {
		if _, err := m.Runs.checkpoint(ctx, w.RunID, "daemon shutdown", true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// live states hold the project lock for kinds that need it.
func live(s paddock.WorkspaceState) bool {
	switch s {
	case paddock.StateRequested, paddock.StatePreparing, paddock.StateReady, paddock.StateActive, paddock.StateCheckpointed:
		return true
	}
	return false
}

// needsLock reports whether a kind holds the exclusive project lock.
func needsLock(k paddock.WorkspaceKind) bool { return k == paddock.KindOperatorDir }

// newID returns a run id such as "r-k4m2q7xa".
func newID() string {
	var b [5]byte
	rand.Read(b[:])
	return "r-" + strings.ToLower(base32.StdEncoding.EncodeToString(b[:]))
}

func now() time.Time { return time.Now().UTC() }

func internal(msg string, err error) error {
	return &paddock.Error{Code: paddock.CodeInternal, Message: msg, Err: err}
}
