package postgres

import "time"

// TrustLeaseClock has this node's own lease clock (lease.go) believe its
// lease holds for a whole lease from now, as the clock of a node paused
// between its check and its write would: only the database's fence
// stands between it and the store then, which is what a test of that
// fence needs.
func (s *Store) TrustLeaseClock() { s.node.Load().clock.renewed(time.Now()) }

// TrustLeaseClockSteady is TrustLeaseClock without the gap it would see:
// the clock believes it is steady (leaseClock.steady), whatever the
// database last heard of this node, as the clock of a node whose reap was
// held up in an outage would.
func (s *Store) TrustLeaseClockSteady() {
	c := s.node.Load().clock
	c.mu.Lock()
	c.sent, c.back = time.Time{}, time.Time{}
	c.mu.Unlock()
	c.renewed(time.Now())
}
