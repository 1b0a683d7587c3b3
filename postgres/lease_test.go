package postgres

import (
	"testing"
	"time"
)

// TestLeaseClockLateRenewal: a renewal sent soon after the last one that
// got through, but answered more than half a lease after it (held up by
// lost packets, retransmitted), is a return from a gap: the node is not
// steady for a lease, as after renewals that failed.
func TestLeaseClockLateRenewal(t *testing.T) {
	const lease = 400 * time.Millisecond
	c := newLeaseClock(lease)
	defer c.stop()
	first := time.Now()
	c.renewed(first)
	if !c.steady() {
		t.Fatal("not steady after a renewal")
	}
	time.Sleep(lease * 3 / 5)
	c.renewed(first.Add(lease / 3)) // sent a third of a lease after, answered only now
	if c.steady() {
		t.Fatal("steady right after a renewal answered more than half a lease after the last")
	}
	// A renewal answered in time is no gap.
	d := newLeaseClock(lease)
	defer d.stop()
	d.renewed(time.Now())
	time.Sleep(lease / 5)
	d.renewed(time.Now())
	if !d.steady() {
		t.Fatal("not steady after renewals a fifth of a lease apart")
	}
}
