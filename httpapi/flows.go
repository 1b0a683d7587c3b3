package httpapi

import (
	"context"
	"net/http"

	"github.com/paddock-dev/paddock"
)

// Flows are workflows' flows and the runs' menus of their events.
type Flows interface {
	StartFlow(ctx context.Context, req paddock.StartFlowRequest) (*paddock.Flow, error)
	Flows(ctx context.Context, project string) ([]*paddock.Flow, error)
	Flow(ctx context.Context, id string) (*paddock.Flow, error)
	PickEvent(ctx context.Context, id, event string, req paddock.MenuEventRequest) (*paddock.Flow, error)
}

func (s *Server) startFlow(r *http.Request) (any, error) {
	var req paddock.StartFlowRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Flows.StartFlow(r.Context(), req)
}

func (s *Server) flows(r *http.Request) (any, error) {
	return nonNil(s.Flows.Flows(r.Context(), r.URL.Query().Get("project")))
}

func (s *Server) flow(r *http.Request) (any, error) {
	return s.Flows.Flow(r.Context(), r.PathValue("flow"))
}

func (s *Server) pickEvent(r *http.Request) (any, error) {
	var req paddock.MenuEventRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Flows.PickEvent(r.Context(), r.PathValue("id"), r.PathValue("event"), req)
}
