package lifecycle

import (
	"context"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
)

// Calls keeps the calls made with idempotency keys (paddock.IdempotencyHeader)
// in the store, so that a call made again with the same key, on this node
// or another, is done once: the first attempt claims the key, runs, and
// records its answer; a later one gets that answer again, or, while the
// first still runs, is told so. A call that did nothing (refused before
// any effect) gives its key back, so that it may be made again.
//
// The keys are the HTTP API's (httpapi keys them by caller); Calls knows
// only scoped keys and request hashes.
//
// Its records are committed lazily where the store can
// (paddock.LazyUpdater: SQLite): a claim survives the daemon's crash at
// once, and a power loss once the next commit is made, which for a
// command is its events', right after it. A single machine's store has
// its clients on that machine (a unix socket, loopback TCP), and a
// machine's crash ends them and their retries with it. PostgreSQL's
// nodes, whose clients outlive any one machine, commit each claim
// durably before the call is made.
type Calls struct {
	*kernel

	owner string // this daemon instance, the claims' owner
	life  *lifetime

	mu sync.Mutex
	// running are the keys this instance is making a call of, from before
	// its claim until its end is written: each channel is closed then.
	running map[string]chan struct{}
	pruned  time.Time // the last prune of old records
}

// callPruneEvery is how often Begin prunes the records older than
// paddock.CallKeyTerm.
const callPruneEvery = time.Minute

// Begin claims key for the call whose hash is request. A nil record means
// the call is the caller's to make, and then to Finish, Forget or Abandon;
// a record is the key's earlier call: done (its answer), or not. A call
// of the key already being made here is such a record, without a claim.
func (c *Calls) Begin(ctx context.Context, key, request string) (*paddock.CallRecord, error) {
	c.mu.Lock()
	if c.running[key] != nil {
		c.mu.Unlock()
		return &paddock.CallRecord{Key: key, Request: request, Owner: c.owner, CreatedAt: now()}, nil
	}
	if c.running == nil {
		c.running = map[string]chan struct{}{}
	}
	// Counted running before its claim commits: a call made again that
	// finds the claim then is told the call is being made, not that its
	// answer was lost.
	c.running[key] = make(chan struct{})
	prune := time.Since(c.pruned) > callPruneEvery
	if prune {
		c.pruned = time.Now()
	}
	c.mu.Unlock()
	var old *paddock.CallRecord
	var before time.Time // the records made before it pruned
	if prune {
		before = now().Add(-paddock.CallKeyTerm)
	}
	// In as few round trips as the store can (paddock.ClaimCall); lazily
	// where it can, as updateLazy.
	err := c.write(func() (err error) {
		old, err = paddock.ClaimCall(ctx, c.Store, &paddock.CallRecord{Key: key, Request: request, Owner: c.owner, CreatedAt: now()}, before)
		return err
	})
	switch {
	case err != nil:
		// A commit cut short may have been stored: the claim, if it was,
		// is given back (this instance's, never done), so that the call
		// may be made again.
		c.Forget(ctx, key)
		return nil, err
	case old != nil:
		c.done(key)
	}
	return old, nil
}

// Lookup returns key's record, or nil if it has none; it claims nothing.
func (c *Calls) Lookup(ctx context.Context, key string) (rec *paddock.CallRecord, err error) {
	err = c.Store.View(ctx, func(tx paddock.Tx) error {
		rec, err = tx.CallKeys().Get(ctx, key)
		return err
	})
	return rec, err
}

// Running says whether rec's call is running now: claimed by this
// instance and not finished. A call another instance claimed and never
// finished is either running there (another node) or was cut short (a
// previous daemon here): Calls cannot tell which.
func (c *Calls) Running(rec *paddock.CallRecord) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return rec.Owner == c.owner && c.running[rec.Key] != nil
}

// Mine says whether rec was claimed by this daemon instance.
func (c *Calls) Mine(rec *paddock.CallRecord) bool { return rec.Owner == c.owner }

// Wait waits up to d (or ctx's end) until rec's call, running here, has
// its end recorded, and says whether it has.
func (c *Calls) Wait(ctx context.Context, rec *paddock.CallRecord, d time.Duration) bool {
	c.mu.Lock()
	ch := c.running[rec.Key]
	c.mu.Unlock()
	if ch == nil || rec.Owner != c.owner {
		return rec.Owner == c.owner
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// Finish records the answer of the call Begin gave the caller, after the
// caller has it: in the background, its key counted running until the
// record is written (a call made again meanwhile waits for it, and then
// gets the answer). A record that cannot be written leaves the key
// claimed and unfinished, and is logged: a call made again is told its
// answer was lost, never made twice.
func (c *Calls) Finish(ctx context.Context, key string, status int, answer []byte) {
	c.later(ctx, key, "finish", func(ctx context.Context, tx paddock.Tx) error {
		return tx.CallKeys().Finish(ctx, key, c.owner, status, answer)
	})
}

// Forget gives back the key of a call that did nothing, so that it may
// be made again; in the background, as Finish.
func (c *Calls) Forget(ctx context.Context, key string) {
	c.later(ctx, key, "forget", func(ctx context.Context, tx paddock.Tx) error {
		return tx.CallKeys().Forget(ctx, key, c.owner)
	})
}

// Abandon ends a call whose end cannot be known (its handler panicked):
// its key stays claimed and unfinished, and a call made again is told so.
func (c *Calls) Abandon(key string) { c.done(key) }

// later writes a key's end whatever becomes of the request that made the
// call, in the background while the Manager runs (at once once it is
// closing), and then counts the key no longer running.
func (c *Calls) later(ctx context.Context, key, what string, fn func(context.Context, paddock.Tx) error) {
	ctx = context.WithoutCancel(ctx)
	write := func() {
		defer c.done(key)
		if err := c.updateLazy(ctx, func(tx paddock.Tx) error { return fn(ctx, tx) }); err != nil {
			c.log().Error("cannot record the end of a call made with an idempotency key; made again, it will be refused", "do", what, "err", err)
		}
	}
	if c.life == nil || !c.life.goBackground(write) {
		write()
	}
}

func (c *Calls) done(key string) {
	c.mu.Lock()
	if ch := c.running[key]; ch != nil {
		close(ch)
		delete(c.running, key)
	}
	c.mu.Unlock()
}
