package lifecycle_test

import (
	"context"
	"sync"

	"github.com/paddock-dev/paddock"
)

// faultStore is a paddock.Store that fails on demand: it wraps a real store
// and asks its hooks before the calls they name. A hook returning an error
// fails that call; nil lets it through. It stands for a store that is full,
// locked or gone for a moment, and for a client that disconnects at a given
// point of a request.
type faultStore struct {
	paddock.Store

	mu sync.Mutex
	// appendEvent is asked before an event is appended.
	appendEvent func(runID, typ string) error
	// updateJob is asked before a job is written.
	updateJob func(j *paddock.Job) error
	// jobs is asked before jobs are listed.
	jobs func() error
	// createJob is asked before a job is created.
	createJob func(j *paddock.Job) error
	// run is asked before a run is read (it may block).
	run func(id string) error
	// deaf makes View and Job ignore their caller's cancellation, as a
	// store whose reads never look at the context would.
	deaf bool
}

func (s *faultStore) set(fn func(s *faultStore)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s)
}

func (s *faultStore) View(ctx context.Context, fn func(paddock.Tx) error) error {
	s.mu.Lock()
	deaf := s.deaf
	s.mu.Unlock()
	if deaf {
		ctx = context.WithoutCancel(ctx)
	}
	return s.Store.View(ctx, func(tx paddock.Tx) error { return fn(&faultTx{Tx: tx, s: s}) })
}

func (s *faultStore) Update(ctx context.Context, fn func(paddock.Tx) error) error {
	return s.Store.Update(ctx, func(tx paddock.Tx) error { return fn(&faultTx{Tx: tx, s: s}) })
}

type faultTx struct {
	paddock.Tx
	s *faultStore
}

func (t *faultTx) get() faultStore {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return faultStore{appendEvent: t.s.appendEvent, updateJob: t.s.updateJob, jobs: t.s.jobs, createJob: t.s.createJob, run: t.s.run, deaf: t.s.deaf}
}

func (t *faultTx) Job(ctx context.Context, id string) (*paddock.Job, error) {
	if t.get().deaf {
		ctx = context.WithoutCancel(ctx)
	}
	return t.Tx.Job(ctx, id)
}

func (t *faultTx) AppendEvent(ctx context.Context, runID, typ string, data any) (*paddock.Event, error) {
	if h := t.get().appendEvent; h != nil {
		if err := h(runID, typ); err != nil {
			return nil, err
		}
	}
	return t.Tx.AppendEvent(ctx, runID, typ, data)
}

func (t *faultTx) UpdateJob(ctx context.Context, j *paddock.Job) error {
	if h := t.get().updateJob; h != nil {
		if err := h(j); err != nil {
			return err
		}
	}
	return t.Tx.UpdateJob(ctx, j)
}

func (t *faultTx) CreateJob(ctx context.Context, j *paddock.Job) error {
	if h := t.get().createJob; h != nil {
		if err := h(j); err != nil {
			return err
		}
	}
	return t.Tx.CreateJob(ctx, j)
}

func (t *faultTx) Jobs(ctx context.Context, run string, state paddock.JobState) ([]*paddock.Job, error) {
	if h := t.get().jobs; h != nil {
		if err := h(); err != nil {
			return nil, err
		}
	}
	return t.Tx.Jobs(ctx, run, state)
}

func (t *faultTx) Run(ctx context.Context, id string) (*paddock.Run, error) {
	if h := t.get().run; h != nil {
		if err := h(id); err != nil {
			return nil, err
		}
	}
	return t.Tx.Run(ctx, id)
}
