package httpapi

import (
	"context"
	"net/http"

	"github.com/paddock-dev/paddock"
)

// Projects are the projects and the agent definitions they run.
type Projects interface {
	AddProject(ctx context.Context, req paddock.AddProjectRequest) (*paddock.Project, error)
	Projects(ctx context.Context) ([]*paddock.Project, error)
	Project(ctx context.Context, name string) (*paddock.Project, error)
	SetProject(ctx context.Context, name, by string, req paddock.SetProjectRequest) (*paddock.Project, error)
	RemoveProject(ctx context.Context, name string) error
	Unlock(ctx context.Context, name, by string, force bool) (*paddock.Lock, error)
	// ProjectCheckout says what the project's checkout holds beyond its
	// commits.
	ProjectCheckout(ctx context.Context, name string) (*paddock.CheckoutStatus, error)

	AddAgent(ctx context.Context, req paddock.AddAgentRequest) (*paddock.AgentRecord, error)
	Agents(ctx context.Context) ([]*paddock.AgentRecord, error)
	Agent(ctx context.Context, name string) (*paddock.AgentRecord, error)
	RemoveAgent(ctx context.Context, name string) error
}

func (s *Server) addProject(r *http.Request) (any, error) {
	var req paddock.AddProjectRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Projects.AddProject(r.Context(), req)
}

func (s *Server) projects(r *http.Request) (any, error) {
	return nonNil(s.Projects.Projects(r.Context()))
}

func (s *Server) project(r *http.Request) (any, error) {
	return s.Projects.Project(r.Context(), r.PathValue("name"))
}

func (s *Server) setProject(r *http.Request) (any, error) {
	var req paddock.SetProjectRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Projects.SetProject(r.Context(), r.PathValue("name"), actor(r), req)
}

func (s *Server) removeProject(r *http.Request) (any, error) {
	return map[string]string{"removed": r.PathValue("name")}, s.Projects.RemoveProject(r.Context(), r.PathValue("name"))
}

func (s *Server) unlock(r *http.Request) (any, error) {
	var req paddock.UnlockRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	l, err := s.Projects.Unlock(r.Context(), r.PathValue("name"), actor(r), req.Force)
	return paddock.UnlockResult{Released: l, By: actor(r)}, err
}

func (s *Server) agents(r *http.Request) (any, error) {
	return nonNil(s.Projects.Agents(r.Context()))
}

func (s *Server) addAgent(r *http.Request) (any, error) {
	var req paddock.AddAgentRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Projects.AddAgent(r.Context(), req)
}

func (s *Server) agent(r *http.Request) (any, error) {
	return s.Projects.Agent(r.Context(), r.PathValue("name"))
}

func (s *Server) removeAgent(r *http.Request) (any, error) {
	return map[string]string{"removed": r.PathValue("name")}, s.Projects.RemoveAgent(r.Context(), r.PathValue("name"))
}

func (s *Server) projectCheckout(r *http.Request) (any, error) {
	return s.Projects.ProjectCheckout(r.Context(), r.PathValue("name"))
}
