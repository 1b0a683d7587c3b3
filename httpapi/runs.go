package httpapi

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/paddock-dev/paddock"
)

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

// Reviews makes a submitted change set's review run.
type Reviews interface {
	Review(ctx context.Context, id, agent string) (*paddock.Run, error)
}

// Forks makes runs stacked on a run's frozen files.
type Forks interface {
	Fork(ctx context.Context, id string, req paddock.ForkRequest) (*paddock.ForkResult, error)
}

// runsHandlers answer the runs' lives and their events, and a run's
// review and forks.
type runsHandlers struct {
	runs    Runs
	reviews Reviews
	forks   Forks
	api     *apiBase
}

func (h *runsHandlers) create(r *http.Request) (any, error) {
	var req paddock.CreateRunRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := inScope(r.Context(), req.Project); err != nil {
		return nil, err
	}
	return h.runs.Create(r.Context(), req)
}

func (h *runsHandlers) listRuns(r *http.Request) (any, error) {
	all, err := boolParam(r, "all")
	if err != nil {
		return nil, err
	}
	rs, err := h.runs.Runs(r.Context(), paddock.RunFilter{Project: r.URL.Query().Get("project"), Removed: all})
	if c := paddock.CallerOf(r.Context()); c != nil && err == nil {
		// A principal scoped to some projects sees their runs.
		rs = slices.DeleteFunc(rs, func(r *paddock.Run) bool { return !c.InProject(r.Project) })
	}
	return nonNil(rs, err)
}

func (h *runsHandlers) run(r *http.Request) (any, error) {
	return h.runs.Run(r.Context(), r.PathValue("id"))
}

func (h *runsHandlers) remove(r *http.Request) (any, error) {
	return h.runs.Remove(r.Context(), r.PathValue("id"))
}

func (h *runsHandlers) retain(r *http.Request) (any, error) {
	return h.runs.Retain(r.Context(), r.PathValue("id"))
}

func (h *runsHandlers) review(r *http.Request) (any, error) {
	var req paddock.ReviewRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return h.reviews.Review(r.Context(), r.PathValue("id"), req.Agent)
}

func (h *runsHandlers) fork(r *http.Request) (any, error) {
	var req paddock.ForkRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return h.forks.Fork(r.Context(), r.PathValue("id"), req)
}

func (h *runsHandlers) reject(r *http.Request) (any, error) {
	return h.runs.Reject(r.Context(), r.PathValue("id"))
}

func (h *runsHandlers) checkpoint(r *http.Request) (any, error) {
	var req paddock.CheckpointRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.Reason == "" {
		req.Reason = "requested by " + actor(r)
	}
	return h.runs.Checkpoint(r.Context(), r.PathValue("id"), req.Reason)
}

func (h *runsHandlers) resume(r *http.Request) (any, error) {
	return h.runs.Resume(r.Context(), r.PathValue("id"))
}

// eventStream serves a run's events as Server-Sent Events: each event's id
// is its seq, so a client that reconnects with Last-Event-ID (or ?after=)
// gets every later event once, in order.
func (h *runsHandlers) eventStream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after, err := resumeAfter(r)
	if err != nil {
		writeError(w, err)
		return
	}
	// Each event is one write: the run's funnel masks it whole.
	w = h.api.runFunnel(w, r)
	if _, err := h.runs.Events(r.Context(), id, after, 1); err != nil {
		h.api.fail(w, r, err)
		return
	}
	serveSSE(w, r, after, func(ctx context.Context, after int64) ([]sseEvent, int64, error) {
		evs, err := h.runs.WaitEvents(ctx, id, after, 500)
		out := make([]sseEvent, len(evs))
		for i, e := range evs {
			out[i] = sseEvent{id: e.Seq, name: e.Type, data: e}
			after = e.Seq
		}
		return out, after, err
	})
}

// events answers GET /v1/runs/{id}/events?after=SEQ&limit=N&wait=DURATION.
// With wait, an empty answer is held until an event arrives or wait passes.
func (h *runsHandlers) events(r *http.Request) (any, error) {
	q := r.URL.Query()
	after, err := intParam(q.Get("after"), "after")
	if err != nil {
		return nil, err
	}
	limit, err := intParam(q.Get("limit"), "limit")
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	if w := q.Get("wait"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d < 0 {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "wait must be a duration such as 30s")
		}
		ctx, cancel := context.WithTimeout(r.Context(), min(d, MaxWait))
		defer cancel()
		return h.runs.WaitEvents(ctx, id, after, int(limit))
	}
	return h.runs.Events(r.Context(), id, after, int(limit))
}
