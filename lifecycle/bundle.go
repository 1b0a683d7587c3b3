package lifecycle

import (
	"bufio"
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/agent"
	"github.com/paddock-dev/paddock/bundle"
	"github.com/paddock-dev/paddock/internal/durable"
)

// Bundles writes a run's change set as a signed bundle and imports one.
type Bundles struct {
	*kernel
	// the services it calls
	broker   *Broker
	changes  *Changes
	runs     *Runs
	policies *Policies
}

// bundleKey is the daemon's signing key, made on first use.
func (bn *Bundles) bundleKey() (ed25519.PrivateKey, error) {
	if bn.BundleKeyFile == "" {
		return nil, paddock.Errorf(paddock.CodeUnsupported, "this daemon has no bundle signing key")
	}
	k, err := bundle.LoadOrCreateKey(bn.BundleKeyFile)
	if err != nil {
		return nil, internal("reading the bundle signing key failed", err)
	}
	return k, nil
}

// BundleKey returns the public half of the key bundles are signed with.
func (bn *Bundles) BundleKey(ctx context.Context) (*paddock.BundleKey, error) {
	k, err := bn.bundleKey()
	if err != nil {
		return nil, err
	}
	pub := k.Public().(ed25519.PublicKey)
	return &paddock.BundleKey{PublicKey: bundle.PublicKeyLine(pub), KeyID: bundle.KeyID(pub)}, nil
}

// Bundle writes run id's submitted change set, with what is needed to
// trust it elsewhere, as one bundle signed with the daemon's key (see
// package bundle). A change set that holds a declared secret's value is
// refused: its blobs would carry the value in clear.
func (bn *Bundles) Bundle(ctx context.Context, id string, w io.Writer) error {
	r, err := bn.Run(ctx, id)
	if err != nil {
		return err
	}
	s, err := bn.submission(id)
	if err != nil {
		return err
	}
	cs, err := bn.frozen(id, s.Hash)
	if err != nil {
		return internal("reading the submitted change set failed", err)
	}
	var secret []string
	for _, e := range cs.Entries {
		if slices.Contains(e.Risks, "secret") {
			secret = append(secret, e.Path)
		}
	}
	if len(secret) > 0 {
		return paddock.Errorf(paddock.CodeForbidden, "run %s's change set holds a declared secret's value (%s): a bundle would carry it in clear; none was written", id, strings.Join(secret, ", ")).
			WithRule("secret_in_bundle")
	}
	access, err := bn.broker.AccessRequests(ctx, id)
	if err != nil {
		return err
	}
	var events []*paddock.Event
	for after := int64(0); ; {
		evs, err := bn.runs.Events(ctx, id, after, 1000)
		if err != nil {
			return err
		}
		events = append(events, evs...)
		if len(evs) < 1000 {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	for _, e := range events {
		var d struct {
			To string `json:"to"`
		}
		if e.Type == paddock.TransitionEvent && json.Unmarshal(e.Data, &d) == nil && d.To == string(paddock.StateRejected) {
			return paddock.Errorf(paddock.CodeConflict, "run %s was rejected: its change set and any approval of it no longer stand; nothing was bundled", id)
		}
	}
	key, err := bn.bundleKey()
	if err != nil {
		return err
	}
	ws := r.Workspace
	info := bundle.RunInfo{ID: r.ID, Project: r.Project, Access: string(r.Access), Agent: r.Agent, AgentHash: r.AgentHash, Secrets: r.Secrets, CreatedAt: r.CreatedAt}
	if ws != nil {
		info.BaseRef, info.BaseRevision, info.Kind = ws.BaseRef, ws.BaseRevision, string(ws.Kind)
	}
	err = bundle.Write(w, &bundle.Contents{Run: info, ChangeSet: cs, Submission: s, Access: access,
		Enforcement: bn.broker.lastEnforcement(ctx, r), Events: events,
		Blob: func(blob string) (io.ReadCloser, error) { return os.Open(bn.blobPath(id, blob)) }}, key, now())
	if err != nil {
		return internal("writing the bundle failed", err)
	}
	return bn.record(ctx, id, paddock.EventBundled, map[string]any{"hash": s.Hash, "key_id": bundle.KeyID(key.Public().(ed25519.PublicKey)), "events": len(events)})
}

// carries says whether an import's approvals carry over: a key given
// for this one import (?trust=) vouches for them when the operator gave
// it, never when a principal did (an admin's own key could sign
// approvals by anyone); the daemon's own key and TrustedKeysDir's do.
func (bn *Bundles) carries(ctx context.Context, b *bundle.Bundle, extra []string) bool {
	principal := paddock.PrincipalOf(ctx)
	if len(extra) == 0 || principal == "" {
		return true
	}
	base, err := bn.trustedKeys(nil)
	if err != nil {
		return false
	}
	for _, k := range base {
		if bundle.KeyID(k) == b.Signer {
			return true
		}
	}
	bn.log().Warn("an import's approvals were not carried: its signer was trusted only by a key its principal gave", "principal", principal, "signer", b.Signer)
	return false
}

// trustedKeys are the keys an import trusts: the daemon's own, those in
// TrustedKeysDir, and extra (the operator's, for one import).
func (bn *Bundles) trustedKeys(extra []string) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	if k, err := bn.bundleKey(); err == nil {
		keys = append(keys, k.Public().(ed25519.PublicKey))
	}
	for _, line := range extra {
		k, err := bundle.ParsePublicKey(line)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	if bn.TrustedKeysDir == "" {
		return keys, nil
	}
	ents, err := os.ReadDir(bn.TrustedKeysDir)
	if err != nil && !os.IsNotExist(err) {
		return nil, internal("reading the trusted keys failed", err)
	}
	for _, e := range ents {
		f, err := os.Open(filepath.Join(bn.TrustedKeysDir, e.Name()))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line, _, _ := strings.Cut(sc.Text(), "#") // a comment (whose key, say)
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			if k, err := bundle.ParsePublicKey(line); err == nil {
				keys = append(keys, k)
			} else {
				bn.log().Warn("a trusted key that is not one is ignored", "file", f.Name())
			}
		}
		f.Close()
	}
	return keys, nil
}

// MaxBundle bounds a bundle an import reads.
const MaxBundle = bundle.DefaultMaxSize

// Import restores a run from a bundle read from body: a new run of the
// project at the bundle's base revision, its workspace holding exactly the
// bundled change set (written through the working tools, so the project's
// protections hold), submitted under the same hash. The approval comes
// along, bound to that hash, only when the bundle's signer is trusted.
// The agent's grants and secrets do not: they were decided for another
// machine (the bundle keeps them, and the run.imported event names them).
// A failure after the run is made rejects it, with the reason.
func (bn *Bundles) Import(ctx context.Context, req paddock.ImportRequest, body io.Reader) (*paddock.ImportResult, error) {
	if req.Project != "" {
		if _, err := bn.Project(ctx, req.Project); err != nil {
			return nil, err
		}
	}
	trusted, err := bn.trustedKeys(req.Trust)
	if err != nil {
		return nil, err
	}
	b, err := bundle.Read(body, bundle.Options{Trusted: trusted, AnySigner: req.Untrusted, MaxSize: MaxBundle})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	limits := bn.ChangeSetLimits.WithDefaults()
	if len(b.ChangeSet.Entries) > limits.MaxEntries {
		return nil, paddock.Errorf(paddock.CodeTooLarge, "the bundle changes %d paths, more than this daemon's %d (changeset_max_entries); nothing was made", len(b.ChangeSet.Entries), limits.MaxEntries)
	}
	var total int64
	for _, e := range b.ChangeSet.Entries {
		if e.Blocked != "" || e.NewMode == "120000" || e.OldMode == "120000" || e.NewMode == "160000" || e.OldMode == "160000" {
			return nil, paddock.Errorf(paddock.CodeUnsupported, "%s is a symbolic link, a submodule or a blocked entry: an import restores files only; nothing was made", e.Path)
		}
		if e.Op == paddock.OpDelete {
			continue
		}
		st, err := os.Stat(b.BlobPath(e.NewBlob))
		if err != nil {
			return nil, internal("reading the bundle failed", err)
		}
		if total += st.Size(); st.Size() > limits.MaxFile || total > limits.MaxTotal {
			return nil, paddock.Errorf(paddock.CodeTooLarge, "the bundle's %s (%d bytes) is beyond this daemon's change-set limits (changeset_max_file, changeset_max_total); nothing was made", e.Path, st.Size())
		}
	}
	def := agent.ForAccess(paddock.AccessWrite)
	if b.Run.Agent != nil {
		d := *b.Run.Agent
		d.Secrets = nil // the values stayed where the bundle was made
		def = &d
	}
	def.Workspace = string(paddock.AccessWrite)
	project := req.Project
	if project == "" {
		project = b.Run.Project
	}
	p, err := bn.Project(ctx, project)
	if err != nil {
		return nil, err
	}
	if _, err := bn.Git.Resolve(ctx, p.Root, b.Run.BaseRevision+"^{commit}"); err != nil {
		return nil, paddock.Errorf(paddock.CodeNotFound, "project %s has no commit %s, the bundle's base: fetch it into the project first; nothing was made", p.Name, b.Run.BaseRevision)
	}
	// The import is marked under way before its run exists, and the mark
	// goes only once the run is submitted: a crash between leaves a mark
	// that recovery finishes by rejecting the run (recoverImports), so an
	// import is whole or leaves nothing, as an apply is.
	id := newID()
	if err := durable.WriteFile(bn.importMark(id), []byte(b.Run.ID+"\n")); err != nil {
		return nil, internal("marking the import failed; nothing was made", err)
	}
	r, err := bn.runs.create(ctx, newRun{id: id, req: paddock.CreateRunRequest{Project: project, Kind: req.Kind, Base: b.Run.BaseRevision}, def: def})
	if err != nil {
		os.Remove(bn.importMark(id))
		return nil, err
	}
	res, err := bn.restore(ctx, r, b, !req.Untrusted && bn.carries(ctx, b, req.Trust))
	if err != nil {
		bn.log().Warn("an import failed; its run is rejected", "run", r.ID, "err", err)
		if _, rerr := bn.runs.Reject(context.WithoutCancel(ctx), r.ID); rerr != nil {
			bn.log().Error("rejecting a failed import's run failed", "run", r.ID, "err", rerr)
			return nil, err // the mark stays: recovery rejects it
		}
		os.Remove(bn.importMark(id))
		return nil, err
	}
	if err := os.Remove(bn.importMark(id)); err != nil {
		return nil, internal("finishing the import failed", err)
	}
	return res, nil
}

// importMark is the file that says run id's import is under way.
func (bn *Bundles) importMark(id string) string {
	return filepath.Join(bn.runDir(id), "importing")
}

// recoverImports finishes the imports a crash cut short: their run, if it
// was made, is rejected (its workspace goes as a rejected run's does) and
// the mark removed; an import never stays half done.
func (bn *Bundles) recoverImports(ctx context.Context) []paddock.Finding {
	marks, _ := filepath.Glob(filepath.Join(bn.ArtifactsDir, "*", "importing"))
	var out []paddock.Finding
	for _, mark := range marks {
		id := filepath.Base(filepath.Dir(mark))
		f := paddock.Finding{RunID: id, Path: mark, Issue: "an import cut short"}
		r, err := bn.Run(ctx, id)
		switch {
		case paddock.IsCode(err, paddock.CodeNotFound):
			f.Action = "removed (no run was made)"
		case err != nil:
			bn.log().Error("recovering an import failed", "run", id, "err", err)
			continue
		case !bn.mine(r):
			continue
		default:
			f.State = r.State()
			if _, err := bn.runs.Reject(ctx, id); err != nil && r.State() != paddock.StateRejected && r.State() != paddock.StateCleaned {
				bn.log().Error("rejecting a cut import's run failed", "run", id, "err", err)
				f.Action = paddock.ActionFailed
				out = append(out, f)
				continue
			}
			f.Action = paddock.ActionRolledBack
		}
		if err := os.Remove(mark); err != nil && !os.IsNotExist(err) {
			bn.log().Error("removing an import's mark failed", "run", id, "err", err)
		}
		bn.log().Info("recovered", "run", id, "issue", f.Issue, "action", f.Action)
		out = append(out, f)
	}
	return out
}

// restore writes b's change set into r's workspace, checks that the
// workspace now has exactly it, and submits it under its hash.
func (bn *Bundles) restore(ctx context.Context, r *paddock.Run, b *bundle.Bundle, carryApproval bool) (*paddock.ImportResult, error) {
	for _, e := range b.ChangeSet.Entries {
		var content []byte // nil: a deletion
		if e.Op != paddock.OpDelete {
			var err error
			if content, err = os.ReadFile(b.BlobPath(e.NewBlob)); err != nil {
				return nil, internal("reading the bundle failed", err)
			}
			if content == nil {
				content = []byte{}
			}
		}
		if err := bn.runs.writeFile(ctx, r.ID, e.Path, content, e.NewMode == "100755"); err != nil {
			return nil, fmt.Errorf("restoring %s: %w", e.Path, err)
		}
	}
	live, err := bn.changes.ChangeSet(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	if diff := entriesDiffer(live.Entries, b.ChangeSet.Entries); diff != "" {
		return nil, paddock.Errorf(paddock.CodeConflict, "the restored workspace is not the bundled change set (%s); the run is rejected", diff)
	}
	// What is frozen is what this daemon makes of the restored files (its
	// own diff and risk labels), never the bundle's say-so: a diff that
	// does not show the files' content would hash as signed and still lie.
	if live.Hash != b.ChangeSet.Hash {
		return nil, paddock.Errorf(paddock.CodeConflict, "the change set of the restored files hashes to %s, not to the bundle's %s: the bundle's diff is not what these files make (or another version of git renders it otherwise); the run is rejected", live.Hash, b.ChangeSet.Hash)
	}
	cs := *live
	store := bn.changeSets(r.ID)
	if err := os.MkdirAll(store.Dir, 0o700); err != nil {
		return nil, internal("saving the change set failed", err)
	}
	if err := store.KeepFrozenDiff(&cs); err != nil {
		return nil, internal("saving the change set failed", err)
	}
	if err := bn.changes.freezeBlobs(ctx, r.ID, &cs); err != nil {
		return nil, err
	}
	if err := store.Save(&cs); err != nil {
		return nil, internal("saving the change set failed", err)
	}
	res := &paddock.ImportResult{FromRun: b.Run.ID, Hash: cs.Hash, Signer: b.Signer, Trusted: b.Trusted, ApprovedBy: b.Submission.ApprovedBy}
	s := &paddock.Submission{RunID: r.ID, Hash: cs.Hash, SubmittedAt: now()}
	var carried []paddock.Approval
	if carryApproval && b.Trusted && b.Submission.ApprovedBy != "" && !b.Rejected {
		carried, err = bn.carry(ctx, r, b, s, &cs)
		if err != nil {
			return nil, err
		}
		res.Approved = !s.ApprovedAt.IsZero()
	}
	if err := bn.saveSubmission(s); err != nil {
		return nil, err
	}
	grants := []string{}
	for _, a := range b.Access {
		if a.State == paddock.RequestGranted {
			grants = append(grants, a.ID)
		}
	}
	if err := bn.record(ctx, r.ID, paddock.EventImported, map[string]any{"from_run": b.Run.ID, "from_project": b.Run.Project,
		"hash": cs.Hash, "signer": b.PublicKey, "key_id": b.Signer, "trusted": b.Trusted, "approved_by": b.Submission.ApprovedBy,
		"agent_hash": b.Run.AgentHash, "secrets_not_carried": b.Run.Secrets, "grants_not_carried": grants,
		"verified": b.Verified, "events": b.Events}); err != nil {
		return nil, err
	}
	if err := bn.record(ctx, r.ID, paddock.EventSubmitted, map[string]any{"hash": cs.Hash, "entries": len(cs.Entries), "imported": true}); err != nil {
		return nil, err
	}
	// Each approval carried is recorded, as the approval it was: the
	// run's log holds an approved event for each of its approvals.
	for _, a := range carried {
		ev := map[string]any{"hash": cs.Hash, "by": a.By, "role": a.Role, "imported": true, "from_run": b.Run.ID, "signer": b.Signer, "policy": decisionData(*s.Policy)}
		if a.Principal != "" {
			ev["principal"] = a.Principal
		}
		if a.Auto {
			ev["auto"] = true
		}
		if err := bn.record(ctx, r.ID, paddock.EventApproved, ev); err != nil {
			return nil, err
		}
	}
	if res.Run, err = bn.Run(ctx, r.ID); err != nil {
		return nil, err
	}
	return res, nil
}

// carry gives s (run r's import of b, cs its change set) the approvals b
// carries of its hash, and decides them under r's project's policy as it
// is here: s is approved if they meet it (ApprovedBy then says where
// they were given), and waits for more approvals otherwise. It returns
// the approvals carried.
func (bn *Bundles) carry(ctx context.Context, r *paddock.Run, b *bundle.Bundle, s *paddock.Submission, cs *paddock.ChangeSet) ([]paddock.Approval, error) {
	p, err := bn.Project(ctx, r.Project)
	if err != nil {
		return nil, err
	}
	var carried []paddock.Approval
	for _, a := range approvalsOf(b.Submission) {
		if a.Hash == b.Submission.Hash {
			a.Hash = cs.Hash
			carried = append(carried, a)
		}
	}
	s.Approvals = carried
	f, err := bn.policies.facts(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	d, err := bn.policies.decide(p, s, cs, f)
	if err != nil {
		return nil, err
	}
	settle(s, d)
	if d.Met {
		s.ApprovedBy = fmt.Sprintf("%s (on run %s, bundle signed by %s)", s.ApprovedBy, b.Run.ID, b.Signer)
		s.ApprovedAt = cmp.Or(b.Submission.ApprovedAt, s.ApprovedAt)
	}
	return carried, nil
}

// entriesDiffer says how two change sets' entries differ (paths, ops,
// modes, blobs), or "" when they do not.
func entriesDiffer(got, want []paddock.ChangeEntry) string {
	key := func(e paddock.ChangeEntry) string {
		return strings.Join([]string{e.Path, string(e.Op), e.OldMode, e.NewMode, e.OldBlob, e.NewBlob}, " ")
	}
	g := map[string]string{}
	for _, e := range got {
		g[e.Path] = key(e)
	}
	var out []string
	for _, e := range want {
		if g[e.Path] != key(e) {
			out = append(out, e.Path)
		}
		delete(g, e.Path)
	}
	for p := range g {
		out = append(out, p)
	}
	slices.Sort(out)
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("and %d more", len(out)-5))
	}
	return strings.Join(out, ", ")
}
