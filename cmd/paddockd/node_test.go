package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/postgres"
	"github.com/paddock-dev/paddock/postgres/pgtest"
)

// TestJoinedNodeKeepsItsLeaseWhileStarting: serve joins the cluster, then
// makes its Manager and recovers (every active run checkpointed, with git
// and a checkpoint of its whole change set stored in the shared store),
// and only once it serves does the node's loop renew its lease (a third of
// a lease later). A restart with more to recover than a lease's worth of
// time (15 s by default) is marked lost by the other nodes before it
// serves: its recovery's writes are refused, its runs reported node_lost
// and offered for adoption, and at its first renewal it stops, to be
// restarted into the same. The lease must be renewed from the join on.
func TestJoinedNodeKeepsItsLeaseWhileStarting(t *testing.T) {
	base := t.TempDir()
	url := pgtest.Need(t).URL(t, base)
	ctx := context.Background()
	open := func() *postgres.Store {
		s, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	home := filepath.Join(base, "n1")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n, err := joinCluster(ctx, home, config{NodeID: "n1", NodeLease: "1s"}, open(), slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer n.ln.Close()
	defer n.stopRenewing() // before the store closes under it
	other := open()
	if _, err := other.Join(ctx, postgres.NodeConfig{ID: "n2", Home: "n2", Address: "http://127.0.0.1:1", Capacity: 1, Lease: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	// What serve does between joining and serving (NewManager, Recover)
	// takes this long.
	time.Sleep(2500 * time.Millisecond)
	lost, err := other.Reap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(lost) != 0 {
		t.Fatalf("node n1 was marked lost while it started: its lease (1s) is renewed only once it serves")
	}
}
