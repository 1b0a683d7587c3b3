package postgres_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/postgres"
	"github.com/paddock-dev/paddock/postgres/pgtest"
)

// TestTakeRunRacesItsNodeRejoining: a node that left (or was lost) joins
// again while another node is adopting one of its runs. TakeRun read the
// node's state without locking its row, so the rejoin committed between
// TakeRun's check and its commit: the rejoined node listed the run among
// its own workspaces (what its Recover acts on, with writes its fence lets
// through) while the adopting node took it. Two nodes owned one run.
// Either the rejoin must wait for the take (and then not see the run), or
// the take must be refused.
func TestTakeRunRacesItsNodeRejoining(t *testing.T) {
	ns := nodes(t, 2, 30*time.Second)
	a, b := ns[0], ns[1]
	ctx := context.Background()
	mkRun(t, a, "app", "r-1", paddock.StateActive)
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	type seen struct {
		ids []string
		err error
	}
	rejoined := make(chan seen, 1)
	var during bool
	_, takeErr := b.TakeRun(ctx, "r-1", func(tx paddock.Tx) error {
		// b has checked that n0 is not alive; n0 restarts now.
		go func() {
			var s seen
			if _, s.err = a.Join(ctx, postgres.NodeConfig{ID: "n0", Home: "home-n0", Address: "http://127.0.0.1:1", Capacity: 4, Lease: 30 * time.Second}); s.err == nil {
				// What n0's Recover starts from: its own workspaces.
				s.err = a.View(ctx, func(tx paddock.Tx) error {
					ws, err := tx.Workspaces(ctx)
					for _, w := range ws {
						s.ids = append(s.ids, w.RunID)
					}
					return err
				})
			}
			rejoined <- s
		}()
		select {
		case s := <-rejoined:
			during = true
			rejoined <- s
		case <-time.After(time.Second):
		}
		return nil
	})
	var s seen
	select {
	case s = <-rejoined:
	case <-time.After(20 * time.Second):
		t.Fatal("n0's rejoin never returned")
	}
	if s.err != nil {
		t.Fatalf("rejoin: %v", s.err)
	}
	if takeErr != nil {
		if !paddock.IsCode(takeErr, paddock.CodeConflict) {
			t.Fatalf("take: %v", takeErr)
		}
		return // refused: n0 keeps its run, nobody else has it
	}
	var owner string
	if err := b.View(ctx, func(tx paddock.Tx) error {
		r, err := tx.Run(ctx, "r-1")
		if err == nil {
			owner = r.Node
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range s.ids {
		if id == "r-1" && owner != "n0" {
			t.Fatalf("run r-1 is n1's (taken while n0 rejoined: rejoin finished inside the take: %v), yet n0, alive again, lists it as its own", during)
		}
	}
}

// TestExpectedSeqHoldsUntilCommit: the seq rule (a mutating call with
// ?expect_seq=N is refused once the run moved on) is checked by
// lifecycle.checkExpect with tx.Run's last_seq, inside the Update that then
// records the call's event. SQLite runs one writer at a time, so the check
// holds until the commit; here two Updates (on two nodes, or two calls on
// one) both read last_seq 0, both pass, and both append: two calls that
// each expected the run unchanged since seq 0 both went through.
func TestExpectedSeqHoldsUntilCommit(t *testing.T) {
	ns := nodes(t, 2, 30*time.Second)
	ctx := context.Background()
	mkRun(t, ns[0], "app", "r-1", paddock.StateActive)
	var read sync.WaitGroup
	read.Add(2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, s := range ns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Update(ctx, func(tx paddock.Tx) error {
				// lifecycle.checkExpect, as it is.
				r, err := tx.Run(ctx, "r-1")
				if err != nil {
					return err
				}
				if r.LastSeq != 0 {
					return paddock.Errorf(paddock.CodeConflict, "run r-1 moved on: its last event is %d, not 0", r.LastSeq)
				}
				read.Done()
				// Both checks made before either appends (a lock taken by
				// the check would keep the other from getting here: then
				// go on after a while).
				done := make(chan struct{})
				go func() { read.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(time.Second):
				}
				_, err = tx.AppendEvent(ctx, "r-1", "test.call", map[string]int{"node": i})
				return err
			})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !paddock.IsCode(err, paddock.CodeConflict):
			t.Fatalf("an update failed otherwise: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d calls that expected seq 0 went through (%v); the seq rule lets one", ok, errs)
	}
}

// TestJoinFromAnotherHomeTakesNoRuns: a node is lost with a live run whose
// workspace is on its disk (and whose checkpoint another node could
// restore). A daemon of another state directory (a replacement machine
// started with the dead one's --node-id, or a second daemon given the
// same id by mistake) joins under that id: Join refuses another home only
// while the node is alive, so it takes the id, and with it the lost
// node's runs: they are listed as its workspaces (what its Recover acts
// on: a directory missing there is marked orphaned, a live run no more),
// and no other node can adopt them any more, the node being alive. A join
// from another home must not inherit the runs of the home before it.
func TestJoinFromAnotherHomeTakesNoRuns(t *testing.T) {
	dsn := pgtest.Need(t).Database(t, t.TempDir())
	ctx := context.Background()
	open := func(id, home string, lease time.Duration) (*postgres.Store, error) {
		s, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		_, err = s.Join(ctx, postgres.NodeConfig{ID: id, Home: home, Address: "http://127.0.0.1:1", Capacity: 4, Lease: lease})
		return s, err
	}
	a, err := open("n0", "home-a", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := open("n1", "home-b", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mkRun(t, a, "app", "r-1", paddock.StateActive)
	time.Sleep(1200 * time.Millisecond)
	if lost, err := b.Reap(ctx); err != nil || len(lost) != 1 {
		t.Fatalf("reap: %+v %v", lost, err)
	}
	c, err := open("n0", "home-c", 30*time.Second)
	if err != nil {
		return // refused: the lost node's runs stay for adoption
	}
	var mine []string
	if err := c.View(ctx, func(tx paddock.Tx) error {
		ws, err := tx.Workspaces(ctx)
		for _, w := range ws {
			mine = append(mine, w.RunID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, takeErr := b.TakeRun(ctx, "r-1", func(tx paddock.Tx) error { return nil })
	if len(mine) != 0 || takeErr != nil {
		t.Fatalf("a daemon of another home joined as n0 and holds %v (its workspace is on the lost node's disk); its adoption by n1: %v", mine, takeErr)
	}
}

// TestRenewNotStarvedByBusyPool: a node proves it is alive with Renew, on
// the same pool of connections (pgxpool's default: 4, or one per CPU) as
// its work: while that many transactions are under way (checkpoints of
// whole change sets at every job start and end, a slow statement, a
// transaction held by a slow fn), the renewal waits for a connection, the
// lease runs out, another node marks this one lost, and its work is
// refused with it. The renewal must not wait behind the node's own work.
func TestRenewNotStarvedByBusyPool(t *testing.T) {
	ns := nodes(t, 1, 30*time.Second)
	s := ns[0]
	ctx := context.Background()
	mkRun(t, s, "app", "r-1", paddock.StateActive)
	busy := max(4, runtime.NumCPU())
	release := make(chan struct{})
	var started, done sync.WaitGroup
	for range busy {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			s.Update(ctx, func(tx paddock.Tx) error {
				started.Done()
				<-release
				return nil
			})
		}()
	}
	started.Wait()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := s.Renew(rctx)
	cancel()
	close(release)
	done.Wait()
	if err != nil {
		t.Fatalf("renewal while %d transactions are under way: %v", busy, err)
	}
}
