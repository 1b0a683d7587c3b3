package lifecycle

import "sync"

// runLocks is a lock per run that keeps no entry for a run nobody holds:
// an entry lives while a caller holds it or waits for it, and goes with the
// last one, so a daemon that has seen a million runs holds no lock for
// them. The zero value is ready.
type runLocks struct {
	mu sync.Mutex
	m  map[string]*runLock
}

type runLock struct {
	sync.RWMutex
	refs int // callers holding or waiting for it, under runLocks.mu
}

func (l *runLocks) acquire(id string) *runLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*runLock{}
	}
	e := l.m[id]
	if e == nil {
		e = &runLock{}
		l.m[id] = e
	}
	e.refs++
	return e
}

func (l *runLocks) release(id string, e *runLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(l.m, id)
	}
}

// contended says whether anyone but its holder holds or waits for run
// id's lock (taken with lock).
func (l *runLocks) contended(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[id]
	return e != nil && e.refs > 1
}

// lock takes run id's lock, waiting for it; unlock gives it back.
func (l *runLocks) lock(id string) (unlock func()) { return l.lockAfter(id, nil) }

// lockAfter is lock calling first, if set, before it waits, once it is
// counted among the lock's holders and waiters (contended sees it).
func (l *runLocks) lockAfter(id string, first func()) (unlock func()) {
	e := l.acquire(id)
	if first != nil {
		first()
	}
	e.Lock()
	return func() {
		e.Unlock()
		l.release(id, e)
	}
}

// tryLock takes run id's lock if nobody holds it, shared or not.
func (l *runLocks) tryLock(id string) (unlock func(), ok bool) {
	e := l.acquire(id)
	if !e.TryLock() {
		l.release(id, e)
		return nil, false
	}
	return func() {
		e.Unlock()
		l.release(id, e)
	}, true
}

// tryRLock takes run id's lock shared, unless it is held exclusively.
func (l *runLocks) tryRLock(id string) (unlock func(), ok bool) {
	e := l.acquire(id)
	if !e.TryRLock() {
		l.release(id, e)
		return nil, false
	}
	return func() {
		e.RUnlock()
		l.release(id, e)
	}, true
}
