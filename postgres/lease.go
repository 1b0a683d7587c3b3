package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/paddock-dev/paddock"
)

// errLapsed is in the chain of a call a joined node refused, or cut
// short, because its lease ran out by its own clock: it has not reached
// the database for longer than its lease.
var errLapsed = errors.New("postgres: this node's lease ran out by its own clock")

// leaseClock is what a node knows of its lease without asking the
// database: it holds until the time a renewal that succeeded was sent,
// plus the lease (the database set lease_until from its own clock, later
// than the send). A node cut from the database (a dead link, a switch
// that drops its packets) would otherwise wait on its connections until
// the kernel gives up on them, a quarter of an hour later, with its
// callers waiting behind it; by its lease's end another node may mark it
// lost and adopt its runs, so from then on it calls the database for
// nothing until a renewal gets through again, and the calls under way
// when the lease runs out are cut short. The fence (Store.fence) stays
// what keeps a lost node's writes out; this is only how soon it knows.
type leaseClock struct {
	lease time.Duration

	mu    sync.Mutex
	sent  time.Time // the last renewal that succeeded was sent then
	held  context.Context
	end   context.CancelCauseFunc
	timer *time.Timer
	// back is when a renewal's success came more than half a lease after
	// the last one before it had been sent (renewals go every third of a
	// lease: those between failed, or hung on a link that dropped their
	// packets): Store.Reap waits a lease from then.
	back time.Time
}

func newLeaseClock(lease time.Duration) *leaseClock {
	return &leaseClock{lease: lease}
}

// renewed records a renewal sent at sent that succeeded: the lease holds
// until sent plus the lease.
func (c *leaseClock) renewed(sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !sent.After(c.sent) {
		return
	}
	// Back from a gap: just before this answer came, the last renewal
	// that had got through was sent more than half a lease ago, whether
	// those since failed or hung (a renewal held up by lost packets gets
	// through late, sent soon after the one before it).
	if !c.sent.IsZero() && time.Since(c.sent) > c.lease/2 {
		c.back = time.Now()
	}
	c.sent = sent
	left := time.Until(sent.Add(c.lease))
	if left <= 0 {
		return // it ran out while the renewal was on its way
	}
	if c.held != nil && c.held.Err() == nil && c.timer.Stop() {
		c.timer.Reset(left)
		return
	}
	c.held, c.end = context.WithCancelCause(context.Background())
	end := c.end
	c.timer = time.AfterFunc(left, func() { end(errLapsed) })
}

// steady says whether this node may judge others' leases: its last
// renewal that succeeded was sent less than half a lease ago (renewals
// go every third of one: it is in touch with the store now), and none
// came back from a longer gap less than a lease ago (the others' leases
// may have run out with its own, and they get a lease to renew theirs).
func (c *leaseClock) steady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Since(c.sent) < c.lease/2 && (c.back.IsZero() || time.Since(c.back) >= c.lease)
}

// current is a context that ends, with cause errLapsed, when the lease
// runs out by this clock, and when the last renewal was sent.
func (c *leaseClock) current() (context.Context, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held, c.sent
}

// stop ends the clock's timer (the node left).
func (c *leaseClock) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
}

// lapsedError is the error of a call refused or cut short because node
// id's lease ran out by its clock, the last renewal sent at sent.
func lapsedError(id string, lease time.Duration, sent time.Time, during string) error {
	msg := fmt.Sprintf("node %s has not reached the shared store for %s, longer than its lease (%s): "+
		"another node may mark it lost and adopt its runs; it answers nothing that needs the store until it reaches it again",
		id, time.Since(sent).Round(100*time.Millisecond), lease)
	if during != "" {
		msg += "; " + during
	}
	return &paddock.Error{Code: paddock.CodeNodeLost, Message: msg, Err: errLapsed}
}

// bound returns ctx, and a context of its own (for a rollback or a
// commit, which the caller's end does not interrupt), both ended when
// this node's lease runs out by its clock; done releases them. A node
// whose lease already ran out is refused at once. A store that has not
// joined is not bounded.
func (s *Store) bound(ctx context.Context) (call, own context.Context, done func(), err error) {
	n := s.node.Load()
	if n == nil {
		return ctx, context.WithoutCancel(ctx), func() {}, nil
	}
	if n.lost.Load() {
		return nil, nil, nil, fenced(n.cfg.ID)
	}
	held, sent := n.clock.current()
	if held.Err() != nil {
		return nil, nil, nil, lapsedError(n.cfg.ID, n.cfg.Lease, sent, "")
	}
	call, endCall := context.WithCancelCause(ctx)
	own, endOwn := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(held, func() {
		endCall(errLapsed)
		endOwn(errLapsed)
	})
	return call, own, func() {
		stop()
		endCall(nil)
		endOwn(nil)
	}, nil
}

// lapsed is err, or the lease's error when ctx (from bound) ended because
// the lease ran out: during says what became of the call.
// A call that failed because the store could not be reached (down,
// restarting, its connection ended under it) says so, as lapsed does.
func (s *Store) lapsed(ctx context.Context, err error, during string) error {
	if err == nil {
		return nil
	}
	if !errors.Is(context.Cause(ctx), errLapsed) {
		return unreachable(s.nodeID(), err, during)
	}
	n := s.node.Load()
	_, sent := n.clock.current()
	return lapsedError(n.cfg.ID, n.cfg.Lease, sent, during)
}

// within returns ctx bounded by this node's lease (bound), and finish,
// which releases it and turns *err into the lease's error when the
// lease's end cut the call short. A node whose lease ran out is refused
// at once.
func (s *Store) within(ctx context.Context) (context.Context, func(*error), error) {
	ctx, _, done, err := s.bound(ctx)
	if err != nil {
		return nil, nil, err
	}
	return ctx, func(err *error) {
		done()
		*err = s.lapsed(ctx, *err, "")
	}, nil
}

// unreachable is err, or, if err says the store could not be reached
// (no connection, or the one under way ended: the server shut down,
// restarted, crashed), an error that says so, what became of the call
// (during) and that it is worth making again. Its code stays internal
// (the list of codes is closed) but its message is the client's to see;
// err, which may name the server's address, is for the log.
func unreachable(node string, err error, during string) error {
	if err == nil || !connLost(err) {
		return err
	}
	var pe *paddock.Error
	if errors.As(err, &pe) {
		return err // said already
	}
	who := "this paddock"
	if node != "" {
		who = "node " + node
	}
	msg := who + " cannot reach the shared store (PostgreSQL is down, restarting or unreachable); make the call again once it is back"
	if during != "" {
		msg = who + " cannot reach the shared store (PostgreSQL is down, restarting or unreachable): " + during + "; make the call again once it is back"
	}
	return &paddock.Error{Code: paddock.CodeInternal, Message: msg, Err: fmt.Errorf("%w: %w", paddock.ErrStoreUnreachable, err)}
}

// connLost says whether err is the loss of the connection to the store,
// or the failure to make one, rather than an answer of the store's.
func connLost(err error) bool {
	var ce *pgconn.ConnectError
	var pg *pgconn.PgError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		return true
	case errors.As(err, &pg):
		// 57P01-57P05: the server shut down, crashed, is starting or
		// ending this session; 08: the connection failed.
		return strings.HasPrefix(pg.Code, "57P") || strings.HasPrefix(pg.Code, "08")
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	return strings.Contains(err.Error(), "conn closed")
}
