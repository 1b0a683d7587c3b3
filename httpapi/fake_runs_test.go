package httpapi

import (
	"context"
	"slices"
	"strings"

	"github.com/paddock-dev/paddock"
)

// fakeRuns makes runs in the shared state and moves them along, with
// their events; WaitEvents waits for the next append.
type fakeRuns struct{ *fakeState }

var _ Runs = fakeRuns{}

func (f fakeRuns) Create(ctx context.Context, req paddock.CreateRunRequest) (*paddock.Run, error) {
	if err := f.record(ctx, "Create", req.Project, req.Secrets); err != nil {
		return nil, err
	}
	return f.newRun(req.Project, req.Secrets), nil
}

func (f fakeRuns) Runs(ctx context.Context, filter paddock.RunFilter) ([]*paddock.Run, error) {
	if err := f.record(ctx, "Runs", filter.Project, filter.Removed); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*paddock.Run
	for _, r := range f.runs {
		if filter.Project == "" || r.Project == filter.Project {
			c := *r
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, func(a, b *paddock.Run) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (f fakeRuns) Retain(ctx context.Context, id string) (*paddock.Run, error) {
	if err := f.record(ctx, "Retain", id); err != nil {
		return nil, err
	}
	return f.transition(id, paddock.StateRetained, "")
}

func (f fakeRuns) Reject(ctx context.Context, id string) (*paddock.Run, error) {
	if err := f.record(ctx, "Reject", id); err != nil {
		return nil, err
	}
	return f.transition(id, paddock.StateRejected, "")
}

func (f fakeRuns) Remove(ctx context.Context, id string) (*paddock.Run, error) {
	if err := f.record(ctx, "Remove", id); err != nil {
		return nil, err
	}
	return f.run(id)
}

func (f fakeRuns) Checkpoint(ctx context.Context, id, reason string) (*paddock.Run, error) {
	if err := f.record(ctx, "Checkpoint", id, reason); err != nil {
		return nil, err
	}
	return f.transition(id, paddock.StateCheckpointed, reason)
}

func (f fakeRuns) Resume(ctx context.Context, id string) (*paddock.ResumeResult, error) {
	if err := f.record(ctx, "Resume", id); err != nil {
		return nil, err
	}
	r, err := f.run(id)
	return &paddock.ResumeResult{Run: r}, err
}

func (f fakeRuns) Events(ctx context.Context, id string, after int64, limit int) ([]*paddock.Event, error) {
	if err := f.record(ctx, "Events", id, after, limit); err != nil {
		return nil, err
	}
	evs, _, err := f.eventsAfter(id, after, limit)
	return evs, err
}

func (f fakeRuns) WaitEvents(ctx context.Context, id string, after int64, limit int) ([]*paddock.Event, error) {
	if err := f.record(ctx, "WaitEvents", id, after, limit); err != nil {
		return nil, err
	}
	for {
		evs, ch, err := f.eventsAfter(id, after, limit)
		if err != nil || len(evs) > 0 {
			return evs, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return evs, nil
		}
	}
}

// fakeJobs bootstraps a run with a token the guard then admits; an
// artifact is there only for a bootstrapped run.
type fakeJobs struct{ *fakeState }

var _ Jobs = fakeJobs{}

func (f fakeJobs) Bootstrap(ctx context.Context, req paddock.BootstrapRequest) (*paddock.BootstrapResult, error) {
	if err := f.record(ctx, "Bootstrap", req.Project, req.Agent.Name, req.Task); err != nil {
		return nil, err
	}
	r := f.newRun(req.Project, nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	tok := "pdk_run_" + strings.Repeat("x", f.n)
	f.tokens[tok] = r.ID
	return &paddock.BootstrapResult{Run: r, Token: tok}, nil
}

func (f fakeJobs) RunForToken(ctx context.Context, token string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.tokens[token]; ok {
		return id, nil
	}
	return "", paddock.Errorf(paddock.CodeNotFound, "unknown token")
}

func (f fakeJobs) Artifact(ctx context.Context, id, kind string) (*paddock.Artifact, error) {
	if err := f.record(ctx, "Artifact", id, kind); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.tokens {
		if r == id {
			return &paddock.Artifact{Kind: kind, Content: "the task"}, nil
		}
	}
	return nil, paddock.Errorf(paddock.CodeNotBootstrapped, "run %s was not bootstrapped", id)
}

func (f fakeJobs) StartJob(ctx context.Context, id string, req paddock.StartJobRequest) (*paddock.Job, error) {
	return &paddock.Job{ID: "j-1", RunID: id}, f.record(ctx, "StartJob", id, req.Kind)
}

func (f fakeJobs) Jobs(ctx context.Context, id string) ([]*paddock.Job, error) {
	return []*paddock.Job{}, f.record(ctx, "Jobs", id)
}

func (f fakeJobs) JobStatus(ctx context.Context, id string) (*paddock.JobStatus, error) {
	return &paddock.JobStatus{State: paddock.JobIdle}, f.record(ctx, "JobStatus", id)
}

func (f fakeJobs) Job(ctx context.Context, id, job string) (*paddock.Job, error) {
	return &paddock.Job{ID: job, RunID: id}, f.record(ctx, "Job", id, job)
}

func (f fakeJobs) CancelJob(ctx context.Context, id, job string) (*paddock.Job, error) {
	return &paddock.Job{ID: job, RunID: id}, f.record(ctx, "CancelJob", id, job)
}

// fakeReviews answers the reviewed run itself.
type fakeReviews struct{ *fakeState }

var _ Reviews = fakeReviews{}

func (f fakeReviews) Review(ctx context.Context, id, agent string) (*paddock.Run, error) {
	if err := f.record(ctx, "Review", id, agent); err != nil {
		return nil, err
	}
	return f.run(id)
}

// fakeForks answers the run as its own only fork.
type fakeForks struct{ *fakeState }

var _ Forks = fakeForks{}

func (f fakeForks) Fork(ctx context.Context, id string, req paddock.ForkRequest) (*paddock.ForkResult, error) {
	if err := f.record(ctx, "Fork", id, req.Count); err != nil {
		return nil, err
	}
	r, err := f.run(id)
	if err != nil {
		return nil, err
	}
	return &paddock.ForkResult{Run: r, Layer: "l-1", Runs: []*paddock.Run{r}}, nil
}

// fakeFlows answers one flow, f-1.
type fakeFlows struct{ *fakeState }

var _ Flows = fakeFlows{}

func (f fakeFlows) StartFlow(ctx context.Context, req paddock.StartFlowRequest) (*paddock.Flow, error) {
	if err := f.record(ctx, "StartFlow", req.Workflow, req.Project, req.Task); err != nil {
		return nil, err
	}
	return &paddock.Flow{ID: "f-1", Project: req.Project, Task: req.Task}, nil
}

func (f fakeFlows) Flows(ctx context.Context, project string) ([]*paddock.Flow, error) {
	return nil, f.record(ctx, "Flows", project)
}

func (f fakeFlows) Flow(ctx context.Context, id string) (*paddock.Flow, error) {
	return &paddock.Flow{ID: id, Project: strings.TrimPrefix(id, "f-")}, f.record(ctx, "Flow", id)
}

func (f fakeFlows) PickEvent(ctx context.Context, id, event string, req paddock.MenuEventRequest) (*paddock.Flow, error) {
	if err := f.record(ctx, "PickEvent", id, event, req.Head); err != nil {
		return nil, err
	}
	return &paddock.Flow{ID: "f-1"}, nil
}
