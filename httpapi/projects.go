package httpapi

import (
	"context"
	"net/http"
	"slices"

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

// projectsHandlers answer the projects' and agents' routes.
type projectsHandlers struct{ projects Projects }

func (h *projectsHandlers) addProject(r *http.Request) (any, error) {
	var req paddock.AddProjectRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return h.projects.AddProject(r.Context(), req)
}

func (h *projectsHandlers) listProjects(r *http.Request) (any, error) {
	ps, err := h.projects.Projects(r.Context())
	if c := paddock.CallerOf(r.Context()); c != nil && err == nil {
		// A principal scoped to some projects sees those.
		ps = slices.DeleteFunc(ps, func(p *paddock.Project) bool { return !c.InProject(p.Name) })
	}
	return nonNil(ps, err)
}

func (h *projectsHandlers) project(r *http.Request) (any, error) {
	return h.projects.Project(r.Context(), r.PathValue("name"))
}

func (h *projectsHandlers) setProject(r *http.Request) (any, error) {
	var req paddock.SetProjectRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return h.projects.SetProject(r.Context(), r.PathValue("name"), actor(r), req)
}

func (h *projectsHandlers) removeProject(r *http.Request) (any, error) {
	return map[string]string{"removed": r.PathValue("name")}, h.projects.RemoveProject(r.Context(), r.PathValue("name"))
}

func (h *projectsHandlers) unlock(r *http.Request) (any, error) {
	var req paddock.UnlockRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	l, err := h.projects.Unlock(r.Context(), r.PathValue("name"), actor(r), req.Force)
	return paddock.UnlockResult{Released: l, By: actor(r)}, err
}

func (h *projectsHandlers) agents(r *http.Request) (any, error) {
	return nonNil(h.projects.Agents(r.Context()))
}

func (h *projectsHandlers) addAgent(r *http.Request) (any, error) {
	var req paddock.AddAgentRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return h.projects.AddAgent(r.Context(), req)
}

func (h *projectsHandlers) agent(r *http.Request) (any, error) {
	return h.projects.Agent(r.Context(), r.PathValue("name"))
}

func (h *projectsHandlers) removeAgent(r *http.Request) (any, error) {
	return map[string]string{"removed": r.PathValue("name")}, h.projects.RemoveAgent(r.Context(), r.PathValue("name"))
}

func (h *projectsHandlers) projectCheckout(r *http.Request) (any, error) {
	return h.projects.ProjectCheckout(r.Context(), r.PathValue("name"))
}
