package paddock

import "context"

// Store is the durable state: projects, runs, workspaces, events and locks.
// SQLite is the default implementation; every implementation must pass the
// conformance suite in package storetest.
//
// All access happens inside a transaction, so that a state change and the
// event that records it commit together or not at all. Update returns only
// after the transaction is durable.
type Store interface {
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(Tx) error) error
	// Update runs fn in a read-write transaction and commits it durably if fn
	// returns nil; any error rolls everything back.
	Update(ctx context.Context, fn func(Tx) error) error
	Close() error
}

// LazyUpdater is a Store that can commit a write without waiting for
// the disk: when UpdateLazy returns, fn's changes survive the daemon's
// crash (they are in the operating system's hands) but not the machine's
// (a power loss, a kernel panic) until the next Update commits, which
// makes them durable with its own. It is for records whose loss in a
// machine's crash is what a client could see anyway, never for events:
// the idempotency keys of a single machine's store, whose clients are on
// that machine and go with it (lifecycle's Calls). UpdateLazy commits
// through Update where a store has no such method.
type LazyUpdater interface {
	UpdateLazy(ctx context.Context, fn func(Tx) error) error
}

// UpdateLazy runs fn as s's UpdateLazy if s has one, else as its Update.
func UpdateLazy(ctx context.Context, s Store, fn func(Tx) error) error {
	if l, ok := s.(LazyUpdater); ok {
		return l.UpdateLazy(ctx, fn)
	}
	return s.Update(ctx, fn)
}

// RunReader is a Store that reads a run with what a call on it needs
// (its access requests and its project, as asked) in one snapshot and
// one round trip: PostgreSQL sends the reads, and their transaction's
// BEGIN and COMMIT where there are several, at once. ReadRun reads
// through View where a store has no such method.
type RunReader interface {
	ReadRun(ctx context.Context, id string, with RunWith) (*Run, *Project, []*AccessRequest, error)
}

// RunWith says what ReadRun reads with a run.
type RunWith struct {
	Grants  bool // its access requests
	Project bool // its project
}

// ReadRun returns run id and, as with asks, its access requests and its
// project, from one snapshot of s: in one round trip where s is a
// RunReader. The project is nil if it could not be read (it is for the
// caller to read again and say why): a missing run is the only error of
// the run's own.
func ReadRun(ctx context.Context, s Store, id string, with RunWith) (r *Run, p *Project, grants []*AccessRequest, err error) {
	if rr, ok := s.(RunReader); ok {
		return rr.ReadRun(ctx, id, with)
	}
	err = s.View(ctx, func(tx Tx) error {
		if r, err = tx.Run(ctx, id); err != nil {
			return err
		}
		if with.Grants {
			if grants, err = tx.AccessRequests().List(ctx, id); err != nil {
				return err
			}
		}
		if with.Project && r.Project != "" {
			if p, err = tx.Project(ctx, r.Project); err != nil {
				p = nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return r, p, grants, nil
}

// EventDraft is an event to append: its type, and its data, which the
// store encodes as JSON.
type EventDraft struct {
	Type string
	Data any
}

// EventAppender is a Store that appends events to a run in one
// transaction in fewer round trips or statements than Update with one
// AppendEvent each: PostgreSQL sends its BEGIN, the node's fence and the
// inserts at once, then the COMMIT (two round trips); SQLite takes their
// seqs in one statement. AppendEvents appends through Update where a
// store has no such method. Its errors say what Update's would: one
// before the COMMIT means nothing was written.
type EventAppender interface {
	AppendEvents(ctx context.Context, runID string, evs []EventDraft) ([]*Event, error)
}

// AppendEvents appends evs to run runID, in order, in one transaction of
// s, and returns them as stored: in two round trips where s is an
// EventAppender.
func AppendEvents(ctx context.Context, s Store, runID string, evs []EventDraft) ([]*Event, error) {
	if a, ok := s.(EventAppender); ok {
		return a.AppendEvents(ctx, runID, evs)
	}
	var out []*Event
	err := s.Update(ctx, func(tx Tx) (err error) {
		out, err = AppendEventsIn(ctx, tx, runID, evs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AppendEventsIn appends evs to run runID, in order, in tx.
func AppendEventsIn(ctx context.Context, tx Tx, runID string, evs []EventDraft) ([]*Event, error) {
	out := make([]*Event, 0, len(evs))
	for _, d := range evs {
		e, err := tx.AppendEvent(ctx, runID, d.Type, d.Data)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// RunFilter selects runs.
type RunFilter struct {
	Project string // only this project's runs, if set
	Removed bool   // include runs removed with `paddock rm`
}

// Tx is one transaction on a Store. Not-found lookups return an *Error with
// CodeNotFound; a duplicate create returns CodeConflict.
type Tx interface {
	CreateProject(ctx context.Context, p *Project) error
	Project(ctx context.Context, name string) (*Project, error)
	Projects(ctx context.Context) ([]*Project, error)
	// UpdateProject writes a project's settings (its protected paths,
	// allowed attribution rules, caches, checks and approval policy); its
	// name, root and fingerprint stay.
	UpdateProject(ctx context.Context, p *Project) error
	DeleteProject(ctx context.Context, name string) error

	// CreateRun inserts the run and, if set, its workspace.
	CreateRun(ctx context.Context, r *Run) error
	// Run returns the run with its workspace.
	Run(ctx context.Context, id string) (*Run, error)
	Runs(ctx context.Context, f RunFilter) ([]*Run, error)
	// MarkRunRemoved sets the run's RemovedAt.
	MarkRunRemoved(ctx context.Context, id string) error
	// SetRunToken records the hash of a run's bearer token.
	SetRunToken(ctx context.Context, id, tokenHash string) error
	// RunByToken returns the id of the run whose token has this hash.
	RunByToken(ctx context.Context, tokenHash string) (string, error)

	UpdateWorkspace(ctx context.Context, w *Workspace) error
	// Workspaces returns the workspaces in any of the given states (all if none).
	Workspaces(ctx context.Context, states ...WorkspaceState) ([]*Workspace, error)

	// AppendEvent records an event with the run's next seq. data is encoded as JSON.
	AppendEvent(ctx context.Context, runID, typ string, data any) (*Event, error)
	// Events returns up to limit events of the run with seq > after, in order.
	Events(ctx context.Context, runID string, after int64, limit int) ([]*Event, error)
	// Notices returns up to limit notices with id > after, in order, each
	// with its event's data and its run's project. AppendEvent of a
	// notable event (NoticeOf) adds its notice in the same transaction;
	// notice ids become visible in increasing order (a reader never sees
	// a notice after a later one), across nodes too.
	Notices(ctx context.Context, after int64, limit int) ([]*Notice, error)
	// Webhooks is the webhooks' delivery state, in this transaction.
	Webhooks() Webhooks

	// CreateJob inserts a running job; CodeBusy if the run has one running.
	CreateJob(ctx context.Context, j *Job) error
	// Job returns one job.
	Job(ctx context.Context, id string) (*Job, error)
	// Jobs returns a run's jobs, oldest first, or with run "" every job in
	// state (all states if "").
	Jobs(ctx context.Context, run string, state JobState) ([]*Job, error)
	// UpdateJob writes a job's state, lease, end, exit code and reason.
	UpdateJob(ctx context.Context, j *Job) error

	// Lock returns the project's lock, or nil when it is free.
	Lock(ctx context.Context, project string) (*Lock, error)
	// AcquireLock takes the project lock for l.RunID; CodeBusy if another run holds it.
	AcquireLock(ctx context.Context, l *Lock) error
	// ReleaseLock frees the lock if runID holds it, and reports whether it did.
	ReleaseLock(ctx context.Context, project, runID string) (bool, error)

	// PutAgent stores a definition under its name, replacing one there.
	PutAgent(ctx context.Context, a *AgentRecord) error
	// Agent returns a stored definition; CodeNotFound if there is none.
	Agent(ctx context.Context, name string) (*AgentRecord, error)
	// Agents returns the stored definitions, by name.
	Agents(ctx context.Context) ([]*AgentRecord, error)
	// DeleteAgent removes a stored definition (runs keep their copies).
	DeleteAgent(ctx context.Context, name string) error

	// AccessRequests is the runs' access requests, in this transaction.
	AccessRequests() AccessRequestStore

	// CreateFlow records a new flow (its Version 1).
	CreateFlow(ctx context.Context, f *Flow) error
	// Flow returns a flow by id.
	Flow(ctx context.Context, id string) (*Flow, error)
	// Flows lists the flows of a project (all, if project is empty),
	// oldest first.
	Flows(ctx context.Context, project string) ([]*Flow, error)
	// Principals is the principals and their tokens, in this transaction.
	Principals() PrincipalStore
	// CallKeys is the records of calls made with idempotency keys.
	CallKeys() CallKeys

	// UpdateFlow writes f, whose Version the caller raised by one from the
	// version it read; if another write came between, it is a conflict.
	UpdateFlow(ctx context.Context, f *Flow) error
}

// WorkspaceProvider makes and removes workspaces of one kind. The lifecycle
// manager calls it; it never changes the workspace's record.
type WorkspaceProvider interface {
	Kind() WorkspaceKind
	// Prepare makes w.Root at w.BaseRevision. On failure it leaves nothing behind.
	Prepare(ctx context.Context, p *Project, w *Workspace) error
	// Remove undoes everything Prepare did, and is safe to repeat. It is only
	// ever called for a workspace in state cleanup_pending.
	Remove(ctx context.Context, p *Project, w *Workspace) error
	// Present reports whether the workspace is still on disk.
	Present(ctx context.Context, w *Workspace) (bool, error)
}

// AccessRequestStore is the runs' access requests in a transaction
// (Tx.AccessRequests).
type AccessRequestStore interface {
	// Create records a run's access request; CodeNotFound for no such
	// run, CodeConflict for a request id the run has.
	Create(ctx context.Context, r *AccessRequest) error
	// List returns a run's access requests, oldest first.
	List(ctx context.Context, runID string) ([]*AccessRequest, error)
	// Update writes a request's state and decision; CodeNotFound if the
	// run has no such request.
	Update(ctx context.Context, r *AccessRequest) error
}

// PrincipalStore is the principals and their tokens in a transaction
// (Tx.Principals). Not-found lookups are CodeNotFound; a taken name or
// uid is CodeConflict.
type PrincipalStore interface {
	// CreatePrincipal inserts p; a taken name, or a uid another principal
	// has, is a conflict.
	CreatePrincipal(ctx context.Context, p *Principal) error
	// Principal returns a principal by name.
	Principal(ctx context.Context, name string) (*Principal, error)
	// PrincipalByUID returns the principal a local uid maps to.
	PrincipalByUID(ctx context.Context, uid int) (*Principal, error)
	// List lists the principals, by name.
	List(ctx context.Context) ([]*Principal, error)
	// UpdatePrincipal writes p's kind, role, projects and uid.
	UpdatePrincipal(ctx context.Context, p *Principal) error
	// DeletePrincipal removes a principal and every token of it.
	DeletePrincipal(ctx context.Context, name string) error
	// CreateToken inserts t (its hash, never the token).
	CreateToken(ctx context.Context, t *Token) error
	// Token returns a token by id.
	Token(ctx context.Context, id string) (*Token, error)
	// Tokens lists a principal's tokens (every token if ""), oldest first.
	Tokens(ctx context.Context, principal string) ([]*Token, error)
	// UpdateToken writes t's revocation and last use.
	UpdateToken(ctx context.Context, t *Token) error
}
