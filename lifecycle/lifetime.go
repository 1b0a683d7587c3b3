package lifecycle

import (
	"context"
	"sync"
)

// lifetime is a service's own span of work: a context that ends when the
// service stops (a child of the kernel's, so Close ends it too), and the
// goroutines the service started, which close waits for. The job runner
// is the same for jobs.
type lifetime struct {
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex // held while a goroutine is counted, so close waits for it
	wg     sync.WaitGroup
}

func newLifetime(parent context.Context) *lifetime {
	l := &lifetime{}
	l.ctx, l.cancel = context.WithCancel(parent)
	return l
}

// goBackground runs fn in a goroutine of the lifetime, which close waits
// for, and says so; once the lifetime has ended it runs nothing.
func (l *lifetime) goBackground(fn func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return false
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		fn()
	}()
	return true
}

// close ends the lifetime and waits for its goroutines.
func (l *lifetime) close() {
	// Under mu: goBackground starts nothing after this, and what it
	// started before is counted in wg.
	l.mu.Lock()
	l.cancel()
	l.mu.Unlock()
	l.wg.Wait()
}
