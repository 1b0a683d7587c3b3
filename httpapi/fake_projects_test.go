package httpapi

import (
	"context"

	"github.com/paddock-dev/paddock"
)

// fakeProjects keeps the projects it adds; the rest it records.
type fakeProjects struct{ *fakeState }

var _ Projects = fakeProjects{}

func (f fakeProjects) AddProject(ctx context.Context, req paddock.AddProjectRequest) (*paddock.Project, error) {
	if err := f.record(ctx, "AddProject", req.Path, req.Name); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p := &paddock.Project{Name: req.Name, Root: req.Path}
	f.projects[p.Name] = p
	return p, nil
}

func (f fakeProjects) Projects(ctx context.Context) ([]*paddock.Project, error) {
	return nil, f.record(ctx, "Projects")
}

func (f fakeProjects) SetProject(ctx context.Context, name, by string, req paddock.SetProjectRequest) (*paddock.Project, error) {
	if err := f.record(ctx, "SetProject", name, by, req.Protect); err != nil {
		return nil, err
	}
	p := &paddock.Project{Name: name, Protected: req.Protect}
	if req.AllowAttribution != nil {
		p.AttributionAllow = *req.AllowAttribution
	}
	return p, nil
}

func (f fakeProjects) RemoveProject(ctx context.Context, name string) error {
	return f.record(ctx, "RemoveProject", name)
}

func (f fakeProjects) Unlock(ctx context.Context, name, by string, force bool) (*paddock.Lock, error) {
	if err := f.record(ctx, "Unlock", name, by, force); err != nil {
		return nil, err
	}
	return &paddock.Lock{Project: name, RunID: "r-held"}, nil
}

func (f fakeProjects) ProjectCheckout(ctx context.Context, name string) (*paddock.CheckoutStatus, error) {
	return &paddock.CheckoutStatus{Root: "/src/" + name}, f.record(ctx, "ProjectCheckout", name)
}

func (f fakeProjects) AddAgent(ctx context.Context, req paddock.AddAgentRequest) (*paddock.AgentRecord, error) {
	return &paddock.AgentRecord{Definition: paddock.AgentDefinition{Name: req.File}}, f.record(ctx, "AddAgent", req.File)
}

func (f fakeProjects) Agents(ctx context.Context) ([]*paddock.AgentRecord, error) {
	return nil, f.record(ctx, "Agents")
}

func (f fakeProjects) Agent(ctx context.Context, name string) (*paddock.AgentRecord, error) {
	return &paddock.AgentRecord{Definition: paddock.AgentDefinition{Name: name}}, f.record(ctx, "Agent", name)
}

func (f fakeProjects) RemoveAgent(ctx context.Context, name string) error {
	return f.record(ctx, "RemoveAgent", name)
}

// fakeCollector records GC and finds nothing.
type fakeCollector struct{ *fakeState }

var _ Collector = fakeCollector{}

func (f fakeCollector) GC(ctx context.Context, dryRun bool) ([]paddock.Finding, error) {
	return nil, f.record(ctx, "GC", dryRun)
}
