package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/paddock-dev/paddock"
)

// Tx is one transaction; see paddock.Tx. Its methods mirror package
// sqlite's, statement for statement where the two dialects allow; the
// answers (codes, orders, nil versus empty lists) are the same.
type Tx struct {
	tx pgx.Tx
	// node is this store's node once it joined (Store.Join): its runs are
	// made on it, and Workspaces and the running jobs list only its own,
	// which is what a daemon recovers, checkpoints and collects.
	node string
	// write is set in Update's transactions: Run locks the run's row
	// there (see Run).
	write bool
}

var _ paddock.Tx = (*Tx)(nil)

// PostgreSQL's SQLSTATE codes this package tells apart.
const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
)

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// optTime stores the zero time as NULL.
func optTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

func fromOptTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// jsonText is a value's JSON as a string parameter, nil as NULL.
func jsonText(v any, isNil bool) (any, error) {
	if isNil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// unmarshalOpt decodes a nullable JSON column into v, leaving v alone for NULL.
func unmarshalOpt(raw *string, v any) error {
	if raw == nil {
		return nil
	}
	return json.Unmarshal([]byte(*raw), v)
}

type scanner interface{ Scan(...any) error }

// exists reports whether a query returns a row.
func exists(ctx context.Context, t *Tx, q string, args ...any) (bool, error) {
	var ok bool
	err := t.tx.QueryRow(ctx, `SELECT EXISTS (`+q+`)`, args...).Scan(&ok)
	return ok, err
}

// encodeSettings encodes the project's settings columns: its protected
// paths, the attribution rules it allows, its caches, its check overrides,
// its approval policy (nil as NULL).
func encodeSettings(p *paddock.Project) (prot, allow, caches, checks, policy any, err error) {
	if prot, err = jsonText(p.Protected, p.Protected == nil); err != nil {
		return nil, nil, nil, nil, nil, wrap("encode protected paths", err)
	}
	if allow, err = jsonText(p.AttributionAllow, p.AttributionAllow == nil); err != nil {
		return nil, nil, nil, nil, nil, wrap("encode attribution rules", err)
	}
	if caches, err = jsonText(p.Caches, len(p.Caches) == 0); err != nil {
		return nil, nil, nil, nil, nil, fmt.Errorf("caches: %w", err)
	}
	if checks, err = jsonText(p.Checks, len(p.Checks) == 0); err != nil {
		return nil, nil, nil, nil, nil, fmt.Errorf("checks: %w", err)
	}
	if policy, err = jsonText(p.Policy, p.Policy == nil); err != nil {
		return nil, nil, nil, nil, nil, fmt.Errorf("approval policy: %w", err)
	}
	return prot, allow, caches, checks, policy, nil
}

// CreateProject inserts p; a taken name or root is a conflict.
func (t *Tx) CreateProject(ctx context.Context, p *paddock.Project) error {
	prot, allow, caches, checks, policy, err := encodeSettings(p)
	if err != nil {
		return err
	}
	tag, err := t.tx.Exec(ctx, `INSERT INTO projects (name, root, fingerprint, created_at, protected, attribution_allow, caches, checks, approval_policy)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`,
		p.Name, p.Root, p.Fingerprint, p.CreatedAt.UTC(), prot, allow, caches, checks, policy)
	if err != nil {
		return wrap("create project", err)
	}
	if tag.RowsAffected() == 0 {
		var other string
		if t.tx.QueryRow(ctx, `SELECT name FROM projects WHERE root = $1`, p.Root).Scan(&other) == nil {
			return paddock.Errorf(paddock.CodeConflict, "this root is already declared as project %q", other)
		}
		return paddock.Errorf(paddock.CodeConflict, "a project named %q already exists", p.Name)
	}
	return nil
}

const projectCols = `p.name, p.root, p.fingerprint, p.created_at, p.protected, p.attribution_allow, p.caches, p.checks, p.approval_policy, l.run_id, l.acquired_at`
const projectFrom = `projects p LEFT JOIN locks l ON l.project = p.name`

func scanProject(row scanner) (*paddock.Project, error) {
	var p paddock.Project
	var prot, allow, caches, checks, policy, lockRun *string
	var lockAt *time.Time
	if err := row.Scan(&p.Name, &p.Root, &p.Fingerprint, &p.CreatedAt, &prot, &allow, &caches, &checks, &policy, &lockRun, &lockAt); err != nil {
		return nil, err
	}
	if policy != nil {
		p.Policy = new(paddock.ApprovalPolicy)
		if err := unmarshalOpt(policy, p.Policy); err != nil {
			return nil, fmt.Errorf("approval policy of %s: %w", p.Name, err)
		}
	}
	p.CreatedAt = p.CreatedAt.UTC()
	if err := unmarshalOpt(checks, &p.Checks); err != nil {
		return nil, fmt.Errorf("checks of %s: %w", p.Name, err)
	}
	if err := unmarshalOpt(caches, &p.Caches); err != nil {
		return nil, fmt.Errorf("caches of %s: %w", p.Name, err)
	}
	if err := unmarshalOpt(allow, &p.AttributionAllow); err != nil {
		return nil, fmt.Errorf("attribution rules of %s: %w", p.Name, err)
	}
	if err := unmarshalOpt(prot, &p.Protected); err != nil {
		return nil, fmt.Errorf("protected paths of %s: %w", p.Name, err)
	}
	if lockRun != nil {
		p.Lock = &paddock.Lock{Project: p.Name, RunID: *lockRun, AcquiredAt: fromOptTime(lockAt)}
	}
	return &p, nil
}

// Project returns the named project.
func (t *Tx) Project(ctx context.Context, name string) (*paddock.Project, error) {
	p, err := scanProject(t.tx.QueryRow(ctx, `SELECT `+projectCols+` FROM `+projectFrom+` WHERE p.name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no project named %q", name)
	}
	if err != nil {
		return nil, wrap("get project", err)
	}
	return p, nil
}

// collect runs a query and scans each row with scan. The list is nil when
// empty unless empty says otherwise (as in package sqlite, Events and Jobs
// answer an empty, non-nil list).
func collect[T any](ctx context.Context, t *Tx, op string, empty bool, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := t.tx.Query(ctx, q, args...)
	if err != nil {
		return nil, wrap(op, err)
	}
	defer rows.Close()
	var out []T
	if empty {
		out = []T{}
	}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, wrap(op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(op, err)
	}
	return out, nil
}

// Projects returns every project by name.
func (t *Tx) Projects(ctx context.Context) ([]*paddock.Project, error) {
	return collect(ctx, t, "list projects", false, scanProject, `SELECT `+projectCols+` FROM `+projectFrom+` ORDER BY p.name`)
}

// UpdateProject writes the project's settings.
func (t *Tx) UpdateProject(ctx context.Context, p *paddock.Project) error {
	prot, allow, caches, checks, policy, err := encodeSettings(p)
	if err != nil {
		return err
	}
	tag, err := t.tx.Exec(ctx, `UPDATE projects SET protected = $1, attribution_allow = $2, caches = $3, checks = $4, approval_policy = $5 WHERE name = $6`,
		prot, allow, caches, checks, policy, p.Name)
	if err != nil {
		return wrap("update project", err)
	}
	if tag.RowsAffected() == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no project named %q", p.Name)
	}
	return nil
}

// DeleteProject deletes the project with its runs, workspaces records, events and lock.
func (t *Tx) DeleteProject(ctx context.Context, name string) error {
	tag, err := t.tx.Exec(ctx, `DELETE FROM projects WHERE name = $1`, name)
	if err != nil {
		return wrap("delete project", err)
	}
	if tag.RowsAffected() == 0 {
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
	secrets, err := jsonText(r.Secrets, r.Secrets == nil)
	if err != nil {
		return wrap("encode list", err)
	}
	agent, err := jsonText(r.Agent, r.Agent == nil)
	if err != nil {
		return wrap("encode agent", err)
	}
	// The insert happens only if the project exists and the id is free, so
	// that either answer leaves the transaction usable; a project deleted
	// by a concurrent transaction still trips the foreign key.
	review, err := jsonText(r.ReviewOf, r.ReviewOf == nil)
	if err != nil {
		return wrap("encode review", err)
	}
	var node any
	if t.node != "" {
		node = t.node
	}
	tag, err := t.tx.Exec(ctx, `INSERT INTO runs (id, project, access, secrets, include_ignored, created_at, removed_at, last_seq, agent, agent_hash, review_of, node)
		SELECT $1, $2, $3, $4, $5, $6, $7, 0, $8, $9, $10, $11 WHERE EXISTS (SELECT 1 FROM projects WHERE name = $2)
		ON CONFLICT DO NOTHING`,
		r.ID, r.Project, string(access), secrets, r.IncludeIgnored, r.CreatedAt.UTC(), optTime(r.RemovedAt), agent, r.AgentHash, review, node)
	if sqlState(err) == foreignKeyViolation {
		return paddock.Errorf(paddock.CodeNotFound, "no project named %q", r.Project)
	}
	if err != nil {
		return wrap("create run", err)
	}
	if tag.RowsAffected() == 0 {
		taken, err := exists(ctx, t, `SELECT 1 FROM runs WHERE id = $1`, r.ID)
		if err != nil {
			return wrap("create run", err)
		}
		if taken {
			return paddock.Errorf(paddock.CodeConflict, "a run with id %q already exists", r.ID)
		}
		return paddock.Errorf(paddock.CodeNotFound, "no project named %q", r.Project)
	}
	r.LastSeq = 0
	if t.node != "" {
		r.Node, r.NodeState = t.node, paddock.NodeAlive
	}
	if t.node != "" && r.Workspace != nil {
		// A place Place held on this node for a run of the project is
		// taken back: the run counts now. (A run without a workspace
		// never counts, and takes none.)
		if _, err := t.tx.Exec(ctx, `DELETE FROM paddock_reservations WHERE id = (SELECT id FROM paddock_reservations
			WHERE node = $1 ORDER BY project = $2 DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED)`, t.node, r.Project); err != nil {
			return wrap("create run", err)
		}
	}
	if w := r.Workspace; w != nil {
		cp, err := jsonText(w.Checkpoint, w.Checkpoint == nil)
		if err != nil {
			return wrap("encode checkpoint", err)
		}
		tag, err := t.tx.Exec(ctx, `INSERT INTO workspaces (id, run_id, kind, root, fingerprint, base_ref, base_revision, branch,
			state, cleanup_policy, reason, created_at, updated_at, retained_at, checkpoint)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) ON CONFLICT DO NOTHING`,
			w.ID, r.ID, string(w.Kind), w.Root, w.Fingerprint, w.BaseRef, w.BaseRevision, w.Branch,
			string(w.State), string(w.CleanupPolicy), w.Reason, w.CreatedAt.UTC(), w.UpdatedAt.UTC(),
			optTime(w.RetainedAt), cp)
		if err != nil {
			return wrap("create workspace", err)
		}
		if tag.RowsAffected() == 0 {
			return paddock.Errorf(paddock.CodeConflict, "a workspace with id %q already exists", w.ID)
		}
	}
	return nil
}

const runCols = `r.id, r.project, r.access, r.secrets, r.include_ignored, r.created_at, r.removed_at, r.last_seq, r.agent, r.agent_hash, r.review_of,
	w.id, w.kind, w.root, w.fingerprint, w.base_ref, w.base_revision, w.branch, w.state, w.cleanup_policy,
	w.reason, w.created_at, w.updated_at, w.retained_at, w.checkpoint, r.node, n.state`
const runFrom = `runs r LEFT JOIN workspaces w ON w.run_id = r.id LEFT JOIN paddock_nodes n ON n.id = r.node`

func scanRun(row scanner) (*paddock.Run, error) {
	var r paddock.Run
	var removed *time.Time
	var secrets, agent, review *string
	var wid, kind, root, fp, baseRef, baseRev, branch, state, policy, reason *string
	var wcreated, wupdated, retained *time.Time
	var checkpoint, node, nodeState *string
	if err := row.Scan(&r.ID, &r.Project, &r.Access, &secrets, &r.IncludeIgnored, &r.CreatedAt, &removed, &r.LastSeq, &agent, &r.AgentHash, &review,
		&wid, &kind, &root, &fp, &baseRef, &baseRev, &branch, &state, &policy,
		&reason, &wcreated, &wupdated, &retained, &checkpoint, &node, &nodeState); err != nil {
		return nil, err
	}
	if node != nil {
		r.Node = *node
	}
	if nodeState != nil {
		r.NodeState = paddock.NodeState(*nodeState)
	}
	r.CreatedAt = r.CreatedAt.UTC()
	r.RemovedAt = fromOptTime(removed)
	if err := unmarshalOpt(secrets, &r.Secrets); err != nil {
		return nil, fmt.Errorf("secrets of run %s: %w", r.ID, err)
	}
	if agent != nil {
		r.Agent = new(paddock.AgentDefinition)
		if err := json.Unmarshal([]byte(*agent), r.Agent); err != nil {
			return nil, fmt.Errorf("agent of run %s: %w", r.ID, err)
		}
	}
	if review != nil {
		r.ReviewOf = new(paddock.ReviewOf)
		if err := json.Unmarshal([]byte(*review), r.ReviewOf); err != nil {
			return nil, fmt.Errorf("review of run %s: %w", r.ID, err)
		}
	}
	if wid != nil {
		str := func(s *string) string {
			if s == nil {
				return ""
			}
			return *s
		}
		w := &paddock.Workspace{
			ID: *wid, RunID: r.ID, Kind: paddock.WorkspaceKind(str(kind)), Root: str(root),
			Fingerprint: str(fp), BaseRef: str(baseRef), BaseRevision: str(baseRev), Branch: str(branch),
			State: paddock.WorkspaceState(str(state)), CleanupPolicy: paddock.CleanupPolicy(str(policy)),
			Reason: str(reason), CreatedAt: fromOptTime(wcreated), UpdatedAt: fromOptTime(wupdated),
			RetainedAt: fromOptTime(retained),
		}
		if checkpoint != nil {
			w.Checkpoint = new(paddock.Checkpoint)
			if err := json.Unmarshal([]byte(*checkpoint), w.Checkpoint); err != nil {
				return nil, fmt.Errorf("checkpoint of run %s: %w", r.ID, err)
			}
		}
		r.Workspace = w
	}
	return &r, nil
}

// Run returns the run with its workspace. In a write transaction it
// locks the run's row (FOR NO KEY UPDATE, the lock AppendEvent's UPDATE
// takes) until the transaction ends, so that what fn decides from the run
// (the seq rule's last_seq, its workspace's state) still holds when it
// commits, as under SQLite's single writer: a concurrent writer of the run
// waits, and then reads what this one wrote.
func (t *Tx) Run(ctx context.Context, id string) (*paddock.Run, error) {
	q := `SELECT ` + runCols + ` FROM ` + runFrom + ` WHERE r.id = $1`
	if t.write {
		q += ` FOR NO KEY UPDATE OF r`
	}
	r, err := scanRun(t.tx.QueryRow(ctx, q, id))
	if errors.Is(err, pgx.ErrNoRows) {
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
		args = append(args, f.Project)
		where = append(where, fmt.Sprintf("r.project = $%d", len(args)))
	}
	if !f.Removed {
		where = append(where, "r.removed_at IS NULL")
	}
	q := `SELECT ` + runCols + ` FROM ` + runFrom
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY r.created_at, r.id"
	return collect(ctx, t, "list runs", false, scanRun, q, args...)
}

// MarkRunRemoved sets the run's removed_at.
func (t *Tx) MarkRunRemoved(ctx context.Context, id string) error {
	tag, err := t.tx.Exec(ctx, `UPDATE runs SET removed_at = $1 WHERE id = $2`, time.Now().UTC(), id)
	if err != nil {
		return wrap("remove run", err)
	}
	if tag.RowsAffected() == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no run %q", id)
	}
	return nil
}

// UpdateWorkspace writes every mutable field of w.
func (t *Tx) UpdateWorkspace(ctx context.Context, w *paddock.Workspace) error {
	cp, err := jsonText(w.Checkpoint, w.Checkpoint == nil)
	if err != nil {
		return wrap("encode checkpoint", err)
	}
	tag, err := t.tx.Exec(ctx, `UPDATE workspaces SET root = $1, state = $2, reason = $3, updated_at = $4,
		retained_at = $5, checkpoint = $6, cleanup_policy = $7 WHERE id = $8`,
		w.Root, string(w.State), w.Reason, w.UpdatedAt.UTC(), optTime(w.RetainedAt), cp, string(w.CleanupPolicy), w.ID)
	if err != nil {
		return wrap("update workspace", err)
	}
	if tag.RowsAffected() == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no workspace %q", w.ID)
	}
	return nil
}

// Workspaces returns the workspaces in the given states (all if none), oldest first.
func (t *Tx) Workspaces(ctx context.Context, states ...paddock.WorkspaceState) ([]*paddock.Workspace, error) {
	q := `SELECT ` + runCols + ` FROM ` + runFrom + ` WHERE w.id IS NOT NULL`
	var args []any
	if len(states) > 0 {
		names := make([]string, len(states))
		for i, s := range states {
			names[i] = string(s)
		}
		args = append(args, names)
		q += fmt.Sprintf(` AND w.state = ANY($%d)`, len(args))
	}
	if t.node != "" {
		// A node sees its own workspaces: the others are on other disks.
		args = append(args, t.node)
		q += fmt.Sprintf(` AND r.node = $%d`, len(args))
	}
	q += ` ORDER BY w.created_at, w.id`
	return collect(ctx, t, "list workspaces", false, func(row scanner) (*paddock.Workspace, error) {
		r, err := scanRun(row)
		if err != nil {
			return nil, err
		}
		return r.Workspace, nil
	}, q, args...)
}

// AppendEvent assigns the run's next seq and inserts the event, in this
// transaction. The UPDATE locks the run's row until the transaction ends,
// which is what keeps seqs gap-free and in commit order across writers.
func (t *Tx) AppendEvent(ctx context.Context, runID, typ string, data any) (*paddock.Event, error) {
	e, args, err := newEvent(runID, typ, data)
	if err != nil {
		return nil, err
	}
	// One round trip: take the seq, insert with it, and tell the nodes
	// listening (Store.Listen) once the transaction commits: PostgreSQL
	// delivers a notification only then, and one per run per transaction.
	if err := scanSeq(t.tx.QueryRow(ctx, appendEvent, args...), e); err != nil {
		return nil, err
	}
	if notice, ok := paddock.NoticeOf(typ, e.Data); ok {
		if err := t.appendNotice(ctx, e, notice); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// newEvent is an event to append to run runID, and appendEvent's
// arguments for it.
func newEvent(runID, typ string, data any) (*paddock.Event, []any, error) {
	var raw []byte
	if data != nil {
		var err error
		if raw, err = json.Marshal(data); err != nil {
			return nil, nil, wrap("encode event", err)
		}
	}
	// timestamptz keeps microseconds: the event returned is the one stored.
	e := &paddock.Event{RunID: runID, Type: typ, Time: time.Now().UTC().Truncate(time.Microsecond), Data: raw}
	var dataArg any
	if raw != nil {
		dataArg = string(raw)
	}
	return e, []any{runID, e.Time, typ, dataArg}, nil
}

// scanSeq reads appendEvent's answer into e.
func scanSeq(row pgx.Row, e *paddock.Event) error {
	err := row.Scan(&e.Seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return paddock.Errorf(paddock.CodeNotFound, "no run %q", e.RunID)
	}
	if err != nil {
		return wrap("append event", err)
	}
	return nil
}

// appendEvent appends an event to run $1 (time $2, type $3, data $4) and
// answers its seq, or no row if there is no such run.
const appendEvent = `WITH next AS (UPDATE runs SET last_seq = last_seq + 1 WHERE id = $1 RETURNING last_seq),
		ins AS (INSERT INTO events (run_id, seq, time, type, data) SELECT $1, last_seq, $2, $3, $4 FROM next RETURNING seq)
		SELECT ins.seq FROM ins, (SELECT pg_notify('` + eventsChannel + `', $1)) n`

// Events returns up to limit events of the run after seq after.
func (t *Tx) Events(ctx context.Context, runID string, after int64, limit int) ([]*paddock.Event, error) {
	if limit <= 0 {
		limit = 1000
	}
	return collect(ctx, t, "list events", true, func(row scanner) (*paddock.Event, error) {
		e := &paddock.Event{RunID: runID}
		var data *string
		if err := row.Scan(&e.Seq, &e.Time, &e.Type, &data); err != nil {
			return nil, err
		}
		e.Time = e.Time.UTC()
		if data != nil {
			e.Data = json.RawMessage(*data)
		}
		return e, nil
	}, `SELECT seq, time, type, data FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, runID, after, limit)
}

// Lock returns the project's lock or nil.
func (t *Tx) Lock(ctx context.Context, project string) (*paddock.Lock, error) {
	l := &paddock.Lock{Project: project}
	err := t.tx.QueryRow(ctx, `SELECT run_id, acquired_at FROM locks WHERE project = $1`, project).Scan(&l.RunID, &l.AcquiredAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("get lock", err)
	}
	l.AcquiredAt = l.AcquiredAt.UTC()
	return l, nil
}

// AcquireLock takes the project lock for l.RunID. Taking a lock one already
// holds is a no-op. The insert decides: of two transactions that both saw
// the lock free, the second waits for the first and then finds it taken.
func (t *Tx) AcquireLock(ctx context.Context, l *paddock.Lock) error {
	// Twice at most: the holder seen by the insert can release (and commit)
	// before the read that names it.
	for range 2 {
		tag, err := t.tx.Exec(ctx, `INSERT INTO locks (project, run_id, acquired_at) VALUES ($1, $2, $3) ON CONFLICT (project) DO NOTHING`,
			l.Project, l.RunID, l.AcquiredAt.UTC())
		if err != nil {
			return wrap("acquire lock", err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		cur, err := t.Lock(ctx, l.Project)
		if err != nil {
			return err
		}
		if cur == nil {
			continue
		}
		if cur.RunID == l.RunID {
			return nil
		}
		return paddock.Errorf(paddock.CodeBusy, "project %q is locked by run %s", l.Project, cur.RunID).
			WithDetail("holder", cur.RunID)
	}
	return paddock.Errorf(paddock.CodeBusy, "project %q is being locked and released by others", l.Project)
}

// ReleaseLock frees the project lock if runID holds it.
func (t *Tx) ReleaseLock(ctx context.Context, project, runID string) (bool, error) {
	tag, err := t.tx.Exec(ctx, `DELETE FROM locks WHERE project = $1 AND run_id = $2`, project, runID)
	if err != nil {
		return false, wrap("release lock", err)
	}
	return tag.RowsAffected() > 0, nil
}

// SetRunToken records the hash of a run's bearer token.
func (t *Tx) SetRunToken(ctx context.Context, id, tokenHash string) error {
	tag, err := t.tx.Exec(ctx, `UPDATE runs SET token_hash = $1 WHERE id = $2`, tokenHash, id)
	if err != nil {
		return wrap("set run token", err)
	}
	if tag.RowsAffected() == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no run %q", id)
	}
	return nil
}

// RunByToken returns the id of the run whose token has this hash.
func (t *Tx) RunByToken(ctx context.Context, tokenHash string) (string, error) {
	var id string
	err := t.tx.QueryRow(ctx, `SELECT id FROM runs WHERE token_hash = $1`, tokenHash).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", paddock.Errorf(paddock.CodeNotFound, "no run has this token")
	}
	if err != nil {
		return "", wrap("run by token", err)
	}
	return id, nil
}

// CreateJob inserts a running job; busy if the run has one running.
func (t *Tx) CreateJob(ctx context.Context, j *paddock.Job) error {
	tag, err := t.tx.Exec(ctx, `INSERT INTO jobs (id, run_id, kind, state, owner, lease_until, request, created_at, reason)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 WHERE EXISTS (SELECT 1 FROM runs WHERE id = $2)
		ON CONFLICT DO NOTHING`, j.ID, j.RunID, string(j.Kind), string(j.State), j.Owner,
		optTime(j.LeaseUntil), string(j.Request), j.CreatedAt.UTC(), j.Reason)
	if sqlState(err) == foreignKeyViolation {
		return paddock.Errorf(paddock.CodeNotFound, "no run %q", j.RunID)
	}
	if err != nil {
		return wrap("create job", err)
	}
	if tag.RowsAffected() == 0 {
		ok, err := exists(ctx, t, `SELECT 1 FROM runs WHERE id = $1`, j.RunID)
		if err != nil {
			return wrap("create job", err)
		}
		if !ok {
			return paddock.Errorf(paddock.CodeNotFound, "no run %q", j.RunID)
		}
		// A taken id, like a running job, is busy, as in package sqlite.
		return paddock.Errorf(paddock.CodeBusy, "run %s already has a job running", j.RunID)
	}
	return nil
}

const jobCols = `id, run_id, kind, state, owner, lease_until, request, created_at, ended_at, exit_code, reason`

func scanJob(row scanner) (*paddock.Job, error) {
	var j paddock.Job
	var kind, state, req string
	var lease, ended *time.Time
	var exit *int32
	if err := row.Scan(&j.ID, &j.RunID, &kind, &state, &j.Owner, &lease, &req, &j.CreatedAt, &ended, &exit, &j.Reason); err != nil {
		return nil, err
	}
	j.Kind, j.State, j.Request = paddock.JobKind(kind), paddock.JobState(state), json.RawMessage(req)
	j.CreatedAt, j.LeaseUntil, j.EndedAt = j.CreatedAt.UTC(), fromOptTime(lease), fromOptTime(ended)
	if exit != nil {
		n := int(*exit)
		j.ExitCode = &n
	}
	return &j, nil
}

// Job returns one job.
func (t *Tx) Job(ctx context.Context, id string) (*paddock.Job, error) {
	j, err := scanJob(t.tx.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no job %q", id)
	}
	if err != nil {
		return nil, wrap("get job", err)
	}
	return j, nil
}

// Jobs returns a run's jobs, or every job in a state.
func (t *Tx) Jobs(ctx context.Context, run string, state paddock.JobState) ([]*paddock.Job, error) {
	q := `SELECT ` + jobCols + ` FROM jobs WHERE true`
	var args []any
	if run != "" {
		args = append(args, run)
		q += fmt.Sprintf(` AND run_id = $%d`, len(args))
	}
	if state != "" {
		args = append(args, string(state))
		q += fmt.Sprintf(` AND state = $%d`, len(args))
	}
	if run == "" && t.node != "" {
		// Every job in a state: this node's runs' (another node's running
		// jobs are its own to run, or its reaper's to interrupt).
		args = append(args, t.node)
		q += fmt.Sprintf(` AND run_id IN (SELECT id FROM runs WHERE node = $%d)`, len(args))
	}
	return collect(ctx, t, "list jobs", true, scanJob, q+` ORDER BY created_at, id`, args...)
}

// UpdateJob writes a job's mutable fields. Making a job running while its
// run has another running is busy; that statement runs in a savepoint, so
// that the answer leaves the transaction usable.
func (t *Tx) UpdateJob(ctx context.Context, j *paddock.Job) error {
	var exit any
	if j.ExitCode != nil {
		exit = int32(*j.ExitCode)
	}
	q := `UPDATE jobs SET state = $1, owner = $2, lease_until = $3, ended_at = $4, exit_code = $5, reason = $6 WHERE id = $7`
	args := []any{string(j.State), j.Owner, optTime(j.LeaseUntil), optTime(j.EndedAt), exit, j.Reason, j.ID}
	var tag pgconn.CommandTag
	var err error
	if j.State == paddock.JobRunning {
		tag, err = t.inSavepoint(ctx, q, args...)
	} else {
		tag, err = t.tx.Exec(ctx, q, args...)
	}
	if sqlState(err) == uniqueViolation {
		return paddock.Errorf(paddock.CodeBusy, "run %s already has a job running", j.RunID)
	}
	if err != nil {
		return wrap("update job", err)
	}
	if tag.RowsAffected() == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "no job %q", j.ID)
	}
	return nil
}

// inSavepoint runs one statement in a savepoint, rolled back to if the
// statement fails, so that its failure does not abort the transaction.
func (t *Tx) inSavepoint(ctx context.Context, q string, args ...any) (pgconn.CommandTag, error) {
	sp, err := t.tx.Begin(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := sp.Exec(ctx, q, args...)
	if err != nil {
		if rerr := sp.Rollback(ctx); rerr != nil {
			return tag, errors.Join(err, rerr)
		}
		return tag, err
	}
	return tag, sp.Commit(ctx)
}

// PutAgent stores a definition under its name, replacing one there.
func (t *Tx) PutAgent(ctx context.Context, a *paddock.AgentRecord) error {
	b, err := json.Marshal(a.Definition)
	if err != nil {
		return wrap("encode agent", err)
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO agents (name, hash, definition, source, updated_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (name) DO UPDATE SET hash = excluded.hash, definition = excluded.definition, source = excluded.source, updated_at = excluded.updated_at`,
		a.Definition.Name, a.Hash, string(b), a.Source, a.UpdatedAt.UTC())
	return wrap("put agent", err)
}

func scanAgent(row scanner) (*paddock.AgentRecord, error) {
	var a paddock.AgentRecord
	var def string
	if err := row.Scan(&a.Hash, &def, &a.Source, &a.UpdatedAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(def), &a.Definition); err != nil {
		return nil, fmt.Errorf("agent definition: %w", err)
	}
	a.UpdatedAt = a.UpdatedAt.UTC()
	return &a, nil
}

// Agent returns a stored definition.
func (t *Tx) Agent(ctx context.Context, name string) (*paddock.AgentRecord, error) {
	a, err := scanAgent(t.tx.QueryRow(ctx, `SELECT hash, definition, source, updated_at FROM agents WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no agent definition named %q", name)
	}
	if err != nil {
		return nil, wrap("get agent", err)
	}
	return a, nil
}

// Agents returns the stored definitions by name.
func (t *Tx) Agents(ctx context.Context) ([]*paddock.AgentRecord, error) {
	return collect(ctx, t, "list agents", false, scanAgent, `SELECT hash, definition, source, updated_at FROM agents ORDER BY name`)
}

// DeleteAgent removes a stored definition; runs keep their copies.
func (t *Tx) DeleteAgent(ctx context.Context, name string) error {
	tag, err := t.tx.Exec(ctx, `DELETE FROM agents WHERE name = $1`, name)
	if err != nil {
		return wrap("delete agent", err)
	}
	if tag.RowsAffected() == 0 {
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
	tag, err := t.tx.Exec(ctx, `INSERT INTO access_requests (run_id, id, state, body, created_at)
		SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM runs WHERE id = $1) ON CONFLICT DO NOTHING`,
		r.RunID, r.ID, string(r.State), string(b), r.CreatedAt.UTC())
	if sqlState(err) == foreignKeyViolation {
		return paddock.Errorf(paddock.CodeNotFound, "no run %q", r.RunID)
	}
	if err != nil {
		return wrap("create access request", err)
	}
	if tag.RowsAffected() == 0 {
		ok, err := exists(ctx, t, `SELECT 1 FROM runs WHERE id = $1`, r.RunID)
		if err != nil {
			return wrap("create access request", err)
		}
		if !ok {
			return paddock.Errorf(paddock.CodeNotFound, "no run %q", r.RunID)
		}
		return paddock.Errorf(paddock.CodeConflict, "run %s already has a request %s", r.RunID, r.ID)
	}
	return nil
}

// List returns a run's access requests, oldest first.
func (q accessRequests) List(ctx context.Context, runID string) ([]*paddock.AccessRequest, error) {
	t := q.t
	return collect(ctx, t, "list access requests", false, scanAccessRequest, accessRequestsOfRun, runID)
}

// accessRequestsOfRun selects a run's access requests ($1), oldest first.
const accessRequestsOfRun = `SELECT body FROM access_requests WHERE run_id = $1 ORDER BY created_at, id`

func scanAccessRequest(row scanner) (*paddock.AccessRequest, error) {
	var body string
	if err := row.Scan(&body); err != nil {
		return nil, err
	}
	r := new(paddock.AccessRequest)
	if err := json.Unmarshal([]byte(body), r); err != nil {
		return nil, err
	}
	return r, nil
}

// Update writes a request's decision.
func (q accessRequests) Update(ctx context.Context, r *paddock.AccessRequest) error {
	t := q.t
	b, err := json.Marshal(r)
	if err != nil {
		return wrap("encode access request", err)
	}
	tag, err := t.tx.Exec(ctx, `UPDATE access_requests SET state = $1, body = $2 WHERE run_id = $3 AND id = $4`,
		string(r.State), string(b), r.RunID, r.ID)
	if err != nil {
		return wrap("update access request", err)
	}
	if tag.RowsAffected() == 0 {
		return paddock.Errorf(paddock.CodeNotFound, "run %s has no request %s", r.RunID, r.ID)
	}
	return nil
}
