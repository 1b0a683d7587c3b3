package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/postgres"
	"github.com/paddock-dev/paddock/postgres/pgtest"
)

// nodes opens n stores on one database, each joined as node n0, n1, …
// with the given lease.
func nodes(t *testing.T, n int, lease time.Duration) []*postgres.Store {
	t.Helper()
	dsn := pgtest.Need(t).Database(t, t.TempDir())
	var out []*postgres.Store
	for i := range n {
		s, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		id := fmt.Sprintf("n%d", i)
		if _, err := s.Join(context.Background(), postgres.NodeConfig{ID: id, Home: "home-" + id, Address: "http://127.0.0.1:1", Capacity: 4, Lease: lease}); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// markLost has node a (n0, of nodes) marked lost by b: a joins again
// with a lease of a second, which runs out, b reaps it, and a trusts its
// own clock of the lease again.
func markLost(t *testing.T, a, b *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	if _, err := a.Join(ctx, postgres.NodeConfig{ID: "n0", Home: "home-n0", Address: "http://127.0.0.1:1", Capacity: 4, Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	if lost, err := b.Reap(ctx); err != nil || len(lost) != 1 {
		t.Fatalf("reap: %+v %v", lost, err)
	}
	a.TrustLeaseClock()
}

func mkRun(t *testing.T, s *postgres.Store, project, id string, state paddock.WorkspaceState) {
	t.Helper()
	ctx := context.Background()
	if err := s.Update(ctx, func(tx paddock.Tx) error {
		if _, err := tx.Project(ctx, project); paddock.IsCode(err, paddock.CodeNotFound) {
			if err := tx.CreateProject(ctx, &paddock.Project{Name: project, Root: "/src/" + project, Fingerprint: "fp", CreatedAt: time.Now()}); err != nil {
				return err
			}
		}
		now := time.Now().UTC()
		return tx.CreateRun(ctx, &paddock.Run{ID: id, Project: project, CreatedAt: now, Workspace: &paddock.Workspace{
			ID: "w-" + id, RunID: id, Kind: paddock.KindOverlay, Root: "/w/" + id, Fingerprint: "fp", BaseRef: "main",
			BaseRevision: "0123456789abcdef0123456789abcdef01234567", State: state, CleanupPolicy: paddock.CleanupOnReject,
			CreatedAt: now, UpdatedAt: now}})
	}); err != nil {
		t.Fatal(err)
	}
}

// TestFencingAnyNodeID: the fence goes with a write's BEGIN, the node's
// id written into the statement; an id that would need quoting there is
// fenced by a statement of its own, as surely: its writes commit while it
// holds its lease, and none does once another node marked it lost.
func TestFencingAnyNodeID(t *testing.T) {
	ns := nodes(t, 2, 30*time.Second)
	ctx := context.Background()
	for _, id := range []string{"plain-id.1", `o'brien\; DROP TABLE runs; --`} {
		a := ns[0]
		if _, err := a.Join(ctx, postgres.NodeConfig{ID: id, Home: "home-" + id, Address: "http://127.0.0.1:1", Capacity: 4, Lease: time.Second}); err != nil {
			t.Fatal(err)
		}
		if err := a.Update(ctx, func(tx paddock.Tx) error { return nil }); err != nil {
			t.Fatalf("%s: a write while the lease holds: %v", id, err)
		}
		time.Sleep(1200 * time.Millisecond)
		if lost, err := ns[1].Reap(ctx); err != nil || len(lost) != 1 || lost[0].Node.ID != id {
			t.Fatalf("%s: reap: %+v %v", id, lost, err)
		}
		a.TrustLeaseClock()
		if err := a.Update(ctx, func(tx paddock.Tx) error { return nil }); !errors.Is(err, paddock.ErrFenced) {
			t.Fatalf("%s: a fenced node's write: %v", id, err)
		}
	}
}

// TestReapWaitsAfterAnOutage: a node whose renewals fail marks no node
// lost while its last renewal is more than half a lease old, and, once a
// renewal gets through after such a gap (the store was out of reach, for
// every node likely), for a lease after it, from the very first write it
// is let through to make: the others' leases ran out with its own, and
// each gets a lease to renew. One that renews meanwhile stays alive; one
// that does not is marked lost once the lease has passed.
func TestReapWaitsAfterAnOutage(t *testing.T) {
	// Two seconds: the renewals below, a tenth of it apart, stay under
	// half of it apart however loaded the machine.
	const lease = 2 * time.Second
	ns := nodes(t, 3, 30*time.Second)
	ctx := context.Background()
	for i, s := range ns {
		id := fmt.Sprintf("n%d", i)
		if _, err := s.Join(ctx, postgres.NodeConfig{ID: id, Home: "home-" + id, Address: "http://127.0.0.1:1", Capacity: 4, Lease: lease}); err != nil {
			t.Fatal(err)
		}
	}
	joined := time.Now()
	reaper, renews, silent := ns[0], ns[1], ns[2]
	time.Sleep(lease * 2 / 5) // under half a lease after the join: no gap
	for _, s := range []*postgres.Store{reaper, renews} {
		if err := s.Renew(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Then the reaper's renewals fail (the store out of its reach).
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := reaper.Renew(gone); err == nil {
		t.Fatal("a renewal with its context ended succeeded")
	}
	// The silent node's lease ran out; the reaper's own still holds by
	// its clock, but it has not renewed it for more than half a lease: it
	// judges no other node's (a reap under way when the store went away,
	// let through once it is back).
	time.Sleep(time.Until(joined.Add(lease * 6 / 5)))
	if lost, err := reaper.Reap(ctx); err != nil || len(lost) != 0 {
		t.Fatalf("a reap by a node whose renewals fail: %+v %v", lost, err)
	}
	if err := reaper.Renew(ctx); err != nil {
		t.Fatalf("the reaper's renewal once the store is back: %v", err)
	}
	if lost, err := reaper.Reap(ctx); err != nil || len(lost) != 0 {
		t.Fatalf("a reap just after the outage: %+v %v", lost, err)
	}
	if err := renews.Renew(ctx); err != nil {
		t.Fatalf("a renewal within the grace: %v", err)
	}
	// A lease later: the node that renewed is alive, the silent one lost.
	for end := time.Now().Add(lease + 200*time.Millisecond); time.Now().Before(end); time.Sleep(lease / 10) {
		for _, s := range []*postgres.Store{reaper, renews} {
			if err := s.Renew(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	lost, err := reaper.Reap(ctx)
	if err != nil || len(lost) != 1 || lost[0].Node.ID != "n2" {
		t.Fatalf("a reap a lease after the outage: %+v %v", lost, err)
	}
	if err := silent.Renew(ctx); !errors.Is(err, paddock.ErrFenced) {
		t.Fatalf("the silent node's renewal after it was marked lost: %v", err)
	}
}

// TestReapHeldUpFindsNothing: a reap by a node whose own last renewal
// reached the database more than half a lease ago finds no expired node,
// whatever its clock believes (a reap held up in an outage, let through
// once the store is back): the database asks for the reaper's heartbeat.
func TestReapHeldUpFindsNothing(t *testing.T) {
	const lease = 2 * time.Second
	ns := nodes(t, 2, 30*time.Second)
	ctx := context.Background()
	reaper, silent := ns[0], ns[1]
	if _, err := silent.Join(ctx, postgres.NodeConfig{ID: "n1", Home: "home-n1", Address: "http://127.0.0.1:1", Capacity: 4, Lease: lease}); err != nil {
		t.Fatal(err)
	}
	joined := time.Now()
	time.Sleep(lease * 2 / 5)
	if _, err := reaper.Join(ctx, postgres.NodeConfig{ID: "n0", Home: "home-n0", Address: "http://127.0.0.1:1", Capacity: 4, Lease: lease}); err != nil {
		t.Fatal(err)
	}
	// The silent node's lease ran out; the reaper's holds, its heartbeat
	// more than half a lease old in the database, its clock made steady.
	time.Sleep(time.Until(joined.Add(lease * 21 / 20)))
	reaper.TrustLeaseClockSteady()
	if lost, err := reaper.Reap(ctx); err != nil || len(lost) != 0 {
		t.Fatalf("a reap by a node the database last heard of over half a lease ago: %+v %v", lost, err)
	}
	// Its renewal, over half a lease after the last, starts a grace
	// (TestReapInGraceFindsNothing); renewing on time, it reaps after it.
	for renewed := time.Now(); time.Since(renewed) < lease+200*time.Millisecond; time.Sleep(lease / 5) {
		if err := reaper.Renew(ctx); err != nil {
			t.Fatal(err)
		}
	}
	reaper.TrustLeaseClockSteady()
	if lost, err := reaper.Reap(ctx); err != nil || len(lost) != 1 || lost[0].Node.ID != "n1" {
		t.Fatalf("a reap once the reaper renewed: %+v %v", lost, err)
	}
}

// TestReapInGraceFindsNothing: a node whose renewal lands over half a
// lease after the one before (it lost touch with the store) marks no
// other node lost for a lease, though its own clock, not yet answered,
// believes it steady: the database starts the grace in the renewal's own
// statement. Before, the clock alone knew, so a reap sent between the
// renewal's landing and its answer's arrival took the others' runs.
func TestReapInGraceFindsNothing(t *testing.T) {
	const lease = 2 * time.Second
	ns := nodes(t, 2, 30*time.Second)
	ctx := context.Background()
	reaper, silent := ns[0], ns[1]
	for i, s := range []*postgres.Store{reaper, silent} {
		id := fmt.Sprintf("n%d", i)
		if _, err := s.Join(ctx, postgres.NodeConfig{ID: id, Home: "home-" + id, Address: "http://127.0.0.1:1", Capacity: 4, Lease: lease}); err != nil {
			t.Fatal(err)
		}
	}
	// Both leases run out: the store was out of reach for both.
	time.Sleep(lease + 100*time.Millisecond)
	if err := reaper.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	graceFrom := time.Now()
	reaper.TrustLeaseClockSteady()
	if lost, err := reaper.Reap(ctx); err != nil || len(lost) != 0 {
		t.Fatalf("a reap in the grace the database started: %+v %v", lost, err)
	}
	// Renewing on time, the grace ends a lease later; the silent node is
	// marked lost then.
	for time.Since(graceFrom) < lease+200*time.Millisecond {
		time.Sleep(lease / 5)
		if err := reaper.Renew(ctx); err != nil {
			t.Fatal(err)
		}
	}
	reaper.TrustLeaseClockSteady()
	if lost, err := reaper.Reap(ctx); err != nil || len(lost) != 1 || lost[0].Node.ID != "n1" {
		t.Fatalf("a reap once the grace is over: %+v %v", lost, err)
	}
}

// TestFencing: a node whose lease ran out is marked lost by another; from
// then on nothing it writes commits (code node_lost, ErrFenced), its
// renewal is refused, its runs are reported node_lost and their running
// jobs interrupted, and a run of it can be taken by the live node.
func TestFencing(t *testing.T) {
	ns := nodes(t, 2, 30*time.Second)
	a, b := ns[0], ns[1]
	ctx := context.Background()
	// a's lease, shortened: join again with one of a second.
	if _, err := a.Join(ctx, postgres.NodeConfig{ID: "n0", Home: "home-n0", Address: "http://127.0.0.1:1", Capacity: 4, Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	mkRun(t, a, "app", "r-a", paddock.StateActive)
	if err := a.Update(ctx, func(tx paddock.Tx) error {
		return tx.CreateJob(ctx, &paddock.Job{ID: "j-1", RunID: "r-a", Kind: paddock.JobExec, State: paddock.JobRunning, Owner: "a", Request: []byte(`{}`), CreatedAt: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	if lost, err := b.Reap(ctx); err != nil || len(lost) != 0 {
		t.Fatalf("reap while a lives: %v %v", lost, err)
	}
	time.Sleep(1200 * time.Millisecond)
	// a's own clock says its lease ran out: it writes nothing, and says so.
	if err := a.Update(ctx, func(tx paddock.Tx) error { return nil }); !paddock.IsCode(err, paddock.CodeNodeLost) || errors.Is(err, paddock.ErrFenced) {
		t.Fatalf("a write past the lease by the node's own clock: %v", err)
	}
	lost, err := b.Reap(ctx)
	if err != nil || len(lost) != 1 || lost[0].Node.ID != "n0" || len(lost[0].Runs) != 1 || len(lost[0].Jobs) != 1 {
		t.Fatalf("reap: %+v %v", lost, err)
	}
	// A clock that says otherwise (a node paused between its check and
	// its write) meets the database's fence.
	a.TrustLeaseClock()
	err = a.Update(ctx, func(tx paddock.Tx) error {
		_, err := tx.AppendEvent(ctx, "r-a", "test.write", nil)
		return err
	})
	if !errors.Is(err, paddock.ErrFenced) || !paddock.IsCode(err, paddock.CodeNodeLost) {
		t.Fatalf("a fenced node's write: %v", err)
	}
	if err := a.Renew(ctx); !errors.Is(err, paddock.ErrFenced) {
		t.Fatalf("a fenced node's renewal: %v", err)
	}
	var evs []*paddock.Event
	var job *paddock.Job
	b.View(ctx, func(tx paddock.Tx) (err error) {
		if evs, err = tx.Events(ctx, "r-a", 0, 100); err != nil {
			return err
		}
		job, err = tx.Job(ctx, "j-1")
		return err
	})
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if fmt.Sprint(types) != "[run.node_lost job.interrupted]" || job.State != paddock.JobInterrupted || !job.LeaseUntil.IsZero() {
		t.Fatalf("events %v, job %+v", types, job)
	}
	// The run is the live node's once it takes it; a taken run is not
	// taken twice, and the lost node's checkpoint store is refused too.
	from, err := b.TakeRun(ctx, "r-a", func(tx paddock.Tx) error { return nil })
	if err != nil || from != "n0" {
		t.Fatalf("take: %q %v", from, err)
	}
	if _, err := b.TakeRun(ctx, "r-a", func(tx paddock.Tx) error { return nil }); !paddock.IsCode(err, paddock.CodeConflict) {
		t.Fatalf("a second take: %v", err)
	}
	if err := a.SaveCheckpoint(ctx, &paddock.RunCheckpoint{RunID: "r-a", BaseRevision: "x", Hash: "h", TakenAt: time.Now(), Content: []byte("x")}); !errors.Is(err, paddock.ErrFenced) {
		t.Fatalf("a fenced node's checkpoint: %v", err)
	}
	var r *paddock.Run
	b.View(ctx, func(tx paddock.Tx) (err error) { r, err = tx.Run(ctx, "r-a"); return err })
	if r.Node != "n1" || r.NodeState != paddock.NodeAlive {
		t.Fatalf("run after take: node %q %q", r.Node, r.NodeState)
	}
	// The lost node, started again from its own state directory, joins
	// with a new epoch and writes again.
	if _, err := a.Join(ctx, postgres.NodeConfig{ID: "n0", Home: "home-n0", Address: "http://127.0.0.1:1", Capacity: 4, Lease: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, func(tx paddock.Tx) error { return nil }); err != nil {
		t.Fatalf("after joining again: %v", err)
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

// TestJoinRefusesALiveNodesID: a second state directory cannot join as a
// live node; the same one can (a restart), with a new epoch that fences
// the old.
func TestJoinRefusesALiveNodesID(t *testing.T) {
	ns := nodes(t, 2, 30*time.Second)
	ctx := context.Background()
	if _, err := ns[1].Join(ctx, postgres.NodeConfig{ID: "n0", Home: "elsewhere", Address: "http://127.0.0.1:1", Capacity: 1, Lease: time.Minute}); !errors.Is(err, postgres.ErrNodeTaken) {
		t.Fatalf("joining as a live node of another home: %v", err)
	}
	old := ns[0].Self()
	// ns[1] restarts as n0's home: the old epoch is fenced.
	again, err := ns[1].Join(ctx, postgres.NodeConfig{ID: "n0", Home: "home-n0", Address: "http://127.0.0.1:2", Capacity: 1, Lease: time.Minute})
	if err != nil || again.Epoch <= old.Epoch {
		t.Fatalf("rejoin: %+v %v", again, err)
	}
	if err := ns[0].Update(ctx, func(tx paddock.Tx) error { return nil }); !errors.Is(err, paddock.ErrFenced) {
		t.Fatalf("the old epoch's write: %v", err)
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
	// b first: a's lease of a second must not run out before its run is
	// made (opening b took over a second once, in a loaded CI).
	b, err := open("n1", "home-b", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a, err := open("n0", "home-a", time.Second)
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

// TestSeqAcrossNodes: writers on three nodes append to one run at once;
// its seqs are 1..N, each once, and every node's listener hears of it.
func TestSeqAcrossNodes(t *testing.T) {
	ns := nodes(t, 3, 30*time.Second)
	mkRun(t, ns[0], "app", "r-1", paddock.StateActive)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heard := make([]chan string, len(ns))
	for i, s := range ns {
		heard[i] = make(chan string, 1000)
		go s.Listen(ctx, func(id string) {
			if id != "" {
				select {
				case heard[i] <- id:
				default:
				}
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // the listeners are listening
	const per = 40
	var wg sync.WaitGroup
	errs := make(chan error, len(ns)*4)
	for _, s := range ns {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range per {
					if err := s.Update(ctx, func(tx paddock.Tx) error {
						_, err := tx.AppendEvent(ctx, "r-1", "test.append", nil)
						return err
					}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var evs []*paddock.Event
	ns[2].View(ctx, func(tx paddock.Tx) (err error) { evs, err = tx.Events(ctx, "r-1", 0, 10000); return err })
	want := len(ns) * 4 * per
	if len(evs) != want {
		t.Fatalf("%d events, want %d", len(evs), want)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	for i := range ns {
		select {
		case id := <-heard[i]:
			if id != "r-1" {
				t.Fatalf("node %d heard of %q", i, id)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("node %d heard of no append", i)
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

// TestReapersShareTheWork: nodes reaping at once mark each dead node lost
// once (FOR UPDATE SKIP LOCKED), and report each of its runs once.
func TestReapersShareTheWork(t *testing.T) {
	ns := nodes(t, 6, 30*time.Second)
	ctx := context.Background()
	for i := range 3 { // n0..n2 die
		if _, err := ns[i].Join(ctx, postgres.NodeConfig{ID: fmt.Sprintf("n%d", i), Home: fmt.Sprintf("home-n%d", i), Address: "http://127.0.0.1:1", Capacity: 4, Lease: time.Second}); err != nil {
			t.Fatal(err)
		}
		mkRun(t, ns[i], "app", fmt.Sprintf("r-%d", i), paddock.StateActive)
	}
	time.Sleep(1200 * time.Millisecond)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for _, s := range ns[3:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lost, err := s.Reap(ctx)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			for _, l := range lost {
				seen[l.Node.ID]++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(seen) != 3 || seen["n0"] != 1 || seen["n1"] != 1 || seen["n2"] != 1 {
		t.Fatalf("reaped %v", seen)
	}
	for i := range 3 {
		var evs []*paddock.Event
		ns[4].View(ctx, func(tx paddock.Tx) (err error) { evs, err = tx.Events(ctx, fmt.Sprintf("r-%d", i), 0, 100); return err })
		if len(evs) != 1 || evs[0].Type != paddock.EventNodeLost {
			t.Fatalf("run r-%d: %d events", i, len(evs))
		}
	}
}

// TestPlace: a new run goes to a node with room, one that made runs of
// the project first, then the emptiest; a node sees its own workspaces.
func TestPlace(t *testing.T) {
	ns := nodes(t, 2, 30*time.Second) // capacity 4 each
	ctx := context.Background()
	mkProject(t, ns[0], "app")
	mkProject(t, ns[0], "web")
	n, _, err := ns[0].Place(ctx, "app")
	if err != nil || n.ID != "n0" {
		t.Fatalf("empty: %+v %v", n, err)
	}
	mkRun(t, ns[1], "app", "r-1", paddock.StateActive)
	if n, _, _ = ns[0].Place(ctx, "app"); n.ID != "n1" {
		t.Fatalf("warm node not chosen: %s", n.ID)
	}
	if n, _, _ = ns[0].Place(ctx, "web"); n.ID != "n0" {
		t.Fatalf("emptiest node not chosen: %s", n.ID)
	}
	for i := 2; i <= 4; i++ {
		mkRun(t, ns[1], "app", fmt.Sprintf("r-%d", i), paddock.StateReady)
	}
	if n, _, _ = ns[0].Place(ctx, "app"); n.ID != "n0" {
		t.Fatalf("a full node chosen: %s", n.ID)
	}
	for i := 5; i <= 8; i++ {
		mkRun(t, ns[0], "web", fmt.Sprintf("r-%d", i), paddock.StateReady)
	}
	if _, _, err := ns[0].Place(ctx, "app"); !paddock.IsCode(err, paddock.CodeBusy) {
		t.Fatalf("all full: %v", err)
	}
	var ws []*paddock.Workspace
	ns[1].View(ctx, func(tx paddock.Tx) (err error) { ws, err = tx.Workspaces(ctx); return err })
	if len(ws) != 4 {
		t.Fatalf("node n1 sees %d workspaces", len(ws))
	}
	all, err := ns[0].Nodes(ctx)
	if err != nil || len(all) != 2 || all[0].LiveRuns != 4 || all[1].LiveRuns != 4 {
		t.Fatalf("nodes: %+v %v", all, err)
	}
}

// TestPlaceSpreads: creates placed at once spread over the nodes, each
// holding a place until its run is made; none is placed past capacity.
func TestPlaceSpreads(t *testing.T) {
	ns := nodes(t, 2, 30*time.Second)
	ctx := context.Background()
	for i, s := range ns { // capacity 1 each
		id := fmt.Sprintf("n%d", i)
		if _, err := s.Join(ctx, postgres.NodeConfig{ID: id, Home: "home-" + id, Address: "http://127.0.0.1:1", Capacity: 1, Lease: 30 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	mkProject(t, ns[0], "app")
	if _, _, err := ns[0].Place(ctx, "nope"); !paddock.IsCode(err, paddock.CodeNotFound) {
		t.Fatalf("a place for no project: %v", err)
	}
	var mu sync.Mutex
	got := map[string]int{}
	held := map[string]int64{}
	busy := 0
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, h, err := ns[i%2].Place(ctx, "app")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case paddock.IsCode(err, paddock.CodeBusy):
				busy++
			case err != nil:
				t.Error(err)
			default:
				got[n.ID]++
				held[n.ID] = h
			}
		}()
	}
	wg.Wait()
	if got["n0"] != 1 || got["n1"] != 1 || busy != 2 {
		t.Fatalf("placed %v, busy %d", got, busy)
	}
	// n1's create failed: its place is given back, and n1 has room again.
	if err := ns[1].Unplace(ctx, held["n1"]); err != nil {
		t.Fatal(err)
	}
	if n, _, err := ns[0].Place(ctx, "app"); err != nil || n.ID != "n1" {
		t.Fatalf("after a place was given back: %s %v", n.ID, err)
	}
	// A run made on n0 takes its place back: n0 is still full (its run),
	// and stays so after the place would have expired.
	mkRun(t, ns[0], "app", "r-1", paddock.StateReady)
	if n, _, err := ns[0].Place(ctx, "app"); !paddock.IsCode(err, paddock.CodeBusy) {
		t.Fatalf("placed on %s with every node full: %v", n.ID, err)
	}
}

func mkProject(t *testing.T, s *postgres.Store, name string) {
	t.Helper()
	ctx := context.Background()
	if err := s.Update(ctx, func(tx paddock.Tx) error {
		return tx.CreateProject(ctx, &paddock.Project{Name: name, Root: "/src/" + name, Fingerprint: "fp", CreatedAt: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
}
