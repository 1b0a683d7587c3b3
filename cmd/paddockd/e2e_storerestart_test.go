package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// storeRestart (issue #35): while clients write through every live node,
// PostgreSQL stops (sig: SIGINT, its fast shutdown; SIGKILL, the
// postmaster killed) and starts again down longer than a lease, one node
// slower than the others to come back. Every
// call made meanwhile fails, saying so, and none hangs; the nodes reach
// the store again by themselves; every write acknowledged is among its
// run's events, whose seqs have no gap; and whatever became of the
// nodes' leases, no run had two owners: nothing from a node after its
// run's run.node_lost.
func (p *partition) storeRestart(t *testing.T, sig syscall.Signal) {
	p.t, p.lab.t, p.pg.t = t, t, t
	var live []*partNode
	for _, id := range []string{"n1", "n2", "n3"} {
		if n := p.nodes[id]; n != nil && p.nodeState(id) == "alive" {
			live = append(live, n)
		}
	}
	if len(live) == 0 {
		t.Skip("no live node left by the subtests before")
	}
	// A tag of this stop's own: the writers' idempotency keys name their
	// files, and the subtest before this one, on the same cluster, kept
	// its keys' records (a key made again for another call is a conflict).
	runs, writers := p.writeThroughEach(live, fmt.Sprintf("rs%d", sig))
	stopAt := time.Now()
	p.pg.halt(sig)
	stopped := time.Since(stopAt)
	time.Sleep(2 * partLease)
	// One node is slower to come back than the others (paused, as a
	// node busy or swapping would be): it renews its lease three
	// quarters of a lease after the server is ready, well after the
	// first node back could mark it lost.
	var slow *partNode
	paused := "none"
	if len(live) > 1 {
		slow = live[len(live)-1]
		paused = slow.id
		slow.d.cmd.Process.Signal(syscall.SIGSTOP)
		defer slow.d.cmd.Process.Signal(syscall.SIGCONT)
	}
	startAt := time.Now()
	p.pg.start()
	started := time.Since(startAt)
	p.db.Reset() // the test's own connections died with the server
	if slow != nil {
		time.Sleep(3 * partLease / 4)
		slow.d.cmd.Process.Signal(syscall.SIGCONT)
	}
	back := map[string]time.Duration{}
	for _, n := range live {
		w := writers[n]
		p.waitExplained("a write through "+n.id+" after the restart", 15*partLease, func() bool {
			for _, c := range w.since(startAt) {
				if c.err == nil {
					back[n.id] = c.end.Sub(startAt)
					return true
				}
			}
			return p.nodeState(n.id) == "lost"
		}, func() string { return p.explainNode(n, w, stopAt) })
	}
	time.Sleep(partLease)
	t.Logf("postgres stopped (%v) in %s, down %s, started in %s (%s paused until %s after); the first write acknowledged after the start, by node: %v",
		sig, stopped.Round(time.Millisecond), startAt.Sub(stopAt).Round(time.Millisecond), started.Round(time.Millisecond),
		paused, 3*partLease/4, back)
	for _, n := range live {
		calls := writers[n].halt()
		p.checkOutage(n, runs[n], calls, stopAt, startAt)
	}
}

// writeThroughEach makes a run through each of the live nodes and starts
// a writer into it (its files named tag-NODE-k), and returns once each
// has written a few.
func (p *partition) writeThroughEach(live []*partNode, tag string) (map[*partNode]string, map[*partNode]*writer) {
	p.t.Helper()
	runs := map[*partNode]string{}
	writers := map[*partNode]*writer{}
	for _, n := range live {
		id := strings.TrimSpace(cli(p.t, n.home, "create", "-p", "app", "--kind", "overlay").must(p.t).out)
		runs[n] = id
		writers[n] = startWriter(n.c, id, tag+"-"+n.id, 10*partLease)
	}
	for _, n := range live {
		p.waitFor("writes through "+n.id, 10*time.Second, func() bool { return len(writers[n].since(time.Time{})) >= 3 })
	}
	return runs, writers
}

// checkOutage checks what node n's clients saw of the store's outage
// (from stopAt to startAt) while writing into run id, and the run's
// events after it.
func (p *partition) checkOutage(n *partNode, id string, calls []clientCall, stopAt, startAt time.Time) {
	t := p.t
	acked := map[string]bool{}
	seen, after := map[string]int{}, map[string]int{}
	var slowest time.Duration
	var sample error
	for _, c := range calls {
		if c.err == nil {
			acked[c.path] = true
		}
		if c.start.After(startAt) {
			after[codeOf(c.err)]++
			continue
		}
		if c.end.Before(stopAt) {
			continue
		}
		code := codeOf(c.err)
		seen[code]++
		slowest = max(slowest, c.took())
		if code == "hung" {
			t.Fatalf("a call through %s hung while the store was down: %s, started %s after the stop", n.id, c.path, c.start.Sub(stopAt))
		}
		if c.err != nil && sample == nil && c.start.After(stopAt) {
			sample = c.err
		}
		// Clear: node_lost (the node's lease ran out by its clock while it
		// could not renew it) or a message that says the store is out of
		// reach, not a bare internal error.
		if c.err != nil && code != string(paddock.CodeNodeLost) && !strings.Contains(c.err.Error(), "cannot reach the shared store") {
			t.Fatalf("a call through %s while the store was down, %s after the stop: %v", n.id, c.start.Sub(stopAt).Round(time.Millisecond), c.err)
		}
	}
	state := p.nodeState(n.id)
	t.Logf("%s (now %s): calls during the outage %v (\"\" acknowledged), the slowest answer %s; e.g. %v; after the start %v",
		n.id, state, seen, slowest.Round(time.Millisecond), sample, after)
	evs := p.events(id)
	stored := map[string]bool{}
	lostAt := map[string]int64{}
	addrs := map[string]string{}
	for _, m := range p.nodes {
		addrs[p.lab.addr(storeNet, m.host)] = m.id
	}
	for _, e := range evs {
		if e.typ == paddock.EventNodeLost {
			var lost struct{ Node string }
			json.Unmarshal([]byte(e.data), &lost)
			lostAt[lost.Node] = e.seq
		}
		if at, ok := lostAt[addrs[e.addr]]; ok {
			t.Fatalf("run %s: event %d (%s) from %s, after its run.node_lost (event %d)", id, e.seq, e.typ, addrs[e.addr], at)
		}
		for path := range acked {
			if strings.Contains(e.data, `"path":"`+path+`"`) {
				stored[path] = true
			}
		}
	}
	for path := range acked {
		if !stored[path] {
			t.Fatalf("run %s: the write of %s was acknowledged but is not among its events", id, path)
		}
	}
	t.Logf("run %s (made through %s, on %s): %d writes acknowledged, all stored; %d events gap-free; node_lost events %v",
		id, n.id, p.holder(id), len(acked), len(evs), lostAt)
	// The nodes came back together: none marked another lost for a lease
	// that ran out while none of them could renew it.
	if state != "alive" || len(lostAt) > 0 {
		t.Fatalf("%s is %s after the store's restart; run %s's node_lost events: %v", n.id, state, id, lostAt)
	}
}
