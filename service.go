package paddock

import (
	"context"
	"encoding/json"
	"io"
)

// Service is paddock's protocol on runs and projects, as both sides of the
// API speak it: lifecycle.Manager serves it in the daemon, client.Client
// calls it over /v1, and httpapi serves it from whichever it is given. What
// only the daemon can decide (who the caller is, its limits, a run's
// secrets and tokens) is not here: httpapi's interfaces add it.
type Service interface {
	AddProject(ctx context.Context, req AddProjectRequest) (*Project, error)
	Projects(ctx context.Context) ([]*Project, error)
	Project(ctx context.Context, name string) (*Project, error)
	RemoveProject(ctx context.Context, name string) error

	Create(ctx context.Context, req CreateRunRequest) (*Run, error)
	Bootstrap(ctx context.Context, req BootstrapRequest) (*BootstrapResult, error)
	Runs(ctx context.Context, f RunFilter) ([]*Run, error)
	Run(ctx context.Context, id string) (*Run, error)
	Retain(ctx context.Context, id string) (*Run, error)
	// Review makes (or finds, by hash) the review run of a run's submitted
	// change set, with the agent definition named (the built-in reviewer
	// if empty).
	Review(ctx context.Context, id, agent string) (*Run, error)
	// Fork freezes an overlay run's files into a layer and makes runs
	// stacked on it, each with an empty layer of its own; the run goes
	// on over the same frozen layer.
	Fork(ctx context.Context, id string, req ForkRequest) (*ForkResult, error)

	// StartFlow starts a workflow's flow on a project, for a task.
	StartFlow(ctx context.Context, req StartFlowRequest) (*Flow, error)
	// Flows lists a project's flows (all, if project is empty).
	Flows(ctx context.Context, project string) ([]*Flow, error)
	Flow(ctx context.Context, id string) (*Flow, error)
	// PickEvent takes an event from a run's menu (its flow's current
	// state's transitions); anything else is refused.
	PickEvent(ctx context.Context, id, event string, req MenuEventRequest) (*Flow, error)
	Reject(ctx context.Context, id string) (*Run, error)
	Remove(ctx context.Context, id string) (*Run, error)
	Checkpoint(ctx context.Context, id, reason string) (*Run, error)
	Resume(ctx context.Context, id string) (*ResumeResult, error)
	Artifact(ctx context.Context, id, kind string) (*Artifact, error)

	// Events returns up to limit events of a run after seq after (limit 0:
	// the store's default).
	Events(ctx context.Context, id string, after int64, limit int) ([]*Event, error)
	// WaitEvents is Events, but when there are none yet it waits for the
	// next until ctx ends, then returns what there is (possibly nothing).
	WaitEvents(ctx context.Context, id string, after int64, limit int) ([]*Event, error)

	// Exec runs a command in a run's workspace, confined.
	Exec(ctx context.Context, id string, req ExecRequest) (*ExecResult, error)
	// ExecStream is Exec writing the command's output to stdout and stderr
	// as it comes; its result holds no output of its own.
	ExecStream(ctx context.Context, id string, req ExecRequest, stdout, stderr io.Writer) (*ExecResult, error)
	// ExecAttach is ExecStream with its input streamed too, and, when
	// req asks for a terminal, the terminal's resizes.
	ExecAttach(ctx context.Context, id string, req ExecRequest, streams ExecIO) (*ExecResult, error)

	StartJob(ctx context.Context, id string, req StartJobRequest) (*Job, error)
	Jobs(ctx context.Context, id string) ([]*Job, error)
	JobStatus(ctx context.Context, id string) (*JobStatus, error)
	Job(ctx context.Context, id, job string) (*Job, error)
	CancelJob(ctx context.Context, id, job string) (*Job, error)

	ChangeSet(ctx context.Context, id string) (*ChangeSet, error)
	// ChangeSetDiff opens the whole (masked) diff of a run's change set:
	// the one with hash, or with no hash the change set as it is now. It
	// returns the change set's hash; the caller closes the reader.
	ChangeSetDiff(ctx context.Context, id, hash string) (io.ReadCloser, string, error)
	Submit(ctx context.Context, id string) (*ChangeSet, error)
	// SubmitExpecting is Submit only if the change set's hash is still
	// expect (none: any).
	SubmitExpecting(ctx context.Context, id, expect string) (*ChangeSet, error)
	Undo(ctx context.Context, id string) (*Submission, error)

	GC(ctx context.Context, dryRun bool) ([]Finding, error)

	// AddAgent stores an agent definition read from TOML, replacing one of
	// its name; Agents lists the built-in and stored ones.
	AddAgent(ctx context.Context, req AddAgentRequest) (*AgentRecord, error)
	Agents(ctx context.Context) ([]*AgentRecord, error)
	Agent(ctx context.Context, name string) (*AgentRecord, error)
	RemoveAgent(ctx context.Context, name string) error

	// Capabilities says what a run may do now (the capabilities tool).
	Capabilities(ctx context.Context, id string) (*Capabilities, error)
	// RequestAccess files an agent's request for more (request_access);
	// AccessRequests lists a run's requests.
	RequestAccess(ctx context.Context, id string, in AccessRequestInput) (*AccessRequest, error)
	AccessRequests(ctx context.Context, id string) ([]*AccessRequest, error)
	// ProjectManifest is what verify runs in a new run of the project:
	// the capability manifest detected at HEAD, the operator's overrides
	// and the checks that result (a JSON object).
	ProjectManifest(ctx context.Context, name string) (json.RawMessage, error)
	// ProjectCheckout says what the project's checkout holds beyond its
	// commits (the uncommitted changes a new run does not start with), as
	// the node asked reads it.
	ProjectCheckout(ctx context.Context, name string) (*CheckoutStatus, error)
	// Verify runs the project manifest's checks in the run (verify).
	Verify(ctx context.Context, id string, req VerifyRequest) (*VerifyResult, error)
}
