package httpapi

import (
	"context"
	"net/http"

	"github.com/paddock-dev/paddock"
)

// Jobs are a bootstrapped run's agent side: its bootstrap, its token and
// artifacts, and the jobs it starts.
type Jobs interface {
	Bootstrap(ctx context.Context, req paddock.BootstrapRequest) (*paddock.BootstrapResult, error)
	// RunForToken names the run a run token was issued for: the guard
	// admits a call made with it as that run's agent.
	RunForToken(ctx context.Context, token string) (string, error)
	Artifact(ctx context.Context, id, kind string) (*paddock.Artifact, error)
	StartJob(ctx context.Context, id string, req paddock.StartJobRequest) (*paddock.Job, error)
	Jobs(ctx context.Context, id string) ([]*paddock.Job, error)
	JobStatus(ctx context.Context, id string) (*paddock.JobStatus, error)
	Job(ctx context.Context, id, job string) (*paddock.Job, error)
	CancelJob(ctx context.Context, id, job string) (*paddock.Job, error)
}

// jobsHandlers answer a bootstrapped run's agent side: its bootstrap,
// artifacts and jobs.
type jobsHandlers struct{ jobs Jobs }

func (h *jobsHandlers) bootstrap(r *http.Request) (any, error) {
	var req paddock.BootstrapRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := inScope(r.Context(), req.Project); err != nil {
		return nil, err
	}
	return h.jobs.Bootstrap(r.Context(), req)
}

func (h *jobsHandlers) artifact(r *http.Request) (any, error) {
	return h.jobs.Artifact(r.Context(), r.PathValue("id"), r.PathValue("kind"))
}

func (h *jobsHandlers) startJob(r *http.Request) (any, error) {
	var req paddock.StartJobRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.Exec != nil {
		if err := operatorOnly(r, req.Exec); err != nil {
			return nil, err
		}
	}
	return h.jobs.StartJob(r.Context(), r.PathValue("id"), req)
}

func (h *jobsHandlers) listJobs(r *http.Request) (any, error) {
	return h.jobs.Jobs(r.Context(), r.PathValue("id"))
}

func (h *jobsHandlers) jobStatus(r *http.Request) (any, error) {
	return h.jobs.JobStatus(r.Context(), r.PathValue("id"))
}

func (h *jobsHandlers) job(r *http.Request) (any, error) {
	return h.jobs.Job(r.Context(), r.PathValue("id"), r.PathValue("job"))
}

func (h *jobsHandlers) cancelJob(r *http.Request) (any, error) {
	return h.jobs.CancelJob(r.Context(), r.PathValue("id"), r.PathValue("job"))
}
