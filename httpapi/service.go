package httpapi

import (
	"context"
	"encoding/json"
	"io"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/tools"
)

// The API serves the daemon's services, one interface per concern, each
// holding only the calls its routes make (Server has a field for each).
// The daemon gives every field its lifecycle.Manager's service of that
// concern; a test gives only the fakes of the concerns it calls. Each is
// a slice of paddock.Service (the protocol client.Client speaks too) and
// of what only the daemon decides: who the caller is (the by arguments,
// named by the connection's actor, never by the request), its limits, a
// run's secrets and tokens. Run and Project are every service's, so an
// interface that needs one holds it too.

// Projects are the projects and the agent definitions they run.
type Projects interface {
	AddProject(ctx context.Context, req paddock.AddProjectRequest) (*paddock.Project, error)
	Projects(ctx context.Context) ([]*paddock.Project, error)
	Project(ctx context.Context, name string) (*paddock.Project, error)
	SetProject(ctx context.Context, name, by string, req paddock.SetProjectRequest) (*paddock.Project, error)
	RemoveProject(ctx context.Context, name string) error
	Unlock(ctx context.Context, name, by string, force bool) (*paddock.Lock, error)
	// ProjectCheckout says what the project's checkout holds beyond its
	// commits.
	ProjectCheckout(ctx context.Context, name string) (*paddock.CheckoutStatus, error)

	AddAgent(ctx context.Context, req paddock.AddAgentRequest) (*paddock.AgentRecord, error)
	Agents(ctx context.Context) ([]*paddock.AgentRecord, error)
	Agent(ctx context.Context, name string) (*paddock.AgentRecord, error)
	RemoveAgent(ctx context.Context, name string) error
}

// Runs are the runs' lives and their event logs.
type Runs interface {
	Create(ctx context.Context, req paddock.CreateRunRequest) (*paddock.Run, error)
	Runs(ctx context.Context, f paddock.RunFilter) ([]*paddock.Run, error)
	Run(ctx context.Context, id string) (*paddock.Run, error)
	Retain(ctx context.Context, id string) (*paddock.Run, error)
	Reject(ctx context.Context, id string) (*paddock.Run, error)
	Remove(ctx context.Context, id string) (*paddock.Run, error)
	Checkpoint(ctx context.Context, id, reason string) (*paddock.Run, error)
	Resume(ctx context.Context, id string) (*paddock.ResumeResult, error)
	// Events and WaitEvents read a run's events after seq after (see
	// paddock.Service); the event stream waits with WaitEvents.
	Events(ctx context.Context, id string, after int64, limit int) ([]*paddock.Event, error)
	WaitEvents(ctx context.Context, id string, after int64, limit int) ([]*paddock.Event, error)
}

// Jobs are a bootstrapped run's agent side: its bootstrap, its token and
// artifacts, and the jobs it starts.
type Jobs interface {
	Bootstrap(ctx context.Context, req paddock.BootstrapRequest) (*paddock.BootstrapResult, error)
	// RunForToken names the run a run token was issued for: the guard
	// admits a call made with it as that run's agent.
	RunForToken(ctx context.Context, token string) (string, error)
	Artifact(ctx context.Context, id, kind string) (*paddock.Artifact, error)
	StartJob(ctx context.Context, id string, req paddock.StartJobRequest) (*paddock.Job, error)
	Jobs(ctx context.Context, id string) ([]*paddock.Job, error)
	JobStatus(ctx context.Context, id string) (*paddock.JobStatus, error)
	Job(ctx context.Context, id, job string) (*paddock.Job, error)
	CancelJob(ctx context.Context, id, job string) (*paddock.Job, error)
}

// Broker is what a run may do and how its answers are masked: commands,
// working tools, its inbox, its capabilities and access requests, and its
// redactor (the funnel every answer about a run passes).
type Broker interface {
	// Run is the broker's look at a run (the MCP route's: the run must
	// exist before its server is reached).
	Run(ctx context.Context, id string) (*paddock.Run, error)

	Exec(ctx context.Context, id string, req paddock.ExecRequest) (*paddock.ExecResult, error)
	ExecStream(ctx context.Context, id string, req paddock.ExecRequest, stdout, stderr io.Writer) (*paddock.ExecResult, error)
	ExecAttach(ctx context.Context, id string, req paddock.ExecRequest, streams paddock.ExecIO) (*paddock.ExecResult, error)

	// Tools lists the working tools a run is offered; CallTool runs one
	// with its arguments (one JSON object, read strictly already).
	Tools(ctx context.Context, id string) ([]*tools.Tool, error)
	CallTool(ctx context.Context, id, name string, args json.RawMessage) (any, error)
	// Deliver writes body into a run's inbox, within the daemon's limits.
	Deliver(ctx context.Context, id, name string, body io.Reader, lim tools.InboxLimits) (*paddock.InboxResult, error)

	Capabilities(ctx context.Context, id string) (*paddock.Capabilities, error)
	RequestAccess(ctx context.Context, id string, in paddock.AccessRequestInput) (*paddock.AccessRequest, error)
	AccessRequests(ctx context.Context, id string) ([]*paddock.AccessRequest, error)
	// DecideAccess grants or denies a run's pending access request: only
	// an operator's route reaches it (a run token never grants).
	DecideAccess(ctx context.Context, id, reqID string, grant bool, by, note string) (*paddock.AccessRequest, error)

	// Redactor masks a run's declared secrets (and credential shapes).
	Redactor(ctx context.Context, id string) (*redact.Redactor, error)
}

// Changes are a run's change set, from its diff to its submission,
// approval, application and undoing.
type Changes interface {
	ChangeSet(ctx context.Context, id string) (*paddock.ChangeSet, error)
	// ChangeSetDiff opens the whole (masked) diff of a run's change set;
	// the caller closes it.
	ChangeSetDiff(ctx context.Context, id, hash string) (io.ReadCloser, string, error)
	// SubmitExpecting submits only if the change set's hash is still
	// expect (none: any).
	SubmitExpecting(ctx context.Context, id, expect string) (*paddock.ChangeSet, error)
	Approve(ctx context.Context, id, hash, by string) (*paddock.Submission, error)
	// Apply commits the approved change set to a new branch, as who.
	Apply(ctx context.Context, id, branch string, who gitx.Identity) (*paddock.Submission, error)
	// ApplyToWorktree writes the approved change set into the project's
	// working tree.
	ApplyToWorktree(ctx context.Context, id string, threeWay bool) (*paddock.Submission, error)
	Undo(ctx context.Context, id string) (*paddock.Submission, error)
}

// Provenance is which calls wrote which hunks of a change set.
type Provenance interface {
	// ApproveHunks approves only some hunks of the submitted change set
	// hash; Blame says which calls wrote each hunk.
	ApproveHunks(ctx context.Context, id, hash string, hunks []int, by string) (*paddock.Submission, error)
	Blame(ctx context.Context, id, hash string) (*paddock.Blame, error)
}

// Verifier runs a project's checks in a run.
type Verifier interface {
	Verify(ctx context.Context, id string, req paddock.VerifyRequest) (*paddock.VerifyResult, error)
	// ProjectManifest is what verify runs in a new run of the project.
	ProjectManifest(ctx context.Context, name string) (json.RawMessage, error)
}

// Reviews makes a submitted change set's review run.
type Reviews interface {
	Review(ctx context.Context, id, agent string) (*paddock.Run, error)
}

// Forks makes runs stacked on a run's frozen files.
type Forks interface {
	Fork(ctx context.Context, id string, req paddock.ForkRequest) (*paddock.ForkResult, error)
}

// Flows are workflows' flows and the runs' menus of their events.
type Flows interface {
	StartFlow(ctx context.Context, req paddock.StartFlowRequest) (*paddock.Flow, error)
	Flows(ctx context.Context, project string) ([]*paddock.Flow, error)
	Flow(ctx context.Context, id string) (*paddock.Flow, error)
	PickEvent(ctx context.Context, id, event string, req paddock.MenuEventRequest) (*paddock.Flow, error)
}

// Queue is the merge queue: QueueAdd puts an approved run in it, Queue
// lists it (of a project, finished entries too if all), QueueEntry is a
// run's newest entry, QueueRemove takes one out, QueueUndo moves the
// branch a landed one moved back.
type Queue interface {
	QueueAdd(ctx context.Context, id string, req paddock.QueueAddRequest, by string) (*paddock.QueueEntry, error)
	Queue(ctx context.Context, project string, all bool) ([]*paddock.QueueEntry, error)
	QueueEntry(ctx context.Context, id string) (*paddock.QueueEntry, error)
	QueueRemove(ctx context.Context, id, by string) (*paddock.QueueEntry, error)
	QueueUndo(ctx context.Context, id, by string) (*paddock.QueueEntry, error)
}

// Bundles carry a run's change set between daemons: Bundle writes a
// run's submitted change set as a signed bundle, BundleKey is the public
// key it is signed with, Import restores a run from a bundle read from
// body (see package bundle).
type Bundles interface {
	// Run is the bundles' look at a run: a missing one is an error
	// envelope, before any byte of a bundle.
	Run(ctx context.Context, id string) (*paddock.Run, error)
	Bundle(ctx context.Context, id string, w io.Writer) error
	BundleKey(ctx context.Context) (*paddock.BundleKey, error)
	Import(ctx context.Context, req paddock.ImportRequest, body io.Reader) (*paddock.ImportResult, error)
}

// Collector is the daemon's garbage collection: GC finds what the records
// and the disk disagree about and, unless dryRun, cleans it.
type Collector interface {
	GC(ctx context.Context, dryRun bool) ([]paddock.Finding, error)
}
