package lifecycle

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
)

// jobRunner runs the jobs of one daemon instance, each in a goroutine of
// its own, and renews their leases while they run. Its context is the
// parent of every job's: close cancels it, refuses new jobs and returns
// once every job's goroutine has returned, the job's end recorded. The
// Manager makes one in NewManager and closes it in Close.
//
// The runner knows nothing of what a job does: it is given a job's record
// and a function to run, and the Manager's store through renew and end.
type jobRunner struct {
	ctx  context.Context
	stop context.CancelFunc // cancels ctx
	// renew pushes a running job's lease on; the runner calls it every
	// leaseRenew while the job runs.
	renew func(ctx context.Context, j *paddock.Job) error
	// end records how a job ended (the fields its run function set), once
	// its lease is no longer renewed.
	end func(j *paddock.Job)
	log func() *slog.Logger

	wg      sync.WaitGroup
	mu      sync.Mutex
	closed  bool
	cancels map[string]context.CancelFunc // the running jobs, by id
}

func newJobRunner(parent context.Context, renew func(context.Context, *paddock.Job) error, end func(*paddock.Job), log func() *slog.Logger) *jobRunner {
	ctx, stop := context.WithCancel(parent)
	return &jobRunner{ctx: ctx, stop: stop, renew: renew, end: end, log: log, cancels: map[string]context.CancelFunc{}}
}

// start runs job j in a goroutine of its own: run, with j's lease renewed
// meanwhile, then end. run's context keeps ctx's values (the request's)
// but not its end: it ends when the job is cancelled or the runner closes.
// Once close has begun, start refuses (ErrClosed) and runs nothing.
func (r *jobRunner) start(ctx context.Context, j *paddock.Job, run func(ctx context.Context)) error {
	jctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		cancel()
		return errClosed()
	}
	r.cancels[j.ID] = cancel
	r.wg.Add(1)
	r.mu.Unlock()
	stopFollowing := context.AfterFunc(r.ctx, cancel)
	go func() {
		defer r.wg.Done()
		// The job is cancellable until its end is recorded: a CancelJob
		// meanwhile waits for that record rather than taking the job for
		// another daemon's.
		defer func() {
			stopFollowing()
			cancel()
			r.mu.Lock()
			delete(r.cancels, j.ID)
			r.mu.Unlock()
		}()
		renewCtx, stopRenewing := context.WithCancel(jctx)
		renewed := make(chan struct{})
		go func() { defer close(renewed); r.renewLease(renewCtx, j) }()
		run(jctx)
		stopRenewing()
		<-renewed
		r.end(j)
	}()
	return nil
}

// cancelJob cancels job id, if this runner runs it.
func (r *jobRunner) cancelJob(id string) bool {
	r.mu.Lock()
	c := r.cancels[id]
	r.mu.Unlock()
	if c == nil {
		return false
	}
	c()
	return true
}

// running is how many jobs the runner runs: started, their end not yet
// recorded.
func (r *jobRunner) running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cancels)
}

// close refuses new jobs, cancels the running ones and waits for their
// goroutines to return. A second close waits too.
func (r *jobRunner) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.stop()
	r.wg.Wait()
}

// renewLease renews j's lease every leaseRenew until ctx ends. A failed
// renewal is logged and tried again at the next tick: the lease outlives
// a few.
func (r *jobRunner) renewLease(ctx context.Context, j *paddock.Job) {
	tick := time.NewTicker(leaseRenew)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// A renewal under way is finished even if the job ends meanwhile.
		if err := r.renew(context.WithoutCancel(ctx), j); err != nil && ctx.Err() == nil {
			r.log().Warn("cannot renew a job's lease", "run", j.RunID, "job", j.ID, "err", err)
		}
	}
}
