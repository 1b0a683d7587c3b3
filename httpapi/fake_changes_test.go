package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
)

// fakeChanges answers change set h1; its diff holds the run's declared
// secret's value, if it has one, for the funnel to mask.
type fakeChanges struct{ *fakeState }

var _ Changes = fakeChanges{}

func (f fakeChanges) ChangeSet(ctx context.Context, id string) (*paddock.ChangeSet, error) {
	return &paddock.ChangeSet{Hash: "h1"}, f.record(ctx, "ChangeSet", id)
}

func (f fakeChanges) ChangeSetDiff(ctx context.Context, id, hash string) (io.ReadCloser, string, error) {
	if err := f.record(ctx, "ChangeSetDiff", id, hash); err != nil {
		return nil, "", err
	}
	diff := "+line\n"
	if v, ok := f.secret[id]; ok {
		_, value, _ := strings.Cut(v, "=")
		diff = "+token " + value + "\n"
	}
	return io.NopCloser(strings.NewReader(diff)), "h1", nil
}

func (f fakeChanges) SubmitExpecting(ctx context.Context, id, expect string) (*paddock.ChangeSet, error) {
	return &paddock.ChangeSet{Hash: "h1"}, f.record(ctx, "SubmitExpecting", id, expect)
}

func (f fakeChanges) Approve(ctx context.Context, id, hash, by string) (*paddock.Submission, error) {
	return &paddock.Submission{}, f.record(ctx, "Approve", id, hash, by)
}

func (f fakeChanges) Apply(ctx context.Context, id, branch string, who gitx.Identity) (*paddock.Submission, error) {
	return &paddock.Submission{}, f.record(ctx, "Apply", id, branch, who.Name, who.Email)
}

func (f fakeChanges) ApplyToWorktree(ctx context.Context, id string, threeWay bool) (*paddock.Submission, error) {
	return &paddock.Submission{}, f.record(ctx, "ApplyToWorktree", id, threeWay)
}

func (f fakeChanges) Undo(ctx context.Context, id string) (*paddock.Submission, error) {
	return &paddock.Submission{}, f.record(ctx, "Undo", id)
}

// fakeProvenance records hunk approvals and blames nothing.
type fakeProvenance struct{ *fakeState }

var _ Provenance = fakeProvenance{}

func (f fakeProvenance) ApproveHunks(ctx context.Context, id, hash string, hunks []int, by string) (*paddock.Submission, error) {
	return &paddock.Submission{RunID: id, Hash: "part", PartOf: hash, Hunks: hunks}, f.record(ctx, "ApproveHunks", id, hash, hunks, by)
}

func (f fakeProvenance) Blame(ctx context.Context, id, hash string) (*paddock.Blame, error) {
	return &paddock.Blame{Run: id, Hash: hash, Hunks: []paddock.HunkBlame{}}, f.record(ctx, "Blame", id, hash)
}

// fakeVerifier has no checks to run.
type fakeVerifier struct{ *fakeState }

var _ Verifier = fakeVerifier{}

func (f fakeVerifier) Verify(ctx context.Context, id string, req paddock.VerifyRequest) (*paddock.VerifyResult, error) {
	return &paddock.VerifyResult{Checks: []paddock.CheckResult{}}, f.record(ctx, "Verify", id, req.Checks)
}

func (f fakeVerifier) ProjectManifest(ctx context.Context, name string) (json.RawMessage, error) {
	return json.RawMessage(`{"checks":[]}`), f.record(ctx, "ProjectManifest", name)
}

// fakeQueue records the merge queue's calls and queues nothing.
type fakeQueue struct{ *fakeState }

var _ Queue = fakeQueue{}

func (f fakeQueue) QueueAdd(ctx context.Context, id string, req paddock.QueueAddRequest, by string) (*paddock.QueueEntry, error) {
	return &paddock.QueueEntry{Run: id, Branch: req.Branch, State: paddock.QueueQueued}, f.record(ctx, "QueueAdd", id, req.Branch, req.Accept, by)
}

func (f fakeQueue) Queue(ctx context.Context, project string, all bool) ([]*paddock.QueueEntry, error) {
	return []*paddock.QueueEntry{}, f.record(ctx, "Queue", project, all)
}

func (f fakeQueue) QueueEntry(ctx context.Context, id string) (*paddock.QueueEntry, error) {
	return &paddock.QueueEntry{Run: id}, f.record(ctx, "QueueEntry", id)
}

func (f fakeQueue) QueueRemove(ctx context.Context, id, by string) (*paddock.QueueEntry, error) {
	return &paddock.QueueEntry{Run: id}, f.record(ctx, "QueueRemove", id, by)
}

func (f fakeQueue) QueueUndo(ctx context.Context, id, by string) (*paddock.QueueEntry, error) {
	return &paddock.QueueEntry{Run: id}, f.record(ctx, "QueueUndo", id, by)
}

// fakeBundles writes "a bundle of ID" and imports any body.
type fakeBundles struct{ *fakeState }

var _ Bundles = fakeBundles{}

func (f fakeBundles) Bundle(ctx context.Context, id string, w io.Writer) error {
	if err := f.record(ctx, "Bundle", id); err != nil {
		return err
	}
	_, err := io.WriteString(w, "a bundle of "+id)
	return err
}

func (f fakeBundles) BundleKey(ctx context.Context) (*paddock.BundleKey, error) {
	return &paddock.BundleKey{PublicKey: "ed25519 AAAA", KeyID: "k"}, f.record(ctx, "BundleKey")
}

func (f fakeBundles) Import(ctx context.Context, req paddock.ImportRequest, body io.Reader) (*paddock.ImportResult, error) {
	b, _ := io.ReadAll(body)
	if err := f.record(ctx, "Import", req.Project, req.Kind, req.Trust, req.Untrusted, string(b)); err != nil {
		return nil, err
	}
	return &paddock.ImportResult{FromRun: "r-x", Hash: "h"}, nil
}
