package httpapi

import (
	"context"
	"net/http"
	"slices"

	"github.com/paddock-dev/paddock"
)

// Flows are workflows' flows and the runs' menus of their events.
type Flows interface {
	StartFlow(ctx context.Context, req paddock.StartFlowRequest) (*paddock.Flow, error)
	Flows(ctx context.Context, project string) ([]*paddock.Flow, error)
	Flow(ctx context.Context, id string) (*paddock.Flow, error)
	PickEvent(ctx context.Context, id, event string, req paddock.MenuEventRequest) (*paddock.Flow, error)
}

// flowsHandlers answer the flows' routes and the runs' menus.
type flowsHandlers struct{ flows Flows }

func (h *flowsHandlers) startFlow(r *http.Request) (any, error) {
	var req paddock.StartFlowRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := inScope(r.Context(), req.Project); err != nil {
		return nil, err
	}
	return h.flows.StartFlow(r.Context(), req)
}

func (h *flowsHandlers) listFlows(r *http.Request) (any, error) {
	fs, err := h.flows.Flows(r.Context(), r.URL.Query().Get("project"))
	if c := paddock.CallerOf(r.Context()); c != nil && err == nil {
		// A principal scoped to some projects sees their flows (the review
		// page lists them beside the runs).
		fs = slices.DeleteFunc(fs, func(f *paddock.Flow) bool { return !c.InProject(f.Project) })
	}
	return nonNil(fs, err)
}

func (h *flowsHandlers) flow(r *http.Request) (any, error) {
	return h.flows.Flow(r.Context(), r.PathValue("flow"))
}

func (h *flowsHandlers) pickEvent(r *http.Request) (any, error) {
	var req paddock.MenuEventRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return h.flows.PickEvent(r.Context(), r.PathValue("id"), r.PathValue("event"), req)
}
