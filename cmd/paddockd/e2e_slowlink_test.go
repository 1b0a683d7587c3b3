package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"testing"
)

// slowLink: the link between the node holding run id and PostgreSQL
// grows long (netlab.Delay: every packet held on the node's side, both
// ways), while a client writes through the node.
//
// At 50ms each way (a round trip of 0.1s, a twentieth of the lease, as
// between regions) the node holds its lease, and every write goes
// through, slower: a write is some twenty round trips to the store.
//
// At 1.2s each way a round trip is longer than the lease: no renewal can
// come back within the lease by the node's own clock, so from a lease
// after the link grew long the node refuses at once (node_lost) every
// call that needs the store, though the store may still count it alive
// (the renewals reach it). Once the link is short again the node serves
// again by itself; or, if another node marked it lost meanwhile, it
// stops. Either way no call hangs, and nothing from it lands after it was
// marked lost.
func (p *partition) slowLink(t *testing.T, id string) {
	p.t, p.lab.t, p.pg.t = t, t, t
	if id == "" {
		t.Skip("no run from CutFromStore")
	}
	h := p.nodes[p.holder(id)]
	if p.nodeState(h.id) != "alive" {
		t.Skipf("%s, the run's node, is %s after the subtests before", h.id, p.nodeState(h.id))
	}
	hang := 10 * partLease
	w := startWriter(h.c, id, "slow", hang)
	defer w.halt()
	p.waitFor("writes", 10*time.Second, func() bool { return len(w.since(time.Time{})) >= 3 })

	const short, long = 50 * time.Millisecond, 1200 * time.Millisecond
	from := time.Now()
	p.lab.delay(h.id, storeNet, short)
	time.Sleep(3 * partLease)
	shortEnd := time.Now()
	p.lab.delay(h.id, storeNet, long)
	time.Sleep(4 * partLease)
	longEnd := time.Now()
	p.lab.delay(h.id, storeNet, 0)
	var state string
	back := p.waitFor(h.id+" serving again or stopped", 10*partLease, func() bool {
		state = p.nodeState(h.id)
		if state != "alive" {
			return true
		}
		for _, c := range w.since(longEnd.Add(2 * long)) {
			if c.err == nil {
				return true
			}
		}
		return false
	})
	calls := w.halt()

	var during [2]map[string]int
	var slowest [2]time.Duration
	var acked []time.Duration
	for i := range during {
		during[i] = map[string]int{}
	}
	for _, c := range calls {
		if c.start.Before(from) || !c.start.Before(longEnd) {
			continue
		}
		code := codeOf(c.err)
		if code == "hung" {
			t.Fatalf("a write on the slow link hung: %s %s after the delay began", c.path, c.start.Sub(from))
		}
		i := 0
		if c.end.After(shortEnd) {
			i = 1
			// A lease into the long link, and a round trip more, the
			// node's clock has run out: it refuses at once.
			if c.start.After(shortEnd.Add(partLease + 2*long)) {
				if c.err == nil {
					t.Errorf("a write made %s into the long link was acknowledged: the node's lease ran out by its clock", c.start.Sub(shortEnd).Round(time.Millisecond))
				}
			}
		}
		during[i][code]++
		slowest[i] = max(slowest[i], c.took())
		if i == 0 && c.err == nil {
			acked = append(acked, c.took())
		}
	}
	slices.Sort(acked)
	var median time.Duration
	if len(acked) > 0 {
		median = acked[len(acked)/2]
	}
	t.Logf("on the short link, acknowledged writes took %v: the median %s (%d round trips)", acked, median.Round(time.Millisecond), median/(2*short))
	t.Logf("%s's link to the store: %s each way for %s, writes ended by then %v (\"\" acknowledged), the slowest %s (%d round trips); %s each way for %s, writes %v, the slowest %s; after it %s in %s",
		h.id, short, shortEnd.Sub(from).Round(time.Millisecond), during[0], slowest[0].Round(time.Millisecond), slowest[0]/(2*short),
		long, longEnd.Sub(shortEnd).Round(time.Millisecond), during[1], slowest[1].Round(time.Millisecond), afterLong(state), back.Round(time.Millisecond))
	if n := total(during[0]); n < 1 || during[0][""] != n {
		logb, _ := os.ReadFile(filepath.Join(h.home, "test-daemon.log"))
		t.Fatalf("on a link %s long each way, %d of %d writes were acknowledged: want all\n%s", short, during[0][""], n, tail(string(logb), 30))
	}
	if during[1]["node_lost"] == 0 {
		t.Fatalf("no write on a link %s long each way answered node_lost: %v", long, during[1])
	}
	p.checkOneOwner(id, h, state)
}

func afterLong(state string) string {
	if state == "alive" {
		return "it served again"
	}
	return fmt.Sprintf("it was %s", state)
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
