package main

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paddock-dev/paddock/internal/netlab"
)

// TestStorePromoted (issue #35): PostgreSQL with a synchronous streaming
// replica, each on a machine of its own, and three nodes that name both
// (target_session_attrs=read-write: a node takes only the one that
// accepts writes). While clients write through every node, the primary
// is killed (-9) and, half a lease later, the replica is promoted, as a
// failover manager would. Every call made meanwhile fails, saying so, and
// none hangs; the nodes find the new primary by themselves; every write
// acknowledged before, during and after is among its run's events on the
// new primary, gap-free; and no node was marked lost for the outage.
func TestStorePromoted(t *testing.T) {
	p := newPartition(t)
	ctx := context.Background()
	standby, err := p.pg.StartStandby(ctx, "pg2", 2)
	if err != nil {
		t.Fatal(err)
	}
	p.url = netlab.URLOf(p.pg.Postgres, standby)
	first := p.start("n1", 11)
	p.start("n2", 12)
	p.start("n3", 13)
	repo := newRepo(t, filepath.Join(p.base, "src", "app"), 3)
	cli(t, first.home, "project", "add", repo).must(t)
	live := []*partNode{p.nodes["n1"], p.nodes["n2"], p.nodes["n3"]}
	runs, writers := p.writeThroughEach(live, "pr")
	killAt := time.Now()
	p.pg.halt(syscall.SIGKILL)
	time.Sleep(partLease / 2)
	took, err := standby.Promote(ctx)
	if err != nil {
		t.Fatal(err)
	}
	promotedAt := time.Now()
	// The test's own view of the store is the new primary's from now on.
	db, err := pgxpool.New(ctx, standby.DSN("paddock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	p.db = db
	back := map[string]time.Duration{}
	for _, n := range live {
		w := writers[n]
		p.waitExplained("a write through "+n.id+" after the promotion", 15*partLease, func() bool {
			for _, c := range w.since(promotedAt) {
				if c.err == nil {
					back[n.id] = c.end.Sub(promotedAt)
					return true
				}
			}
			return false
		}, func() string {
			var b strings.Builder
			for _, m := range live {
				b.WriteString(p.explainNode(m, writers[m], killAt))
				b.WriteString("\n")
			}
			return b.String()
		})
	}
	time.Sleep(partLease)
	t.Logf("the primary killed; the standby promoted %s later (pg_promote took %s); the first write acknowledged after, by node: %v",
		promotedAt.Sub(killAt).Round(time.Millisecond), took.Round(time.Millisecond), back)
	for _, n := range live {
		calls := writers[n].halt()
		p.checkOutage(n, runs[n], calls, killAt, promotedAt)
	}
	// Every node's connections are to the new primary: none is left on a
	// server that is gone, and none was let onto the standby before it
	// was promoted (its writes would have failed, read-only).
	var conns int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = 'paddock' AND host(client_addr) LIKE '10.213.%'`).Scan(&conns); err != nil {
		t.Fatal(err)
	}
	if conns < len(live) {
		t.Fatalf("the new primary has %d connections from the nodes, want at least %d", conns, len(live))
	}
}
