package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Tx is one transaction; see paddock.Tx.
type Tx struct {
	tx *sql.Tx
	// shared marks a write transaction that a batch of Updates shares. Its
	// statements run detached from their caller's cancellation: the driver
	// answers a cancelled context by interrupting SQLite, and an interrupted
	// write makes SQLite roll back the whole transaction, the other callers'
	// savepoints with it. A caller that gives up is answered after its fn
	// returns (see Store.commit), and its savepoint alone is rolled back.
	shared bool
	stmts  *statements // kept prepared (nil: none)
}

// ctx is the context a statement runs under: the caller's own for a read,
// the caller's values without its cancellation in a shared write.
func (t *Tx) ctx(ctx context.Context) context.Context {
	if t.shared {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

var _ paddock.Tx = (*Tx)(nil)

// timeFormat writes every time with nine fractional digits: times are
// compared as text (ORDER BY created_at), and RFC3339Nano drops trailing
// zeros, which sorts .1 after .12 within a second. Any RFC 3339 time
// parses, those written before included.
const timeFormat = time.RFC3339Nano

const writeFormat = "2006-01-02T15:04:05.000000000Z07:00"

func fmtTime(t time.Time) string { return t.UTC().Format(writeFormat) }

func fmtOptTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return fmtTime(t)
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(timeFormat, s)
	return t
}

func parseOptTime(s sql.NullString) time.Time {
	if !s.Valid {
		return time.Time{}
	}
	return parseTime(s.String)
}

func isUnique(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code()
		return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

func wrap(op string, err error) error {
	return fmt.Errorf("sqlite: %s: %w", op, err)
}

// CreateProject inserts p; a taken name or root is a conflict.
func (t *Tx) CreateProject(ctx context.Context, p *paddock.Project) error {
	prot, allow, caches, checks, policy, err := encodeSettings(p)
	if err != nil {
		return err
	}
	_, err = t.exec(ctx, `INSERT INTO projects (name, root, fingerprint, created_at, protected, attribution_allow, caches, checks, approval_policy)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.Name, p.Root, p.Fingerprint, fmtTime(p.CreatedAt), prot, allow, caches, checks, policy)
	if isUnique(err) {
		var other string
		if t.queryRow(ctx, `SELECT name FROM projects WHERE root = ?`, p.Root).Scan(&other) == nil {
			return paddock.Errorf(paddock.CodeConflict, "this root is already declared as project %q", other)
		}
		return paddock.Errorf(paddock.CodeConflict, "a project named %q already exists", p.Name)
	}
	if err != nil {
		return wrap("create project", err)
	}
	return nil
}

const projectCols = `p.name, p.root, p.fingerprint, p.created_at, p.protected, p.attribution_allow, p.caches, p.checks, p.approval_policy, l.run_id, l.acquired_at`
const projectFrom = `projects p LEFT JOIN locks l ON l.project = p.name`

func scanProject(row interface{ Scan(...any) error }) (*paddock.Project, error) {
	var p paddock.Project
	var created string
	var prot, allow, caches, checks, policy, lockRun, lockAt sql.NullString
	if err := row.Scan(&p.Name, &p.Root, &p.Fingerprint, &created, &prot, &allow, &caches, &checks, &policy, &lockRun, &lockAt); err != nil {
		return nil, err
	}
	if policy.Valid {
		p.Policy = new(paddock.ApprovalPolicy)
		if err := json.Unmarshal([]byte(policy.String), p.Policy); err != nil {
			return nil, fmt.Errorf("approval policy of %s: %w", p.Name, err)
		}
	}
	if checks.Valid {
		if err := json.Unmarshal([]byte(checks.String), &p.Checks); err != nil {
			return nil, fmt.Errorf("checks of %s: %w", p.Name, err)
		}
	}
	if caches.Valid {
		if err := json.Unmarshal([]byte(caches.String), &p.Caches); err != nil {
			return nil, fmt.Errorf("caches of %s: %w", p.Name, err)
		}
	}
	if allow.Valid {
		if err := json.Unmarshal([]byte(allow.String), &p.AttributionAllow); err != nil {
			return nil, fmt.Errorf("attribution rules of %s: %w", p.Name, err)
		}
	}
	p.CreatedAt = parseTime(created)
	if prot.Valid {
		if err := json.Unmarshal([]byte(prot.String), &p.Protected); err != nil {
			return nil, fmt.Errorf("protected paths of %s: %w", p.Name, err)
		}
	}
	if lockRun.Valid {
		p.Lock = &paddock.Lock{Project: p.Name, RunID: lockRun.String, AcquiredAt: parseTime(lockAt.String)}
	}
	return &p, nil
}

// Project returns the named project.
func (t *Tx) Project(ctx context.Context, name string) (*paddock.Project, error) {
	p, err := scanProject(t.queryRow(ctx, `SELECT `+projectCols+` FROM `+projectFrom+` WHERE p.name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no project named %q", name)
	}
	if err != nil {
		return nil, wrap("get project", err)
	}
	return p, nil
}

// Projects returns every project by name.
func (t *Tx) Projects(ctx context.Context) ([]*paddock.Project, error) {
	rows, err := t.query(ctx, `SELECT `+projectCols+` FROM `+projectFrom+` ORDER BY p.name`)
	if err != nil {
		return nil, wrap("list projects", err)
	}
	defer rows.Close()
	var out []*paddock.Project
	for rows.Next() {
		p, err := scanProject(rows)
		if err != nil {
			return nil, wrap("list projects", err)
		}
		out = append(out, p)
	}
	return out, wrap2("list projects", rows.Err())
}

func wrap2(op string, err error) error {
	if err == nil {
		return nil
	}
	return wrap(op, err)
}

// UpdateProject writes the project's settings.
func (t *Tx) UpdateProject(ctx context.Context, p *paddock.Project) error {
	prot, allow, caches, checks, policy, err := encodeSettings(p)
	if err != nil {
		return err
	}
	res, err := t.exec(ctx, `UPDATE projects SET protected = ?, attribution_allow = ?, caches = ?, checks = ?, approval_policy = ? WHERE name = ?`,
		prot, allow, caches, checks, policy, p.Name)
	if err != nil {
		return wrap("update project", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no project named %q", p.Name)
	}
	return nil
}

// DeleteProject deletes the project with its runs, workspaces records, events and lock.
func (t *Tx) DeleteProject(ctx context.Context, name string) error {
	res, err := t.exec(ctx, `DELETE FROM projects WHERE name = ?`, name)
	if err != nil {
		return wrap("delete project", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no project named %q", name)
	}
	return nil
}

// CreateRun inserts r and its workspace.
func (t *Tx) CreateRun(ctx context.Context, r *paddock.Run) error {
	access := r.Access
	if access == "" {
		access = paddock.AccessWrite
	}
	secrets, err := encodeProtected(r.Secrets)
	if err != nil {
		return err
	}
	var agent any
	if r.Agent != nil {
		b, err := json.Marshal(r.Agent)
		if err != nil {
			return wrap("encode agent", err)
		}
		agent = string(b)
	}
	review, err := encodeReview(r.ReviewOf)
	if err != nil {
		return err
	}
	_, err = t.exec(ctx, `INSERT INTO runs (id, project, access, secrets, include_ignored, created_at, removed_at, last_seq, agent, agent_hash, review_of) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)`,
		r.ID, r.Project, string(access), secrets, r.IncludeIgnored, fmtTime(r.CreatedAt), fmtOptTime(r.RemovedAt), agent, r.AgentHash, review)
	if isUnique(err) {
		return paddock.Errorf(paddock.CodeConflict, "a run with id %q already exists", r.ID)
	}
	if err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
			return paddock.Errorf(paddock.CodeNotFound, "no project named %q", r.Project)
		}
		return wrap("create run", err)
	}
	r.LastSeq = 0
	if w := r.Workspace; w != nil {
		cp, err := encodeCheckpoint(w.Checkpoint)
		if err != nil {
			return err
		}
		_, err = t.exec(ctx, `INSERT INTO workspaces (id, run_id, kind, root, fingerprint, base_ref, base_revision, branch,
			state, cleanup_policy, reason, created_at, updated_at, retained_at, checkpoint) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			w.ID, r.ID, string(w.Kind), w.Root, w.Fingerprint, w.BaseRef, w.BaseRevision, w.Branch,
			string(w.State), string(w.CleanupPolicy), w.Reason, fmtTime(w.CreatedAt), fmtTime(w.UpdatedAt),
			fmtOptTime(w.RetainedAt), cp)
		if isUnique(err) {
			return paddock.Errorf(paddock.CodeConflict, "a workspace with id %q already exists", w.ID)
		}
		if err != nil {
			return wrap("create workspace", err)
		}
	}
	return nil
}

// encodeProtected stores a list as JSON; nil stays NULL.
func encodeProtected(p []string) (any, error) {
	if p == nil {
		return nil, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, wrap("encode list", err)
	}
	return string(b), nil
}

// encodeReview stores what a review run reviews as JSON; nil stays NULL.
func encodeReview(v *paddock.ReviewOf) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, wrap("encode review", err)
	}
	return string(b), nil
}

func encodeCheckpoint(c *paddock.Checkpoint) (any, error) {
	if c == nil {
		return nil, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, wrap("encode checkpoint", err)
	}
	return string(b), nil
}

const runCols = `r.id, r.project, r.access, r.secrets, r.include_ignored, r.created_at, r.removed_at, r.last_seq, r.agent, r.agent_hash, r.review_of,
	w.id, w.kind, w.root, w.fingerprint, w.base_ref, w.base_revision, w.branch, w.state, w.cleanup_policy,
	w.reason, w.created_at, w.updated_at, w.retained_at, w.checkpoint`
const runFrom = `runs r LEFT JOIN workspaces w ON w.run_id = r.id`

func scanRun(row interface{ Scan(...any) error }) (*paddock.Run, error) {
	var r paddock.Run
	var created string
	var removed, secrets, agent, review sql.NullString
	var wid, kind, root, fp, baseRef, baseRev, branch, state, policy, reason, wcreated, wupdated sql.NullString
	var retained, checkpoint sql.NullString
	if err := row.Scan(&r.ID, &r.Project, &r.Access, &secrets, &r.IncludeIgnored, &created, &removed, &r.LastSeq, &agent, &r.AgentHash, &review,
		&wid, &kind, &root, &fp, &baseRef, &baseRev, &branch, &state, &policy,
		&reason, &wcreated, &wupdated, &retained, &checkpoint); err != nil {
		return nil, err
	}
	r.CreatedAt = parseTime(created)
	r.RemovedAt = parseOptTime(removed)
	if secrets.Valid {
		if err := json.Unmarshal([]byte(secrets.String), &r.Secrets); err != nil {
			return nil, fmt.Errorf("secrets of run %s: %w", r.ID, err)
		}
	}
	if agent.Valid {
		r.Agent = new(paddock.AgentDefinition)
		if err := json.Unmarshal([]byte(agent.String), r.Agent); err != nil {
			return nil, fmt.Errorf("agent of run %s: %w", r.ID, err)
		}
	}
	if review.Valid {
		r.ReviewOf = new(paddock.ReviewOf)
		if err := json.Unmarshal([]byte(review.String), r.ReviewOf); err != nil {
			return nil, fmt.Errorf("review of run %s: %w", r.ID, err)
		}
	}
	if wid.Valid {
		w := &paddock.Workspace{
			ID: wid.String, RunID: r.ID, Kind: paddock.WorkspaceKind(kind.String), Root: root.String,
			Fingerprint: fp.String, BaseRef: baseRef.String, BaseRevision: baseRev.String, Branch: branch.String,
			State: paddock.WorkspaceState(state.String), CleanupPolicy: paddock.CleanupPolicy(policy.String),
			Reason: reason.String, CreatedAt: parseTime(wcreated.String), UpdatedAt: parseTime(wupdated.String),
			RetainedAt: parseOptTime(retained),
		}
		if checkpoint.Valid {
			w.Checkpoint = new(paddock.Checkpoint)
			if err := json.Unmarshal([]byte(checkpoint.String), w.Checkpoint); err != nil {
				return nil, fmt.Errorf("checkpoint of run %s: %w", r.ID, err)
			}
		}
		r.Workspace = w
	}
	return &r, nil
}

// Run returns the run with its workspace.
func (t *Tx) Run(ctx context.Context, id string) (*paddock.Run, error) {
	r, err := scanRun(t.queryRow(ctx, `SELECT `+runCols+` FROM `+runFrom+` WHERE r.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no run %q", id)
	}
	if err != nil {
		return nil, wrap("get run", err)
	}
	return r, nil
}

// Runs returns the runs f selects, oldest first.
func (t *Tx) Runs(ctx context.Context, f paddock.RunFilter) ([]*paddock.Run, error) {
	var where []string
	var args []any
	if f.Project != "" {
		where = append(where, "r.project = ?")
		args = append(args, f.Project)
	}
	if !f.Removed {
		where = append(where, "r.removed_at IS NULL")
	}
	q := `SELECT ` + runCols + ` FROM ` + runFrom
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY r.created_at, r.id"
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return nil, wrap("list runs", err)
	}
	defer rows.Close()
	var out []*paddock.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, wrap("list runs", err)
		}
		out = append(out, r)
	}
	return out, wrap2("list runs", rows.Err())
}

// MarkRunRemoved sets the run's removed_at.
func (t *Tx) MarkRunRemoved(ctx context.Context, id string) error {
	res, err := t.exec(ctx, `UPDATE runs SET removed_at = ? WHERE id = ?`, fmtTime(time.Now()), id)
	if err != nil {
		return wrap("remove run", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no run %q", id)
	}
	return nil
}

// UpdateWorkspace writes every mutable field of w.
func (t *Tx) UpdateWorkspace(ctx context.Context, w *paddock.Workspace) error {
	cp, err := encodeCheckpoint(w.Checkpoint)
	if err != nil {
		return err
	}
	res, err := t.exec(ctx, `UPDATE workspaces SET root = ?, state = ?, reason = ?, updated_at = ?,
		retained_at = ?, checkpoint = ?, cleanup_policy = ? WHERE id = ?`,
		w.Root, string(w.State), w.Reason, fmtTime(w.UpdatedAt), fmtOptTime(w.RetainedAt), cp, string(w.CleanupPolicy), w.ID)
	if err != nil {
		return wrap("update workspace", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no workspace %q", w.ID)
	}
	return nil
}

// Workspaces returns the workspaces in the given states (all if none), oldest first.
func (t *Tx) Workspaces(ctx context.Context, states ...paddock.WorkspaceState) ([]*paddock.Workspace, error) {
	q := `SELECT ` + runCols + ` FROM ` + runFrom + ` WHERE w.id IS NOT NULL`
	var args []any
	if len(states) > 0 {
		q += ` AND w.state IN (?` + strings.Repeat(",?", len(states)-1) + `)`
		for _, s := range states {
			args = append(args, string(s))
		}
	}
	q += ` ORDER BY w.created_at, w.id`
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return nil, wrap("list workspaces", err)
	}
	defer rows.Close()
	var out []*paddock.Workspace
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, wrap("list workspaces", err)
		}
		out = append(out, r.Workspace)
	}
	return out, wrap2("list workspaces", rows.Err())
}

// AppendEvent assigns the run's next seq and inserts the event, in this transaction.
func (t *Tx) AppendEvent(ctx context.Context, runID, typ string, data any) (*paddock.Event, error) {
	evs, err := appendEvents(ctx, t, runID, []paddock.EventDraft{{Type: typ, Data: data}})
	if err != nil {
		return nil, err
	}
	return evs[0], nil
}

// appendEvents appends evs to run runID in t, in order, their seqs taken
// in one statement.
func appendEvents(ctx context.Context, t *Tx, runID string, evs []paddock.EventDraft) ([]*paddock.Event, error) {
	out := make([]*paddock.Event, len(evs))
	now := time.Now().UTC()
	for i, d := range evs {
		var raw []byte
		if d.Data != nil {
			var err error
			if raw, err = json.Marshal(d.Data); err != nil {
				return nil, wrap("encode event", err)
			}
		}
		out[i] = &paddock.Event{RunID: runID, Type: d.Type, Time: now, Data: raw}
	}
	var last int64
	err := t.queryRow(ctx, `UPDATE runs SET last_seq = last_seq + ? WHERE id = ? RETURNING last_seq`, len(evs), runID).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no run %q", runID)
	}
	if err != nil {
		return nil, wrap("append event", err)
	}
	at := fmtTime(now)
	for i, e := range out {
		e.Seq = last - int64(len(out)-1-i)
		var dataArg any
		if e.Data != nil {
			dataArg = string(e.Data)
		}
		if _, err := t.exec(ctx, `INSERT INTO events (run_id, seq, time, type, data) VALUES (?, ?, ?, ?, ?)`,
			runID, e.Seq, at, e.Type, dataArg); err != nil {
			return nil, wrap("append event", err)
		}
		if notice, ok := paddock.NoticeOf(e.Type, e.Data); ok {
			// The one writer commits in id order: no lock needed for the order.
			if _, err := t.exec(ctx, `INSERT INTO notices (run_id, seq, type, time) VALUES (?, ?, ?, ?)`,
				runID, e.Seq, notice, at); err != nil {
				return nil, wrap("append notice", err)
			}
		}
	}
	return out, nil
}

// Events returns up to limit events of the run after seq after.
func (t *Tx) Events(ctx context.Context, runID string, after int64, limit int) ([]*paddock.Event, error) {
	if limit <= 0 {
		limit = 1000
	}
	rows, err := t.query(ctx, `SELECT seq, time, type, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
		runID, after, limit)
	if err != nil {
		return nil, wrap("list events", err)
	}
	defer rows.Close()
	out := []*paddock.Event{}
	for rows.Next() {
		e := &paddock.Event{RunID: runID}
		var ts string
		var data sql.NullString
		if err := rows.Scan(&e.Seq, &ts, &e.Type, &data); err != nil {
			return nil, wrap("list events", err)
		}
		e.Time = parseTime(ts)
		if data.Valid {
			e.Data = json.RawMessage(data.String)
		}
		out = append(out, e)
	}
	return out, wrap2("list events", rows.Err())
}

// Lock returns the project's lock or nil.
func (t *Tx) Lock(ctx context.Context, project string) (*paddock.Lock, error) {
	l := &paddock.Lock{Project: project}
	var at string
	err := t.queryRow(ctx, `SELECT run_id, acquired_at FROM locks WHERE project = ?`, project).Scan(&l.RunID, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("get lock", err)
	}
	l.AcquiredAt = parseTime(at)
	return l, nil
}

// AcquireLock takes the project lock for l.RunID. Taking a lock one already
// holds is a no-op.
func (t *Tx) AcquireLock(ctx context.Context, l *paddock.Lock) error {
	cur, err := t.Lock(ctx, l.Project)
	if err != nil {
		return err
	}
	if cur != nil {
		if cur.RunID == l.RunID {
			return nil
		}
		return paddock.Errorf(paddock.CodeBusy, "project %q is locked by run %s", l.Project, cur.RunID).
			WithDetail("holder", cur.RunID)
	}
	if _, err := t.exec(ctx, `INSERT INTO locks (project, run_id, acquired_at) VALUES (?, ?, ?)`,
		l.Project, l.RunID, fmtTime(l.AcquiredAt)); err != nil {
		return wrap("acquire lock", err)
	}
	return nil
}

// ReleaseLock frees the project lock if runID holds it.
func (t *Tx) ReleaseLock(ctx context.Context, project, runID string) (bool, error) {
	res, err := t.exec(ctx, `DELETE FROM locks WHERE project = ? AND run_id = ?`, project, runID)
	if err != nil {
		return false, wrap("release lock", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// SetRunToken records the hash of a run's bearer token.
func (t *Tx) SetRunToken(ctx context.Context, id, tokenHash string) error {
	res, err := t.exec(ctx, `UPDATE runs SET token_hash = ? WHERE id = ?`, tokenHash, id)
	if err != nil {
		return wrap("set run token", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no run %q", id)
	}
	return nil
}

// RunByToken returns the id of the run whose token has this hash.
func (t *Tx) RunByToken(ctx context.Context, tokenHash string) (string, error) {
	var id string
	err := t.queryRow(ctx, `SELECT id FROM runs WHERE token_hash = ?`, tokenHash).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", paddock.Errorf(paddock.CodeNotFound, "no run has this token")
	}
	if err != nil {
		return "", wrap("run by token", err)
	}
	return id, nil
}

// CreateJob inserts a running job; busy if the run has one running.
func (t *Tx) CreateJob(ctx context.Context, j *paddock.Job) error {
	_, err := t.exec(ctx, `INSERT INTO jobs (id, run_id, kind, state, owner, lease_until, request, created_at, reason)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, j.ID, j.RunID, string(j.Kind), string(j.State), j.Owner,
		fmtOptTime(j.LeaseUntil), string(j.Request), fmtTime(j.CreatedAt), j.Reason)
	if isUnique(err) {
		return paddock.Errorf(paddock.CodeBusy, "run %s already has a job running", j.RunID)
	}
	if err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
			return paddock.Errorf(paddock.CodeNotFound, "no run %q", j.RunID)
		}
		return wrap("create job", err)
	}
	return nil
}

const jobCols = `id, run_id, kind, state, owner, lease_until, request, created_at, ended_at, exit_code, reason`

func scanJob(row interface{ Scan(...any) error }) (*paddock.Job, error) {
	var j paddock.Job
	var kind, state, req, created string
	var lease, ended sql.NullString
	var exit sql.NullInt64
	if err := row.Scan(&j.ID, &j.RunID, &kind, &state, &j.Owner, &lease, &req, &created, &ended, &exit, &j.Reason); err != nil {
		return nil, err
	}
	j.Kind, j.State, j.Request = paddock.JobKind(kind), paddock.JobState(state), json.RawMessage(req)
	j.CreatedAt, j.LeaseUntil, j.EndedAt = parseTime(created), parseOptTime(lease), parseOptTime(ended)
	if exit.Valid {
		n := int(exit.Int64)
		j.ExitCode = &n
	}
	return &j, nil
}

// Job returns one job.
func (t *Tx) Job(ctx context.Context, id string) (*paddock.Job, error) {
	j, err := scanJob(t.queryRow(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no job %q", id)
	}
	if err != nil {
		return nil, wrap("get job", err)
	}
	return j, nil
}

// Jobs returns a run's jobs, or every job in a state.
func (t *Tx) Jobs(ctx context.Context, run string, state paddock.JobState) ([]*paddock.Job, error) {
	q := `SELECT ` + jobCols + ` FROM jobs WHERE 1 = 1`
	var args []any
	if run != "" {
		q += ` AND run_id = ?`
		args = append(args, run)
	}
	if state != "" {
		q += ` AND state = ?`
		args = append(args, string(state))
	}
	rows, err := t.query(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, wrap("list jobs", err)
	}
	defer rows.Close()
	out := []*paddock.Job{}
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, wrap("list jobs", err)
		}
		out = append(out, j)
	}
	return out, wrap2("list jobs", rows.Err())
}

// UpdateJob writes a job's mutable fields.
func (t *Tx) UpdateJob(ctx context.Context, j *paddock.Job) error {
	var exit any
	if j.ExitCode != nil {
		exit = *j.ExitCode
	}
	res, err := t.exec(ctx, `UPDATE jobs SET state = ?, owner = ?, lease_until = ?, ended_at = ?, exit_code = ?, reason = ? WHERE id = ?`,
		string(j.State), j.Owner, fmtOptTime(j.LeaseUntil), fmtOptTime(j.EndedAt), exit, j.Reason, j.ID)
	if isUnique(err) {
		return paddock.Errorf(paddock.CodeBusy, "run %s already has a job running", j.RunID)
	}
	if err != nil {
		return wrap("update job", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no job %q", j.ID)
	}
	return nil
}

// encodeSettings encodes the project's settings columns: its protected
// paths, the attribution rules it allows, its caches, its check overrides,
// its approval policy (nil as NULL).
func encodeSettings(p *paddock.Project) (prot, allow any, caches, checks, policy sql.NullString, err error) {
	if prot, err = encodeProtected(p.Protected); err != nil {
		return
	}
	if allow, err = encodeProtected(p.AttributionAllow); err != nil {
		return
	}
	if caches, err = encodeCaches(p.Caches); err != nil {
		return
	}
	if len(p.Checks) > 0 {
		b, jerr := json.Marshal(p.Checks)
		if jerr != nil {
			err = fmt.Errorf("checks: %w", jerr)
			return
		}
		checks = sql.NullString{String: string(b), Valid: true}
	}
	if p.Policy != nil {
		b, jerr := json.Marshal(p.Policy)
		if jerr != nil {
			err = fmt.Errorf("approval policy: %w", jerr)
			return
		}
		policy = sql.NullString{String: string(b), Valid: true}
	}
	return
}

// encodeCaches stores a project's caches as JSON, none as NULL.

func encodeCaches(c []paddock.Cache) (sql.NullString, error) {
	if len(c) == 0 {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return sql.NullString{}, fmt.Errorf("caches: %w", err)
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// PutAgent stores a definition under its name, replacing one there.
func (t *Tx) PutAgent(ctx context.Context, a *paddock.AgentRecord) error {
	b, err := json.Marshal(a.Definition)
	if err != nil {
		return wrap("encode agent", err)
	}
	_, err = t.exec(ctx, `INSERT INTO agents (name, hash, definition, source, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET hash = excluded.hash, definition = excluded.definition, source = excluded.source, updated_at = excluded.updated_at`,
		a.Definition.Name, a.Hash, string(b), a.Source, fmtTime(a.UpdatedAt))
	return wrap2("put agent", err)
}

func scanAgent(row interface{ Scan(...any) error }) (*paddock.AgentRecord, error) {
	var a paddock.AgentRecord
	var def, updated string
	if err := row.Scan(&a.Hash, &def, &a.Source, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(def), &a.Definition); err != nil {
		return nil, fmt.Errorf("agent definition: %w", err)
	}
	a.UpdatedAt = parseTime(updated)
	return &a, nil
}

// Agent returns a stored definition.
func (t *Tx) Agent(ctx context.Context, name string) (*paddock.AgentRecord, error) {
	a, err := scanAgent(t.queryRow(ctx, `SELECT hash, definition, source, updated_at FROM agents WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no agent definition named %q", name)
	}
	return a, wrap2("get agent", err)
}

// Agents returns the stored definitions by name.
func (t *Tx) Agents(ctx context.Context) ([]*paddock.AgentRecord, error) {
	rows, err := t.query(ctx, `SELECT hash, definition, source, updated_at FROM agents ORDER BY name`)
	if err != nil {
		return nil, wrap("list agents", err)
	}
	defer rows.Close()
	var out []*paddock.AgentRecord
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, wrap("list agents", err)
		}
		out = append(out, a)
	}
	return out, wrap2("list agents", rows.Err())
}

// DeleteAgent removes a stored definition; runs keep their copies.
func (t *Tx) DeleteAgent(ctx context.Context, name string) error {
	res, err := t.exec(ctx, `DELETE FROM agents WHERE name = ?`, name)
	if err != nil {
		return wrap("delete agent", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no agent definition named %q", name)
	}
	return nil
}

// AccessRequests is the runs' access requests in this transaction.
func (t *Tx) AccessRequests() paddock.AccessRequestStore { return accessRequests{t} }

// accessRequests is paddock.AccessRequestStore on a Tx.
type accessRequests struct{ t *Tx }

// Create records a run's access request.
func (q accessRequests) Create(ctx context.Context, r *paddock.AccessRequest) error {
	t := q.t
	b, err := json.Marshal(r)
	if err != nil {
		return wrap("encode access request", err)
	}
	_, err = t.exec(ctx, `INSERT INTO access_requests (run_id, id, state, body, created_at) VALUES (?, ?, ?, ?, ?)`,
		r.RunID, r.ID, r.State, string(b), fmtTime(r.CreatedAt))
	if isUnique(err) {
		return paddock.Errorf(paddock.CodeConflict, "run %s already has a request %s", r.RunID, r.ID)
	}
	if err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
			return paddock.Errorf(paddock.CodeNotFound, "no run %q", r.RunID)
		}
	}
	return wrap2("create access request", err)
}

// List returns a run's access requests, oldest first.
func (q accessRequests) List(ctx context.Context, runID string) ([]*paddock.AccessRequest, error) {
	t := q.t
	rows, err := t.queryRead(ctx, `SELECT body FROM access_requests WHERE run_id = ? ORDER BY created_at, id`, runID)
	if err != nil {
		return nil, wrap("list access requests", err)
	}
	defer rows.Close()
	var out []*paddock.AccessRequest
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, wrap("list access requests", err)
		}
		r := new(paddock.AccessRequest)
		if err := json.Unmarshal([]byte(body), r); err != nil {
			return nil, wrap("list access requests", err)
		}
		out = append(out, r)
	}
	return out, wrap2("list access requests", rows.Err())
}

// Update writes a request's decision.
func (q accessRequests) Update(ctx context.Context, r *paddock.AccessRequest) error {
	t := q.t
	b, err := json.Marshal(r)
	if err != nil {
		return wrap("encode access request", err)
	}
	res, err := t.exec(ctx, `UPDATE access_requests SET state = ?, body = ? WHERE run_id = ? AND id = ?`, r.State, string(b), r.RunID, r.ID)
	if err != nil {
		return wrap("update access request", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "run %s has no request %s", r.RunID, r.ID)
	}
	return nil
}
