package lifecycle

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/agent"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/internal/lazyre"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/workspace"
)

// Runs takes a run from its request to its cleanup: create, retain, reject, remove, checkpoint and resume, and the run's events.
type Runs struct {
	*kernel
	// the services it calls
	broker   *Broker
	changes  *Changes
	executor *executor
	jobs     *Jobs
	nodes    *Nodes
	projects *Projects
	reviews  *Reviews
	views    *views
}

// Create makes a run and its workspace and returns it ready. Bad input is
// refused before anything is written; a failure while preparing rolls the
// workspace back and leaves the run cleaned with the reason recorded.
func (rs *Runs) Create(ctx context.Context, o paddock.CreateRunRequest) (*paddock.Run, error) {
	def, err := rs.agentForCreate(ctx, o)
	if err != nil {
		return nil, err
	}
	r, err := rs.create(ctx, newRun{req: o, def: def})
	if err == nil && o.IncludeUncommitted {
		err = rs.uncommitted.borrow(r, rs.reviews.runGitDir(r))
	}
	return r, err
}

// agentForCreate is the definition a run is made with: the one it names
// (stored, or built in), or the built-in of its access mode.
func (rs *Runs) agentForCreate(ctx context.Context, o paddock.CreateRunRequest) (*paddock.AgentDefinition, error) {
	access, err := paddock.ParseAccess(o.Access)
	if err != nil {
		return nil, err
	}
	if o.Agent == "" {
		return agent.ForAccess(access), nil
	}
	rec, err := rs.projects.Agent(ctx, o.Agent)
	if err != nil {
		return nil, err
	}
	if o.Access != "" && string(access) != cmp.Or(rec.Definition.Workspace, string(paddock.AccessWrite)) {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "agent %s has workspace %s; access %s contradicts it (leave access out)",
			o.Agent, cmp.Or(rec.Definition.Workspace, "write"), access)
	}
	return &rec.Definition, nil
}

// newRun is what a run is made of: the request, the definition it runs
// (its access and secrets come from it, and the run keeps a copy), and
// what only the daemon gives.
type newRun struct {
	req paddock.CreateRunRequest
	def *paddock.AgentDefinition
	// id is the run's id when the caller derives it (a flow's step, so
	// that a step finished after a crash finds its run; an import's);
	// a new one if empty.
	id string
	// review makes it a review run of another run's change set.
	review *paddock.ReviewOf
}

// runShape is a new run's request checked and settled: nothing is written
// before it is.
type runShape struct {
	kind   paddock.WorkspaceKind
	chose  string // why auto became kind, if it did
	policy paddock.CleanupPolicy
	access paddock.Access
}

// runBase is where a new run's workspace starts: its project, the
// revision, and the directory it is made in.
type runBase struct {
	project *paddock.Project
	rev     *gitx.Resolved
	root    string
}

// create is the one way a run is made, whoever asks (Create, bootstrap,
// a flow, a review, the queue's test run, an import): checked, recorded,
// its workspace prepared, and ready.
func (rs *Runs) create(ctx context.Context, n newRun) (*paddock.Run, error) {
	if n.id == "" {
		n.id = newID()
	}
	shape, err := rs.settle(ctx, &n)
	if err != nil {
		return nil, err
	}
	if n.review != nil {
		// What the reviewed run masks, this one masks: its workspace holds
		// the reviewed change set, with the real bytes.
		reviewed, err := rs.Run(ctx, n.review.Run)
		if err != nil {
			return nil, err
		}
		review := *n.review
		review.Masks = secretNamesOf(reviewed)
		n.review = &review
	}
	if shape.access == paddock.AccessNone {
		return rs.createWithoutWorkspace(ctx, n)
	}
	prov, err := rs.provider(shape.kind)
	if err != nil {
		return nil, err
	}
	ctx, base, err := rs.locate(ctx, &n, shape)
	if err != nil {
		return nil, err
	}
	t := now()
	id, p := n.id, base.project
	r := &paddock.Run{ID: id, Project: p.Name, Access: shape.access, Agent: n.def, AgentHash: n.def.Hash(), Secrets: n.req.Secrets, IncludeIgnored: n.req.IncludeIgnored, CreatedAt: t, ReviewOf: n.review, Workspace: &paddock.Workspace{
		ID: "w-" + id[2:], RunID: id, Kind: shape.kind, Root: base.root, Fingerprint: p.Fingerprint,
		BaseRef: n.req.Base, BaseRevision: base.rev.SHA, Branch: base.rev.Branch,
		State: paddock.StateRequested, CleanupPolicy: shape.policy, CreatedAt: t, UpdatedAt: t,
	}}
	if err := rs.recordCreated(ctx, r, n, shape); err != nil {
		return nil, err
	}
	return rs.prepare(ctx, r, p, prov)
}

// settle checks n's request and completes it from its definition: its
// access, secrets, credentials and mounts; and settles its kind.
func (rs *Runs) settle(ctx context.Context, n *newRun) (runShape, error) {
	o, def := &n.req, n.def
	o.Access = cmp.Or(def.Workspace, string(paddock.AccessWrite))
	for _, s := range def.Secrets {
		if !slices.Contains(o.Secrets, s) {
			o.Secrets = append(o.Secrets, s)
		}
	}
	var shape runShape
	kind, err := paddock.ParseKind(cmp.Or(o.Kind, string(cmp.Or(rs.DefaultKind, paddock.KindAuto))))
	if err != nil {
		return shape, err
	}
	shape.kind, shape.chose = rs.views.resolveKind(ctx, kind)
	if shape.chose == "" && shape.kind == paddock.KindOverlay {
		if err := rs.views.overlayWorks(ctx); err != nil {
			return shape, err // asked for by name: refused, with the reason
		}
	}
	if shape.policy, err = paddock.ParseCleanupPolicy(o.CleanupPolicy); err != nil {
		return shape, err
	}
	if shape.access, err = paddock.ParseAccess(o.Access); err != nil {
		return shape, err
	}
	if err := rs.checkSecrets(o.Secrets); err != nil {
		return shape, err
	}
	if n.def = withCredentials(def, o.Credentials); len(o.Credentials) > 0 {
		if err := agent.CheckCredentials(n.def.Credentials); err != nil {
			return shape, err
		}
	}
	if n.def = withMounts(n.def, o.Mounts); len(n.def.Mounts) > 0 {
		root := ""
		if p, err := rs.Project(ctx, o.Project); err == nil {
			root = p.Root
		}
		if err := hostMounts(n.def.Mounts, stateDirs(rs.WorkspacesDir, rs.ArtifactsDir), root); err != nil {
			return shape, err
		}
	}
	return shape, nil
}

// locate finds where n's workspace starts: its project's repository
// checked, the base resolved (with the checkout's uncommitted changes if
// asked; ctx then carries them), and the directory it is made in.
func (rs *Runs) locate(ctx context.Context, n *newRun, shape runShape) (context.Context, runBase, error) {
	var b runBase
	o := &n.req
	p, err := rs.Project(ctx, o.Project)
	if err != nil {
		return ctx, b, err
	}
	b.project = p
	repo, err := rs.projects.checkRepo(ctx, p)
	if err != nil {
		return ctx, b, err
	}
	if o.Base == "" {
		o.Base = "HEAD"
	}
	base, err := rs.Git.Resolve(ctx, p.Root, o.Base)
	if err != nil {
		return ctx, b, err
	}
	if o.IncludeUncommitted {
		head := base.SHA
		if ctx, err = rs.uncommitted.include(ctx, n.id, shape.kind, o.Base, p, repo.CommonDir, &base.SHA); err != nil {
			return ctx, b, err
		}
		if base.SHA != head {
			base.Branch = "" // a commit of no branch's: ls must not name one
		}
	}
	b.rev = base
	b.root = filepath.Join(rs.WorkspacesDir, n.id)
	if shape.kind == paddock.KindOperatorDir {
		if b.root, err = operatorDir(o.Dir, repo); err != nil {
			return ctx, b, err
		}
	} else if o.Dir != "" {
		return ctx, b, paddock.Errorf(paddock.CodeBadRequest, "a directory can be handed over only with kind operator_dir")
	}
	return ctx, b, nil
}

// recordCreated records run r, requested, and moves it to preparing, in
// one transaction; an operator_dir run takes its project's lock there.
func (rs *Runs) recordCreated(ctx context.Context, r *paddock.Run, n newRun, shape runShape) error {
	// Not under m.mu: preparing a large clone takes seconds, and gc needs
	// no more than the record, which exists before the directory does (it
	// lists directories first, then reads records). A base's snapshot is
	// guarded by the overlay provider's own lock, which gc takes too.
	w := r.Workspace
	return rs.update(ctx, func(tx paddock.Tx) error {
		if err := tx.CreateRun(ctx, r); err != nil {
			return err
		}
		ev := map[string]string{"project": r.Project, "kind": string(w.Kind), "base_ref": w.BaseRef, "base_revision": w.BaseRevision, "root": w.Root,
			"agent": n.def.Name, "agent_hash": r.AgentHash}
		if shape.chose != "" {
			ev["kind_chosen"] = shape.chose
		}
		if n.review != nil {
			ev["review_of"], ev["review_hash"] = n.review.Run, n.review.Hash
		}
		if _, err := tx.AppendEvent(ctx, r.ID, paddock.EventRunCreated, byPrincipal(ctx, ev)); err != nil {
			return err
		}
		if needsLock(w.Kind) {
			if err := tx.AcquireLock(ctx, &paddock.Lock{Project: r.Project, RunID: r.ID, AcquiredAt: r.CreatedAt}); err != nil {
				return err
			}
			if _, err := tx.AppendEvent(ctx, r.ID, paddock.EventLockAcquired, map[string]string{"project": r.Project}); err != nil {
				return err
			}
		}
		return rs.transition(ctx, tx, r, paddock.StatePreparing, "")
	})
}

// prepare makes run r's workspace and home and records it ready; a failure
// rolls them back and leaves the run cleaned with the reason recorded.
func (rs *Runs) prepare(ctx context.Context, r *paddock.Run, p *paddock.Project, prov paddock.WorkspaceProvider) (*paddock.Run, error) {
	id, w := r.ID, r.Workspace
	rs.log().Info("preparing workspace", "run", id, "kind", w.Kind, "base", w.BaseRevision)
	if perr := prov.Prepare(rs.progress(ctx, id), p, w); perr != nil {
		rs.log().Error("prepare failed", "run", id, "err", perr)
		reason := "preparing failed; rolled back"
		if err := rs.cleanup(context.WithoutCancel(ctx), r, p, reason); err != nil {
			rs.log().Error("rollback failed", "run", id, "err", err)
		}
		var pe *paddock.Error
		if errors.As(perr, &pe) {
			return nil, perr
		}
		return nil, internal("preparing the workspace failed", perr)
	}
	if rs.SandboxUID != 0 && w.Kind != paddock.KindOperatorDir {
		if err := chownTree(w.Root, rs.SandboxUID); err != nil {
			rs.log().Error("handing the workspace to the sandbox user failed", "run", id, "err", err)
		}
	}
	rs.changes.seed(ctx, r, p)
	if err := rs.views.prepareAux(r); err != nil {
		rs.log().Error("making the run's home failed", "run", id, "err", err)
		if cerr := rs.cleanup(context.WithoutCancel(ctx), r, p, "preparing failed; rolled back"); cerr != nil {
			rs.log().Error("rollback failed", "run", id, "err", cerr)
		}
		return nil, internal("making the run's home failed", err)
	}
	// The workspace is made: it is recorded ready even if the client has
	// gone, rather than left "preparing" until the next start rolls it back.
	done := context.WithoutCancel(ctx)
	if err := rs.update(done, func(tx paddock.Tx) error {
		return rs.transition(done, tx, r, paddock.StateReady, "")
	}); err != nil {
		return nil, err
	}
	// With nodes, a run is adoptable from its start: its first checkpoint
	// is its base, unchanged (an empty change set, not computed).
	rs.nodes.storeCheckpointOf(done, id, "created", &paddock.ChangeSet{RunID: id, BaseRevision: w.BaseRevision})
	return rs.Run(done, id)
}

// progress is ctx with a workspace provider's progress logged and recorded
// as run id's workspace.progress events (a create's, an adoption's).
func (rs *Runs) progress(ctx context.Context, id string) context.Context {
	return workspace.WithProgress(ctx, func(msg string) {
		rs.log().Info(msg, "run", id)
		if err := rs.record(ctx, id, paddock.EventProgress, map[string]string{"message": msg}); err != nil {
			rs.log().Error("cannot record progress", "run", id, "err", err)
		}
	})
}

// writeFile writes, or with content nil deletes, one file of run id's
// through the working tools (write, delete), so that the run's protections
// hold: how an import and an adoption restore a run's files.
func (rs *Runs) writeFile(ctx context.Context, id, path string, content []byte, executable bool) error {
	tool, args := "delete", map[string]string{"path": path}
	if content != nil {
		mode := "0644"
		if executable {
			mode = "0755"
		}
		tool, args = "write", map[string]string{"path": path, "content_base64": base64.StdEncoding.EncodeToString(content), "mode": mode}
	}
	raw, _ := json.Marshal(args)
	_, err := rs.broker.CallTool(ctx, id, tool, raw)
	return err
}

// chownTree gives every entry under root to uid, without following links.
func chownTree(root string, uid int) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// createWithoutWorkspace makes a run of access none: no workspace, no
// working tools, nothing on disk; the agent only converses and picks from its menu.
func (rs *Runs) createWithoutWorkspace(ctx context.Context, n newRun) (*paddock.Run, error) {
	o, def := n.req, n.def
	if o.Kind != "" || o.Base != "" || o.Dir != "" || o.CleanupPolicy != "" {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "a run with access none has no workspace; kind, base, dir and cleanup do not apply")
	}
	p, err := rs.Project(ctx, o.Project)
	if err != nil {
		return nil, err
	}
	r := &paddock.Run{ID: n.id, Project: p.Name, Access: paddock.AccessNone, Agent: def, AgentHash: def.Hash(), Secrets: o.Secrets, CreatedAt: now()}
	err = rs.update(ctx, func(tx paddock.Tx) error {
		if err := tx.CreateRun(ctx, r); err != nil {
			return err
		}
		_, err := tx.AppendEvent(ctx, r.ID, paddock.EventRunCreated, byPrincipal(ctx, map[string]string{"project": p.Name, "access": string(paddock.AccessNone),
			"agent": def.Name, "agent_hash": r.AgentHash}))
		return err
	})
	if err != nil {
		return nil, err
	}
	return rs.Run(ctx, r.ID)
}

var secretName = lazyre.New(`^[A-Z_][A-Z0-9_]{0,63}$`)

// checkSecrets refuses names that are malformed or that the daemon lacks,
// and values too short to be masked.
func (rs *Runs) checkSecrets(names []string) error {
	for _, n := range names {
		if !secretName.MatchString(n) {
			return paddock.Errorf(paddock.CodeBadRequest, "secret name %q: use upper-case letters, digits and _", n)
		}
		if rs.Secret == nil {
			return paddock.Errorf(paddock.CodeBadRequest, "no secrets are configured on this daemon")
		}
		v, ok := rs.readSecret(n)
		if !ok {
			return paddock.Errorf(paddock.CodeBadRequest, "no secret named %s is configured on this daemon", n)
		}
		if err := maskable(n, v); err != nil {
			return err
		}
	}
	return nil
}

// maskable refuses a secret whose value is too short to be masked in what
// paddock returns or records: handing it to a run would leak it in clear.
// The value itself is never told.
func maskable(name, value string) error {
	if !redact.Maskable(value) {
		return paddock.Errorf(paddock.CodeBadRequest, "secret %s is shorter than %d characters, too short to be masked in outputs (it would mask ordinary text); paddock does not hand over a secret it cannot mask: give it a longer value", name, redact.MinLen).
			WithRule("secret_too_short")
	}
	return nil
}

// operatorDir resolves the directory an operator hands over to an
// operator_dir run. It is never the project's active checkout, nor inside
// it, nor above it, nor its git directory: an agent's write there would land
// in the user's working tree and stay after a reject (record 002: the active
// checkout is never an agent's scratchpad). Symbolic links are resolved
// first, and each directory on the way up is compared by identity as well
// as by name, so a link or a bind mount of the checkout is refused too.
func operatorDir(dir string, repo *gitx.Repo) (string, error) {
	if dir == "" {
		return "", paddock.Errorf(paddock.CodeBadRequest,
			"an operator_dir run needs a directory to hand over (dir, or --dir on the CLI); it cannot be the project's checkout %s, which an agent must never write", repo.Root)
	}
	if !filepath.IsAbs(dir) {
		return "", paddock.Errorf(paddock.CodeBadRequest, "operator directory %q must be absolute", dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", paddock.Errorf(paddock.CodeBadRequest, "operator directory %s does not exist", dir)
	}
	guarded := []string{repo.Root}
	if repo.CommonDir != "" {
		if c, err := filepath.EvalSymlinks(repo.CommonDir); err == nil {
			guarded = append(guarded, c)
		}
	}
	for _, g := range guarded {
		if overlaps(real, g) {
			what := "the project's checkout"
			if g != repo.Root {
				what = "the project's git directory"
			}
			return "", paddock.Errorf(paddock.CodeBadRequest,
				"operator directory %s is %s %s, is inside it or holds it: hand over a directory of its own (an agent's writes there would stay in your checkout after a reject)", dir, what, g).
				WithRule("operator_dir_is_checkout")
		}
	}
	return real, nil
}

// overlaps reports whether a and b (both without links) are the same
// directory or one holds the other, by name or by identity (a bind mount
// shows one directory under two names).
func overlaps(a, b string) bool {
	within := func(in, out string) bool {
		outFi, err := os.Stat(out)
		for p := in; ; p = filepath.Dir(p) {
			if p == out {
				return true
			}
			if err == nil {
				if fi, err := os.Stat(p); err == nil && os.SameFile(fi, outFi) {
					return true
				}
			}
			if p == filepath.Dir(p) {
				return false
			}
		}
	}
	return within(a, b) || within(b, a)
}

// cleanup moves r's workspace to cleanup_pending (through rejected or
// orphaned as the table requires), removes its files and marks it cleaned.
func (rs *Runs) cleanup(ctx context.Context, r *paddock.Run, p *paddock.Project, reason string) error {
	if r.Workspace.State != paddock.StateCleanupPending {
		if err := rs.update(ctx, func(tx paddock.Tx) error {
			return rs.transition(ctx, tx, r, paddock.StateCleanupPending, reason)
		}); err != nil {
			return err
		}
	}
	return rs.finishCleanup(ctx, r, p)
}

// finishCleanup removes the files of a workspace in cleanup_pending and marks
// it cleaned. It is safe to repeat after a crash.
func (rs *Runs) finishCleanup(ctx context.Context, r *paddock.Run, p *paddock.Project) error {
	w := r.Workspace
	if w.State != paddock.StateCleanupPending || !w.RetainedAt.IsZero() {
		// Unreachable through the table; kept as the last guard before deletion.
		return paddock.Errorf(paddock.CodeConflict, "workspace of run %s is %s; refusing to delete it", r.ID, w.State)
	}
	prov, err := rs.provider(w.Kind)
	if err != nil {
		return err
	}
	rs.executor.releaseHarness(r.ID) // it holds the workspace in its view
	if p == nil {
		// The project record can be gone only if the run is too; remove what is ours.
		p = &paddock.Project{Name: r.Project}
	}
	if err := prov.Remove(ctx, p, w); err != nil {
		return internal("removing the workspace failed; it stays cleanup_pending and is retried by gc or on restart", err)
	}
	if err := rs.views.removeAux(r.ID); err != nil {
		return internal("removing the run's home failed; it stays cleanup_pending and is retried by gc or on restart", err)
	}
	// The change-set cache (an index and blobs of the workspace) goes with
	// it, and so do the diffs computed of it (a submitted one is kept
	// beside its change set).
	for _, dir := range []string{"gitcache", "diffs"} {
		if err := os.RemoveAll(filepath.Join(rs.runDir(r.ID), dir)); err != nil {
			return internal("removing the workspace's change-set cache failed; retried by gc or on restart", err)
		}
	}
	if err := rs.update(ctx, func(tx paddock.Tx) error {
		return rs.transition(ctx, tx, r, paddock.StateCleaned, w.Reason)
	}); err != nil {
		return err
	}
	rs.forgetRun(r.ID)
	return nil
}

// Runs lists runs.
func (rs *Runs) Runs(ctx context.Context, f paddock.RunFilter) (out []*paddock.Run, err error) {
	err = rs.Store.View(ctx, func(tx paddock.Tx) error {
		out, err = tx.Runs(ctx, f)
		return err
	})
	for _, r := range out {
		rs.describe(r)
	}
	return out, err
}

// step applies one transition to a run in its own transaction.
func (rs *Runs) step(ctx context.Context, id string, to paddock.WorkspaceState, reason string, also func(paddock.Tx, *paddock.Run) error) (*paddock.Run, error) {
	var r *paddock.Run
	err := rs.update(ctx, func(tx paddock.Tx) error {
		var err error
		if r, err = tx.Run(ctx, id); err != nil {
			return err
		}
		if r.Workspace == nil {
			return paddock.Errorf(paddock.CodeConflict, "run %s has no workspace", id)
		}
		if also != nil {
			if err := also(tx, r); err != nil {
				return err
			}
		}
		return rs.transition(ctx, tx, r, to, reason)
	})
	return r, err
}

// Retain keeps a workspace for good: no later path deletes it.
func (rs *Runs) Retain(ctx context.Context, id string) (*paddock.Run, error) {
	r, err := rs.step(ctx, id, paddock.StateRetained, "retained by operator", nil)
	if err != nil {
		return nil, err
	}
	rs.markRetained(r.Workspace)
	rs.executor.releaseHarness(id) // a retained run runs nothing more
	return rs.Run(ctx, id)
}

// Reject discards a run's result. Under the on_reject policy its files are
// removed at once; under manual they stay until rm or gc.
func (rs *Runs) Reject(ctx context.Context, id string) (*paddock.Run, error) {
	if err := rs.jobs.refuseWhileJobRuns(ctx, id); err != nil {
		return nil, err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.RunAPI != nil {
		rs.RunAPI.Close(id) // a rejected run's agent has nothing more to ask
	}
	r, err := rs.step(ctx, id, paddock.StateRejected, "rejected", nil)
	if err != nil {
		return nil, err
	}
	rs.executor.releaseHarness(id)
	if r.Workspace.CleanupPolicy == paddock.CleanupOnReject {
		_, p, err := rs.runAndProject(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := rs.cleanup(ctx, r, p, "rejected"); err != nil {
			return nil, err
		}
	}
	return rs.Run(ctx, id)
}

// Remove deletes a run's workspace (rejecting it first if it was still
// undecided) and hides the run from listings. Its record and events stay.
// It refuses a retained workspace, an active one and one being prepared.
func (rs *Runs) Remove(ctx context.Context, id string) (*paddock.Run, error) {
	if err := rs.jobs.refuseWhileJobRuns(ctx, id); err != nil {
		return nil, err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r, err := rs.Run(ctx, id); err == nil && r.Workspace == nil {
		return rs.markRemoved(ctx, id)
	}
	r, p, err := rs.runAndProject(ctx, id)
	if err != nil {
		return nil, err
	}
	w := r.Workspace
	switch {
	case !w.RetainedAt.IsZero():
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s is retained; paddock never deletes a retained workspace (it is at %s)", id, w.Root)
	case w.State == paddock.StateActive:
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s is active; checkpoint or reject it first", id)
	case w.State == paddock.StateRequested || w.State == paddock.StatePreparing:
		return nil, paddock.Errorf(paddock.CodeBusy, "run %s is being prepared; try again when it is ready", id)
	}
	if w.State == paddock.StateReady || w.State == paddock.StateCheckpointed {
		if err := rs.update(ctx, func(tx paddock.Tx) error {
			return rs.transition(ctx, tx, r, paddock.StateRejected, "removed")
		}); err != nil {
			return nil, err
		}
	}
	if w.State != paddock.StateCleaned {
		if err := rs.cleanup(ctx, r, p, "removed"); err != nil {
			return nil, err
		}
	}
	return rs.markRemoved(ctx, id)
}

func (rs *Runs) markRemoved(ctx context.Context, id string) (*paddock.Run, error) {
	err := rs.update(ctx, func(tx paddock.Tx) error {
		if err := tx.MarkRunRemoved(ctx, id); err != nil {
			return err
		}
		_, err := tx.AppendEvent(ctx, id, paddock.EventRunRemoved, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rs.Run(ctx, id)
}

// Checkpoint records the workspace's content so that it can resume later or
// its drift be explained, and detaches the session (active → checkpointed).
func (rs *Runs) Checkpoint(ctx context.Context, id, reason string) (*paddock.Run, error) {
	return rs.checkpoint(ctx, id, reason, false)
}

// checkpoint is Checkpoint; unread, an overlay run with no sandbox running
// is checkpointed without reading its content (which would start one): a
// daemon that stops with many idle runs does not start a sandbox for each.
func (rs *Runs) checkpoint(ctx context.Context, id, reason string, unread bool) (*paddock.Run, error) {
	r, err := rs.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.Workspace == nil || !paddock.CanTransition(r.Workspace.State, paddock.StateCheckpointed) {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s is %s; only a ready or active run can be checkpointed", id, r.State())
	}
	// The run's own token may checkpoint it: the reason is an agent's text,
	// recorded in the run and its events.
	reason = rs.redactor(r).String(reason)
	var cp *paddock.Checkpoint
	if unread && r.Workspace.Kind == paddock.KindOverlay && rs.Harnesses != nil && !rs.Harnesses.Live(id) {
		// Its layer changes only through a sandbox: none runs, so nothing
		// is read; resume reads it, and reports no drift against this.
		cp = &paddock.Checkpoint{At: now(), Reason: reason + " (no sandbox was running: its content was not read)"}
	} else if cp, err = rs.takeCheckpoint(ctx, r.Workspace, reason); err != nil {
		return nil, err
	}
	if _, err := rs.step(ctx, id, paddock.StateCheckpointed, reason, func(tx paddock.Tx, r *paddock.Run) error {
		r.Workspace.Checkpoint = cp
		_, err := tx.AppendEvent(ctx, id, paddock.EventCheckpoint, cp)
		return err
	}); err != nil {
		return nil, err
	}
	rs.nodes.storeCheckpoint(ctx, id, "checkpoint")
	return rs.Run(ctx, id)
}

func (rs *Runs) takeCheckpoint(ctx context.Context, w *paddock.Workspace, reason string) (*paddock.Checkpoint, error) {
	root := w.Root
	if w.Kind == paddock.KindOverlay {
		r, err := rs.Run(ctx, w.RunID)
		if err != nil {
			return nil, err
		}
		if root, err = rs.views.viewDir(ctx, r, nil); err != nil {
			return nil, err
		}
	}
	digest, files, err := workspace.Digest(ctx, root)
	if err != nil {
		return nil, internal("reading the workspace for a checkpoint failed", err)
	}
	return &paddock.Checkpoint{At: now(), Digest: digest, Files: files, Reason: reason}, nil
}

// Resume attaches a session again (ready or checkpointed → active). If the
// workspace's content differs from its checkpoint, the drift is recorded as
// an event and reported.
func (rs *Runs) Resume(ctx context.Context, id string) (*paddock.ResumeResult, error) {
	return rs.resume(ctx, id, "operator")
}

// resume is Resume on behalf of by (operator, or the run's agent).
func (rs *Runs) resume(ctx context.Context, id, by string) (*paddock.ResumeResult, error) {
	r, err := rs.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.Workspace == nil || !paddock.CanTransition(r.Workspace.State, paddock.StateActive) {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s is %s; only a ready or checkpointed run can resume", id, r.State())
	}
	drift := false
	var now *paddock.Checkpoint
	if cp := r.Workspace.Checkpoint; cp != nil && cp.Digest != "" {
		if now, err = rs.takeCheckpoint(ctx, r.Workspace, "resume"); err != nil {
			return nil, err
		}
		drift = now.Digest != cp.Digest
	}
	if _, err := rs.step(ctx, id, paddock.StateActive, "resumed", func(tx paddock.Tx, r *paddock.Run) error {
		data := map[string]any{"drift": drift, "by": by}
		if drift {
			data["checkpoint_digest"] = r.Workspace.Checkpoint.Digest
			data["current_digest"] = now.Digest
		}
		_, err := tx.AppendEvent(ctx, id, paddock.EventResumed, data)
		return err
	}); err != nil {
		return nil, err
	}
	r, err = rs.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	return &paddock.ResumeResult{Run: r, Drift: drift}, nil
}

// Events returns up to limit events of a run after seq after.
func (rs *Runs) Events(ctx context.Context, id string, after int64, limit int) (evs []*paddock.Event, err error) {
	err = rs.Store.View(ctx, func(tx paddock.Tx) error {
		if _, err := tx.Run(ctx, id); err != nil {
			return err
		}
		evs, err = tx.Events(ctx, id, after, limit)
		return err
	})
	return evs, err
}

// WaitEvents is Events, but when there are none yet it waits for the next
// append until ctx ends, then returns what there is (possibly nothing).
func (rs *Runs) WaitEvents(ctx context.Context, id string, after int64, limit int) ([]*paddock.Event, error) {
	for {
		ch := rs.waitChan()
		evs, err := rs.Events(ctx, id, after, limit)
		if err != nil && ctx.Err() != nil {
			return nil, nil // the wait ended while the read ran: nothing yet
		}
		if err != nil || len(evs) > 0 {
			return evs, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return evs, nil
		}
	}
}

// byPrincipal adds to a run.created event's data the principal whose call
// made the run, if a principal's did (an approval policy reads it).
func byPrincipal(ctx context.Context, ev map[string]string) map[string]string {
	if p := paddock.PrincipalOf(ctx); p != "" {
		ev["principal"] = p
	}
	return ev
}
