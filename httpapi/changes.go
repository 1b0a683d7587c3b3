package httpapi

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
)

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

// changesHandlers answer a run's change set, from its diff (masked by
// the run's redactor, the Broker's) to its undoing.
type changesHandlers struct {
	changes    Changes
	provenance Provenance
	redactors  redactors
	api        *apiBase
}

func (h *changesHandlers) changeSet(r *http.Request) (any, error) {
	cs, err := h.changes.ChangeSet(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return cs.Wire(), nil // written in one pass (see paddock.ChangeSetWire)
}

func (h *changesHandlers) submit(r *http.Request) (any, error) {
	var req paddock.SubmitRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	cs, err := h.changes.SubmitExpecting(r.Context(), r.PathValue("id"), req.ExpectHash)
	if err != nil {
		return nil, err
	}
	return cs.Wire(), nil
}

func (h *changesHandlers) approve(r *http.Request) (any, error) {
	var req paddock.ApproveRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if len(req.Hunks) > 0 {
		return h.provenance.ApproveHunks(r.Context(), r.PathValue("id"), req.Hash, req.Hunks, actor(r))
	}
	return h.changes.Approve(r.Context(), r.PathValue("id"), req.Hash, actor(r))
}

func (h *changesHandlers) blame(r *http.Request) (any, error) {
	return h.provenance.Blame(r.Context(), r.PathValue("id"), r.URL.Query().Get("hash"))
}

func (h *changesHandlers) apply(r *http.Request) (any, error) {
	var req paddock.ApplyRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	switch req.To {
	case "", "branch":
		if req.ThreeWay {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "a 3-way merge applies only to --to worktree (a branch is built on the base, where nothing needs merging)")
		}
		return h.changes.Apply(r.Context(), r.PathValue("id"), req.Branch, gitx.Identity{Name: req.AuthorName, Email: req.AuthorEmail})
	case "worktree":
		if req.Branch != "" {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "a branch name applies only to --to branch")
		}
		return h.changes.ApplyToWorktree(r.Context(), r.PathValue("id"), req.ThreeWay)
	}
	return nil, paddock.Errorf(paddock.CodeBadRequest, "apply to %q: branch or worktree", req.To)
}

func (h *changesHandlers) undo(r *http.Request) (any, error) {
	return h.changes.Undo(r.Context(), r.PathValue("id"))
}

// changeSetDiff streams a change set's whole diff from its file: however
// large it is, it never sits in memory. The file is masked already (see
// changeset.MaskDiff); the stream passes the run's funnel all the same, as
// every answer does.
func (h *changesHandlers) changeSetDiff(w http.ResponseWriter, r *http.Request) {
	red, err := h.redactors.Redactor(r.Context(), r.PathValue("id"))
	if err != nil {
		h.api.fail(w, r, err)
		return
	}
	d, hash, err := h.changes.ChangeSetDiff(r.Context(), r.PathValue("id"), r.URL.Query().Get("hash"))
	if err != nil {
		h.api.fail(w, r, err)
		return
	}
	defer d.Close()
	http.NewResponseController(w).SetWriteDeadline(time.Time{}) // a large diff outlives the write timeout
	w.Header().Set("Content-Type", "text/x-diff; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set(paddock.ChangeSetHashHeader, hash)
	w.WriteHeader(http.StatusOK)
	mask := red.NewWriter(w)
	if _, err := io.Copy(mask, d); err == nil {
		mask.Close()
	}
}
