package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/attribution"
	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/workspace"
	"go.opentelemetry.io/otel/attribute"
)

// Changes keeps change sets: submit, approve, and apply to a branch or into the working tree.
type Changes struct {
	*kernel
	// the services it calls
	flows    *Flows
	projects *Projects
	queue    *Queue
	reviews  *Reviews
	views    *views
	policies *Policies
}

// ChangeSet computes the run's change set against its base, now.
func (ch *Changes) ChangeSet(ctx context.Context, id string) (*paddock.ChangeSet, error) {
	r, p, err := ch.runAndProject(ctx, id)
	if err != nil {
		return nil, err
	}
	switch r.Workspace.State {
	case paddock.StateReady, paddock.StateActive, paddock.StateCheckpointed, paddock.StateRetained:
	default:
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s is %s; it has no workspace to compare", id, r.Workspace.State)
	}
	repo, err := ch.views.repoOf(ctx, p)
	if err != nil {
		return nil, err
	}
	dir, err := ch.views.viewDir(ctx, r, p)
	if err != nil {
		return nil, err
	}
	limits := ch.ChangeSetLimits.WithDefaults()
	pol, err := ch.views.policy(ctx, p)
	if err != nil {
		return nil, err
	}
	// The base (names that collide with its paths, its .envrc files) from
	// its checkout where the run has one, from git otherwise; the
	// project's own .envrc files, which direnv runs, from its work tree.
	objects := ch.reviews.objectsCtx(ctx, r)
	trees := changeset.Trees{Base: ch.Git.Tree(objects, repo.CommonDir, r.Workspace.BaseRevision), Host: changeset.DirTree(p.Root)}
	// The diff goes to a file as git writes it: a change set is never
	// held in memory whole, whatever its size. The change set is built
	// beside it (changeset.Watch): the entries are labelled and the diff
	// scanned while git writes the rest.
	store := ch.changeSets(id)
	patch, err := store.CreateDiff()
	if err != nil {
		return nil, internal("computing the change set failed", err)
	}
	defer func() {
		patch.Close()
		os.Remove(patch.Name()) // unless it was kept under its hash
	}()
	opts := gitx.DiffOptions{IncludeIgnored: r.IncludeIgnored}
	diff := func() (*gitx.Snapshot, error) {
		return ch.Git.DiffWorkTree(objects, repo.CommonDir, dir, r.Workspace.BaseRevision, opts)
	}
	var upper *workspace.Upper
	if r.Workspace.Kind == paddock.KindOverlay {
		upper, err = ch.views.overlayUpper(r)
	}
	switch {
	case err != nil:
	case upper != nil && len(upper.Paths) <= gitx.MaxDiffPaths:
		// Only what the upper layer names can differ from the base; its
		// size is bounded before anything of it is copied or rendered.
		if err = limits.CheckCounts(changeset.Counts{Files: upper.Files, Bytes: upper.Bytes, Largest: upper.Largest, LargestSize: upper.LargestSize}); err != nil {
			break
		}
		opts.Cache, opts.Content = filepath.Join(ch.runDir(id), "gitcache", "overlay"), upper.Bytes
		if ov, ok := ch.overlayProvider(); ok {
			opts.BaseFiles = ov.LayersOf(r.Project, r.Workspace).Lower
			opts.Holds = layerNames(upper, opts.BaseFiles)
			trees.Base = changeset.SnapshotTree(opts.BaseFiles) // the base's snapshot: it never changes
		}
		diff = func() (*gitx.Snapshot, error) {
			return ch.Git.DiffPaths(objects, repo.CommonDir, dir, r.Workspace.BaseRevision, upper.Paths, opts)
		}
	default:
		opts.Cache, opts.Exclude = ch.gitCache(id), cloneExclude
	}
	watch := changeset.NewWatch(patch, patch.Name(), r.Workspace.BaseRevision, dir, pol, ch.redactor(r), trees)
	defer watch.Close()
	opts.Patch = watch
	opts.Check = func(raw []byte, withheld []gitx.Withheld, size func(string) (int64, bool)) error {
		if err := limits.Check(raw, withheld, size); err != nil {
			return err
		}
		return watch.Entries(raw, withheld)
	}
	var snap *gitx.Snapshot
	if err == nil {
		snap, err = diff()
	}
	watch.Close()
	if err == nil {
		err = patch.Close()
	}
	if err != nil {
		var pe *paddock.Error
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, internal("computing the change set failed", err)
	}
	cs, err := watch.Build(id, snap)
	if err != nil {
		return nil, internal("computing the change set failed", err)
	}
	// Kept under its hash, for GET .../changeset/diff?hash= and for a
	// submission of it.
	if err := store.KeepDiff(cs); err != nil {
		return nil, internal("computing the change set failed", err)
	}
	// The diff is kept masked (credential shapes and the run's declared
	// secrets), and the hash binds it so: nothing shown or stored of a
	// change set holds a secret but the frozen blobs, which an apply writes.
	return cs, nil
}

// layerNames is DiffOptions.Holds for an overlay run: a directory of its
// merged view holds no name but its layers' (the upper's and a fork's
// frozen ones', read with upper, and its base snapshot's, kept in the
// daemon). It knows the directories on the way to upper's paths, the
// ones DiffPaths asks about; nil, and every directory listed, if the
// snapshot's names cannot be read.
func layerNames(upper *workspace.Upper, snapshot string) func(string) ([]string, bool) {
	ways := map[string]bool{"": true}
	for _, p := range upper.Paths {
		for d := path.Dir(p); d != "." && !ways[d]; d = path.Dir(d) {
			ways[d] = true
		}
	}
	lower, err := changeset.SnapshotTree(snapshot).Names(slices.Collect(maps.Keys(ways)))
	if err != nil {
		return nil
	}
	return func(dir string) ([]string, bool) {
		up, ok := upper.Names[dir]
		if !ok || !ways[dir] {
			return nil, false
		}
		return append(slices.Clip(up), lower[dir]...), true
	}
}

// cloneExclude are the top-level paths of a workspace no change set of
// the whole tree holds: what paddock stages for the run.
var cloneExclude = []string{".paddock"}

// gitCache is where a run's change sets keep what they make of its
// workspace between calls (gitx.DiffOptions.Cache).
func (ch *Changes) gitCache(id string) string { return filepath.Join(ch.runDir(id), "gitcache") }

// seed records what the files of run r's workspace hold, right after its
// checkout made them and before anything else can write them, so that
// its first change set reads only the files changed since (what git's
// index spares git status). A clone and a worktree are seeded (a
// worktree's checkout reads the project's config, and none is seeded
// where that config could convert what it writes: gitx.SeedStatCache);
// an overlay's change set reads only its upper layer. A seed that fails
// costs only time, and is logged.
func (ch *Changes) seed(ctx context.Context, r *paddock.Run, p *paddock.Project) {
	if k := r.Workspace.Kind; k != paddock.KindClone && k != paddock.KindWorktree {
		return
	}
	repo, err := ch.views.repoOf(ctx, p)
	n := 0
	if err == nil {
		w := r.Workspace
		n, err = gitx.SeedStatCache(ch.reviews.objectsCtx(ctx, r), ch.Git, repo.CommonDir, w.Root, w.BaseRevision, ch.gitCache(r.ID), filepath.Dir(w.Root), cloneExclude)
	}
	if err != nil {
		ch.log().Warn("recording the workspace's files as checked out failed; its first change set reads them all", "run", r.ID, "err", err)
		return
	}
	ch.log().Debug("recorded the workspace's files as checked out", "run", r.ID, "files", n)
}

// ChangeSetDiff opens the whole unified diff of the run's change set with
// this hash (the submitted one, or one computed lately); with no hash, of
// the change set as it is now. It returns the diff and its change set's hash.
func (ch *Changes) ChangeSetDiff(ctx context.Context, id, hash string) (io.ReadCloser, string, error) {
	if hash == "" {
		cs, err := ch.ChangeSet(ctx, id)
		if err != nil {
			return nil, "", err
		}
		d, err := changeset.OpenDiff(cs)
		if err != nil {
			return nil, "", internal("reading the diff failed", err)
		}
		return d, cs.Hash, nil
	}
	if _, err := ch.Run(ctx, id); err != nil {
		return nil, "", err
	}
	hash, err := changeset.ParseHash(hash)
	if err != nil {
		return nil, "", err
	}
	if cs, err := ch.frozen(id, hash); err == nil {
		d, err := changeset.OpenDiff(cs)
		if err != nil {
			return nil, "", internal("reading the diff failed", err)
		}
		return d, hash, nil
	}
	f, err := ch.changeSets(id).ComputedDiff(hash)
	if err != nil {
		return nil, "", paddock.Errorf(paddock.CodeNotFound, "run %s keeps no diff for change set %s; compute the change set again", id, hash)
	}
	return f, hash, nil
}

// Submit freezes the run's change set: it is stored as an artifact under
// its hash, and only that hash can be approved.
func (ch *Changes) Submit(ctx context.Context, id string) (*paddock.ChangeSet, error) {
	return ch.SubmitExpecting(ctx, id, "")
}

// SubmitExpecting is Submit that freezes the change set only if its hash,
// computed now, is expect (when expect is not empty): the change set a
// reviewer looked at, and nothing the workspace became since.
func (ch *Changes) SubmitExpecting(ctx context.Context, id, expect string) (*paddock.ChangeSet, error) {
	if err := ch.reviews.refuseReview(ctx, id, "submit"); err != nil {
		return nil, err
	}
	if err := ch.flows.refuseOffFlow(ctx, id); err != nil {
		return nil, err
	}
	if expect != "" {
		var err error
		if expect, err = changeset.ParseHash(expect); err != nil {
			return nil, err
		}
	}
	if s, err := ch.submission(id); err == nil && s.AppliedTo != "" {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s was applied already (%s)", id, s.AppliedTo)
	}
	cs, err := ch.ChangeSet(ctx, id)
	if err != nil {
		return nil, err
	}
	if expect != "" && cs.Hash != expect {
		// The new hash is not told: it names a change set nobody has seen.
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s's change set is no longer %s: the workspace changed since it was shown; nothing was frozen (review it again: paddock diff %s)", id, expect, id).
			WithDetail("expected", expect)
	}
	if len(cs.Entries) == 0 {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s changed nothing; there is nothing to submit", id)
	}
	if err := ch.lintAttribution(ctx, id, cs); err != nil {
		return nil, err
	}
	// The diff is kept beside the change set, the same file under a
	// second name: a large one is not copied. freezeBlobs makes it durable
	// with the blobs.
	store := ch.changeSets(id)
	if err := store.KeepFrozenDiff(cs); err != nil {
		return nil, internal("saving the change set failed", err)
	}
	if err := ch.freezeBlobs(ctx, id, cs); err != nil {
		return nil, err
	}
	if err := store.Save(cs); err != nil {
		return nil, internal("saving the change set failed", err)
	}
	s := &paddock.Submission{RunID: id, Hash: cs.Hash, SubmittedAt: now()}
	if err := ch.policies.store(s); err != nil {
		return nil, err
	}
	if err = ch.record(ctx, id, paddock.EventSubmitted, map[string]any{"hash": cs.Hash, "entries": len(cs.Entries)}); err != nil {
		return cs, err
	}
	ch.reviews.moveReviews(ctx, id, cs.Hash)
	ch.flows.moveFlowReviews(ctx, id, cs.Hash)
	// A verify that passed on this very hash already is what a project's
	// automatic approval waits for.
	if err := ch.policies.autoApprove(ctx, id, ""); err != nil {
		ch.log().Error("approving a submitted change set by the project's policy failed", "run", id, "hash", cs.Hash, "err", err)
	}
	return cs, nil
}

// Approve records the approval of hash by ctx's caller (paddock.CallerOf:
// a principal, or the operator, named by, when the call has none). Only
// the frozen hash can be approved. A wrong hash is refused without telling
// the right one: an approval that could be copied from an error message
// would approve something unseen. The project's approval policy decides
// who may approve (forbidden, with its rule, otherwise) and when the
// approvals are enough: the submission answered says so (Policy), and is
// approved (ApprovedBy) only then. The same approver's approval again
// changes nothing.
func (ch *Changes) Approve(ctx context.Context, id, hash, by string) (*paddock.Submission, error) {
	if err := ch.reviews.refuseReview(ctx, id, "be approved"); err != nil {
		return nil, err
	}
	hash, err := changeset.ParseHash(hash)
	if err != nil {
		return nil, err
	}
	_, p, err := ch.runAndProject(ctx, id)
	if err != nil {
		return nil, err
	}
	defer ch.policies.lock(id)()
	s, err := ch.submission(id)
	if err != nil {
		return nil, err
	}
	if s.AppliedTo != "" {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s was applied already (%s)", id, s.AppliedTo)
	}
	if s.PartOf != "" && hash == s.PartOf {
		// Some hunks were approved; now the whole change set is.
		s = &paddock.Submission{RunID: id, Hash: s.PartOf, SubmittedAt: s.SubmittedAt}
	}
	if hash != s.Hash {
		return nil, paddock.Errorf(paddock.CodeConflict, "%s differs from the hash of run %s's submitted change set; nothing was approved. Review the change set (paddock diff %s prints its hash after the entries) and approve the hash you reviewed", hash, id, id)
	}
	cs, err := ch.frozen(id, hash)
	if err != nil {
		return nil, internal("reading the submitted change set failed", err)
	}
	return ch.policies.approve(ctx, p, s, cs, by, nil)
}

// Apply commits the approved change set onto its base revision, on a new
// branch of the project (paddock/RUN unless named), authored by the
// request's identity, the operator's or the user's git identity (see author). The user's working tree and index are not touched;
// the branch is created with a compare-and-swap, so an existing branch or a
// concurrent writer makes it fail cleanly. Entries under .git, and
// symbolic links that leave the project or lead into .git or to a protected
// path, refuse the whole apply, approved or not; so does a commit that is
// not the base with exactly the approved entries (a type change git would
// resolve by dropping a path the change set does not name).
func (ch *Changes) Apply(ctx context.Context, id, branch string, who gitx.Identity) (_ *paddock.Submission, err error) {
	ctx, end := ch.span(ctx, "apply", nil, attrRun.String(id), attribute.String("paddock.branch", branch))
	defer func() { end(err) }()
	if ch.uncommitted.has(id) {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s started from the checkout's uncommitted changes, which a branch would carry into the project's history: apply it into the working tree (paddock apply %s --to worktree), or commit them first", id, id)
	}
	unlock, err := ch.queue.lockLanding(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	s, err := ch.applyToBranch(ctx, id, branch, who)
	if err != nil {
		ch.applyFailed(ctx, id, "branch", err)
	}
	return s, err
}

// applyFailed records an apply that did not happen, as an event of the run
// and a log line, with the reason: a person must be able to see why an
// approved change set is not in the project. (An apply into the working
// tree that rolled itself back has recorded its mismatch already.)
func (ch *Changes) applyFailed(ctx context.Context, id, target string, err error) {
	var pe *paddock.Error
	if target == "worktree" && errors.As(err, &pe) && pe.Details["mismatch"] != nil {
		return
	}
	if paddock.IsCode(err, paddock.CodeNotFound) {
		if _, rerr := ch.Run(ctx, id); rerr != nil {
			return // no such run: nothing to record it in
		}
	}
	code, msg := paddock.ErrorCode(err), paddock.ErrorMessage(err)
	ch.log().Warn("apply failed", "run", id, "to", target, "code", code, "reason", msg, "err", err)
	if err := ch.record(ctx, id, paddock.EventApplyFailed, map[string]any{"to": target, "code": code, "reason": msg}); err != nil {
		ch.log().Error("recording a failed apply failed", "run", id, "err", err)
	}
}

func (ch *Changes) applyToBranch(ctx context.Context, id, branch string, who gitx.Identity) (*paddock.Submission, error) {
	if err := ch.reviews.refuseReview(ctx, id, "be applied"); err != nil {
		return nil, err
	}
	r, p, err := ch.runAndProject(ctx, id)
	if err != nil {
		return nil, err
	}
	if s, err := ch.recordUnrecordedApply(ctx, id); s != nil || err != nil {
		return s, err
	}
	s, cs, err := ch.approved(ctx, id, p)
	if err != nil {
		return nil, err
	}
	repo, err := ch.projects.checkRepo(ctx, p)
	if err != nil {
		return nil, err
	}
	if branch == "" {
		branch = "paddock/" + id
	}
	if who, err = ch.author(ctx, p.Root, who); err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("paddock: apply run %s\n\nChange set %s, approved by %s.\n", id, s.Hash, s.ApprovedBy)
	// The commit is built from the frozen blobs, which hash to the
	// approved entries' ids (git checks as it stores them).
	var entries []gitx.IndexEntry
	for _, e := range cs.Entries {
		ie := gitx.IndexEntry{Path: e.Path, Mode: e.NewMode, Blob: e.NewBlob}
		if e.Op != paddock.OpDelete && e.NewMode != "160000" {
			ie.File = ch.blobPath(id, e.NewBlob)
		}
		entries = append(entries, ie)
	}
	commit, err := ch.Git.CommitToBranch(ctx, repo.CommonDir, r.Workspace.BaseRevision, entries, branch, who, msg)
	if errors.Is(err, gitx.ErrRefExists) {
		return nil, paddock.Errorf(paddock.CodeConflict, "branch %s already exists; name another with --to branch=NAME", branch)
	}
	if te := (*gitx.TreeMismatchError)(nil); errors.As(err, &te) {
		ch.log().Error("an apply to a branch did not make the approved tree; no branch was made", "run", id, "mismatch", te.Paths)
		return nil, paddock.Errorf(paddock.CodeConflict, "the change set does not apply onto its base as approved (%s); no branch was made",
			strings.Join(te.Paths, "; ")).WithDetail("mismatch", te.Paths)
	}
	if err != nil {
		var pe *paddock.Error
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, internal("applying the change set failed; the project is unchanged", err)
	}
	s.AppliedTo, s.AppliedAt = "refs/heads/"+branch+" @ "+commit, now()
	if err := ch.policies.store(s); err != nil {
		return nil, err
	}
	err = ch.record(ctx, id, paddock.EventApplied, map[string]string{"hash": s.Hash, "branch": branch, "commit": commit, "approved_by": s.ApprovedBy})
	return s, err
}

// dropSubmission removes run id's submission record, if it has one,
// under its approval lock.
func (ch *Changes) dropSubmission(id string) error {
	defer ch.policies.lock(id)()
	err := os.Remove(filepath.Join(ch.runDir(id), "submission.json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return internal("removing the submission record failed", err)
	}
	return nil
}

// recordUnrecordedApply records the apply to a branch of run id that was
// made (its branch, its submission marked applied) but whose event the
// store did not take (an outage between the two): the error said to make
// the call again, and the call made again would otherwise answer "applied
// already" with no event ever naming the branch. It returns the
// submission it recorded the apply of, or nil when there is none to
// record (not applied, or recorded already: the apply goes on and says
// what it finds).
func (ch *Changes) recordUnrecordedApply(ctx context.Context, id string) (*paddock.Submission, error) {
	s, err := ch.submission(id)
	if err != nil || !strings.HasPrefix(s.AppliedTo, "refs/heads/") {
		return nil, nil
	}
	branch, commit, ok := strings.Cut(strings.TrimPrefix(s.AppliedTo, "refs/heads/"), " @ ")
	if !ok {
		return nil, nil
	}
	recorded, err := ch.recordedApply(ctx, id, s.Hash)
	if err != nil || recorded {
		return nil, err
	}
	ch.log().Warn("an apply to a branch was made but not recorded (the store failed before its event); recording it now",
		"run", id, "branch", branch, "commit", commit)
	if err := ch.record(ctx, id, paddock.EventApplied, map[string]string{"hash": s.Hash, "branch": branch, "commit": commit,
		"approved_by": s.ApprovedBy}); err != nil {
		return nil, err
	}
	return s, nil
}

// recordedApply says whether run id's events record an apply of hash.
func (ch *Changes) recordedApply(ctx context.Context, id, hash string) (bool, error) {
	const page = 1000
	for after := int64(0); ; {
		var evs []*paddock.Event
		if err := ch.Store.View(ctx, func(tx paddock.Tx) (err error) {
			evs, err = tx.Events(ctx, id, after, page)
			return err
		}); err != nil {
			return false, err
		}
		for _, e := range evs {
			after = e.Seq
			var d struct {
				Hash string `json:"hash"`
			}
			if e.Type == paddock.EventApplied && json.Unmarshal(e.Data, &d) == nil && d.Hash == hash {
				return true, nil
			}
		}
		if len(evs) < page {
			return false, nil
		}
	}
}

// freezeBlobs keeps the new content of every created or modified entry, as
// it is in the run's view now (see changeset.Store.FreezeBlobs).
func (ch *Changes) freezeBlobs(ctx context.Context, id string, cs *paddock.ChangeSet) error {
	r, err := ch.Run(ctx, id)
	if err != nil {
		return err
	}
	root, err := ch.views.openView(ctx, r, nil, &confine.Policy{})
	if err != nil {
		return err
	}
	defer root.Close()
	err = ch.changeSets(id).FreezeBlobs(root.OS(), cs)
	var pe *paddock.Error
	if err != nil && !errors.As(err, &pe) {
		return internal("freezing the change set failed", err)
	}
	return err
}

// lintAttribution refuses a change set that credits a model or a tool with
// the work (see package attribution), unless the project allows the rule.
func (ch *Changes) lintAttribution(ctx context.Context, id string, cs *paddock.ChangeSet) error {
	_, p, err := ch.runAndProject(ctx, id)
	if err != nil {
		return err
	}
	d, err := changeset.OpenDiff(cs)
	if err != nil {
		return internal("reading the diff failed", err)
	}
	defer d.Close()
	hits, err := attribution.CheckDiff(d, p.AttributionAllow)
	if err != nil {
		return internal("reading the diff failed", err)
	}
	if len(hits) == 0 {
		return nil
	}
	h := hits[0]
	more := ""
	switch n := len(hits) - 1; {
	case n == 1:
		more = " (and 1 more line, in details.hits)"
	case n > 1:
		more = fmt.Sprintf(" (and %d more lines, in details.hits)", n)
	}
	return paddock.Errorf(paddock.CodeAttributionLeak, "%s:%d: %q credits a model or a tool with the work: %s%s",
		h.File, h.Line, h.Match, attribution.What(h.Rule), more).
		WithRule(paddock.Rule(h.Rule)).
		WithDetail("hint", fmt.Sprintf("remove it, or let project %s keep such lines: paddock project set %s --allow-attribution %s", p.Name, p.Name, h.Rule)).
		WithDetail("hits", hits)
}

// ChangeSetLimits bound what a change set may hold (see changeset.Limits).
type ChangeSetLimits = changeset.Limits
