package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
)

// partLease is the nodes' lease in the partition tests: short, so that a
// fault plays out in seconds. Bounds on "does not hang" are multiples of it.
const partLease = 2 * time.Second

// partition is a cluster in the lab: PostgreSQL and each node in a
// namespace of its own, the test's clients on each node's unix socket
// (reachable whatever the network does), the test's own view of the
// store on PostgreSQL's unix socket.
type partition struct {
	t     *testing.T
	base  string
	lab   *netLab
	pg    *labPostgres
	db    *pgxpool.Pool
	nodes map[string]*partNode
	url   string // the nodes' store: pg's own unless set
}

// partNode is a node of the partition: its machine's host number on both
// networks.
type partNode struct {
	node
	host int
	ns   string
}

func newPartition(t *testing.T) *partition {
	t.Helper()
	lab := needNetLab(t)
	p := &partition{t: t, base: t.TempDir(), lab: lab, nodes: map[string]*partNode{}}
	p.pg = startLabPostgres(t, lab)
	return p
}

// start starts node id on host h of both networks, as its own machine.
func (p *partition) start(id string, h int, extra ...string) *partNode {
	p.t.Helper()
	n := &partNode{host: h}
	if old := p.nodes[id]; old != nil {
		n.ns = old.ns // started again on its machine
	} else {
		n.ns = p.lab.machine(id, h, storeNet, peerNet)
	}
	n.id, n.home = id, filepath.Join(p.base, id)
	listen := p.lab.addr(peerNet, h) + ":7000"
	url := p.url
	if url == "" {
		url = p.pg.url()
	}
	args := append([]string{"--store", url, "--node-id", id, "--node-lease", partLease.String(),
		"--node-listen", listen, "--node-address", "http://" + listen}, extra...)
	n.d = startDaemonVia(p.t, n.home, p.lab.via(n.ns), binary, nil, args...)
	// Each call once: the faults' answers are what these tests measure
	// (the client's own retries are TestRetriesWhatWasNotDone's).
	n.c = client.Unix(filepath.Join(n.home, "paddock.sock")).WithRetries(0)
	p.nodes[id] = n
	if p.db == nil {
		// The schema is there now: record who wrote each event. A row
		// per event, written in the event's own transaction (rolled back
		// with it), with the address of the node whose connection wrote
		// it: the store's own word on which node wrote what, when.
		p.db = p.pg.pool("paddock")
		p.exec(`CREATE TABLE fault_audit (run_id text, seq bigint, type text, addr inet, at timestamptz DEFAULT clock_timestamp());
			CREATE FUNCTION fault_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
				INSERT INTO fault_audit (run_id, seq, type, addr) VALUES (NEW.run_id, NEW.seq, NEW.type, inet_client_addr()); RETURN NULL; END $$;
			CREATE TRIGGER fault_audit AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION fault_audit();`)
	}
	return n
}

func (p *partition) exec(sql string, args ...any) {
	p.t.Helper()
	if _, err := p.db.Exec(context.Background(), sql, args...); err != nil {
		p.t.Fatalf("%s: %v", sql, err)
	}
}

// nodeState is node id's state in the store.
func (p *partition) nodeState(id string) string {
	var s string
	p.db.QueryRow(context.Background(), `SELECT state FROM paddock_nodes WHERE id = $1`, id).Scan(&s)
	return s
}

// holder is the node run id is on, in the store.
func (p *partition) holder(id string) string {
	var s string
	p.db.QueryRow(context.Background(), `SELECT coalesce(node, '') FROM runs WHERE id = $1`, id).Scan(&s)
	return s
}

// waitFor polls cond every 50ms for up to within, failing with what.
func (p *partition) waitFor(what string, within time.Duration, cond func() bool) time.Duration {
	p.t.Helper()
	return p.waitExplained(what, within, cond, nil)
}

// waitExplained is waitFor, with explain's account of what it saw added
// to the failure.
func (p *partition) waitExplained(what string, within time.Duration, cond func() bool, explain func() string) time.Duration {
	p.t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			why := ""
			if explain != nil {
				why = "\n" + explain()
			}
			p.t.Fatalf("%s: not within %s%s", what, within, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// explainNode says what became of node n and its writer w since t: its
// state in the store, whether its daemon still runs, its last calls'
// answers and what its log says of the store and its lease.
func (p *partition) explainNode(n *partNode, w *writer, t time.Time) string {
	var b strings.Builder
	// A daemon that exited is a zombie until the test's cleanup waits.
	stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.d.cmd.Process.Pid))
	_, state, _ := strings.Cut(string(stat), ") ")
	running := len(state) > 0 && state[0] != 'Z'
	fmt.Fprintf(&b, "node %s: %q in the store, its daemon running: %v\n", n.id, p.nodeState(n.id), running)
	calls := w.since(t)
	fmt.Fprintf(&b, "%d calls since; the last ones:\n", len(calls))
	for _, c := range calls[max(0, len(calls)-5):] {
		fmt.Fprintf(&b, "  %s +%s took %s: %v\n", c.path, c.start.Sub(t).Round(time.Millisecond), c.took().Round(time.Millisecond), c.err)
	}
	logb, _ := os.ReadFile(filepath.Join(n.home, "test-daemon.log"))
	lines := strings.Split(string(logb), "\n")
	var kept []string
	for _, l := range lines {
		if strings.Contains(l, "err=<nil>") {
			continue // a renewal that succeeded
		}
		if strings.Contains(l, "lease") || strings.Contains(l, "lost") || strings.Contains(l, "fenced") || strings.Contains(l, "shared store") {
			kept = append(kept, l)
		}
	}
	fmt.Fprintf(&b, "its log on the store and its lease (the last 20 such lines):\n%s", strings.Join(kept[max(0, len(kept)-20):], "\n"))
	return b.String()
}

// storedEvent is an event as the store holds it, with the address of the
// node that wrote it (fault_audit).
type storedEvent struct {
	seq  int64
	typ  string
	data string
	addr string
}

// events reads run id's events from the store, and checks that their
// seqs are 1…last_seq with no gap and no repeat.
func (p *partition) events(id string) []storedEvent {
	p.t.Helper()
	ctx := context.Background()
	// One snapshot for the events and last_seq: a node may append one
	// meanwhile (a checkpoint due), which would be counted in one read and
	// not the other.
	tx, err := p.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		p.t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, `SELECT e.seq, e.type, coalesce(e.data::text, ''), coalesce(host(a.addr), '')
		FROM events e LEFT JOIN fault_audit a ON a.run_id = e.run_id AND a.seq = e.seq WHERE e.run_id = $1 ORDER BY e.seq`, id)
	if err != nil {
		p.t.Fatal(err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (storedEvent, error) {
		var e storedEvent
		return e, r.Scan(&e.seq, &e.typ, &e.data, &e.addr)
	})
	if err != nil {
		p.t.Fatal(err)
	}
	var last int64
	if err := tx.QueryRow(ctx, `SELECT last_seq FROM runs WHERE id = $1`, id).Scan(&last); err != nil {
		p.t.Fatal(err)
	}
	if int64(len(evs)) != last {
		p.t.Fatalf("run %s: %d events stored, last_seq %d", id, len(evs), last)
	}
	for i, e := range evs {
		if e.seq != int64(i+1) {
			p.t.Fatalf("run %s: event %d has seq %d: a gap or a repeat", id, i+1, e.seq)
		}
	}
	return evs
}

// clientCall is one call a client made, and what it saw.
type clientCall struct {
	path       string
	start, end time.Time
	err        error
}

func (c clientCall) took() time.Duration { return c.end.Sub(c.start) }

// writer is a client that writes a file into a run through one node, one
// call after another, each bounded by hang (a call that takes that long
// hung), until stopped.
type writer struct {
	mu    sync.Mutex
	calls []clientCall
	stop  context.CancelFunc
	done  chan struct{}
}

func startWriter(c *client.Client, run, tag string, hang time.Duration) *writer {
	return startCalls(tag, hang, func(ctx context.Context, path string) error {
		_, err := c.CallTool(client.WithIdempotencyKey(ctx, writeKey(path)), run, "write", map[string]string{"path": path, "content": path})
		return err
	})
}

// writeKey is the idempotency key of a writer's call.
func writeKey(path string) string { return "write-" + path }

// startReader is a client that reads run's last events through one node,
// one call after another, until stopped.
func startReader(c *client.Client, run string, hang time.Duration) *writer {
	return startCalls("read", hang, func(ctx context.Context, _ string) error {
		_, err := c.Events(ctx, run, 0, 5)
		return err
	})
}

// startCalls makes call after call (each named tag-k), each bounded by
// hang, 100ms apart, until stopped.
func startCalls(tag string, hang time.Duration, call func(ctx context.Context, path string) error) *writer {
	ctx, stop := context.WithCancel(context.Background())
	w := &writer{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for k := 0; ctx.Err() == nil; k++ {
			path := fmt.Sprintf("%s-%03d.txt", tag, k)
			cctx, cancel := context.WithTimeout(ctx, hang)
			cl := clientCall{path: path, start: time.Now()}
			cl.err = call(cctx, path)
			cl.end = time.Now()
			cancel()
			if ctx.Err() != nil && cl.err != nil {
				return // stopped, not an answer
			}
			w.mu.Lock()
			w.calls = append(w.calls, cl)
			w.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return w
}

// halt stops the writer and returns its calls.
func (w *writer) halt() []clientCall {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls
}

// since returns the calls that started at or after t.
func (w *writer) since(t time.Time) []clientCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []clientCall
	for _, c := range w.calls {
		if !c.start.Before(t) {
			out = append(out, c)
		}
	}
	return out
}

// waitCheckpoint waits until run id's last event is a stored checkpoint.
func (p *partition) waitCheckpoint(c *client.Client, id string) {
	p.t.Helper()
	p.waitFor("a checkpoint of run "+id, 15*time.Second, func() bool {
		evs, err := c.Events(context.Background(), id, 0, 1000)
		return err == nil && len(evs) > 0 && evs[len(evs)-1].Type == paddock.EventClusterCheckpoint
	})
}

// exited waits until node n's daemon exits by itself and returns how long
// that took and its log.
func (p *partition) exited(n *partNode, within time.Duration) (time.Duration, string) {
	p.t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- n.d.cmd.Wait() }()
	select {
	case err := <-done:
		logb, _ := os.ReadFile(filepath.Join(n.home, "test-daemon.log"))
		if err == nil {
			p.t.Fatalf("node %s exited 0:\n%s", n.id, logb)
		}
		return time.Since(start), string(logb)
	case <-time.After(within):
		logb, _ := os.ReadFile(filepath.Join(n.home, "test-daemon.log"))
		p.t.Fatalf("node %s did not stop within %s:\n%s", n.id, within, tail(string(logb), 40))
	}
	return 0, ""
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// codeOf is the paddock code of a client's error ("" for none, "hung" for
// a call that hit its own bound).
func codeOf(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded):
		return "hung"
	}
	return string(paddock.ErrorCode(err))
}

// TestClusterPartition: PostgreSQL and three nodes, each in a network
// namespace of its own, joined by links the test cuts while clients work.
func TestClusterPartition(t *testing.T) {
	p := newPartition(t)
	n1 := p.start("n1", 11)
	p.start("n2", 12, "--node-adopt", "auto")
	p.start("n3", 13, "--node-adopt", "auto")
	repo := newRepo(t, filepath.Join(p.base, "src", "app"), 3)
	cli(t, n1.home, "project", "add", repo).must(t)
	var adopted string
	t.Run("CutFromStore", func(t *testing.T) { adopted = p.cutFromStore(t) })
	t.Run("CutFromPeers", func(t *testing.T) { p.cutFromPeers(t, adopted) })
	t.Run("LossyLinkToStore", func(t *testing.T) { p.lossyLink(t, adopted) })
	t.Run("SlowLinkToStore", func(t *testing.T) { p.slowLink(t, adopted) })
	t.Run("StoreRestarted", func(t *testing.T) { p.storeRestart(t, syscall.SIGINT) })
	t.Run("StoreKilled", func(t *testing.T) { p.storeRestart(t, syscall.SIGKILL) })
}

// watch records, from the store, when cond first held (polled every
// 20ms from now on) until the test ends.
func (p *partition) watch(cond func(ctx context.Context) bool) func() time.Time {
	ctx, stop := context.WithCancel(context.Background())
	p.t.Cleanup(stop)
	var mu sync.Mutex
	var at time.Time
	go func() {
		for ctx.Err() == nil {
			if cond(ctx) {
				mu.Lock()
				at = time.Now()
				mu.Unlock()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
	}
}

// cutFromStore: node n1, cut from PostgreSQL while its clients still reach
// it, answers them within its lease with node_lost (no hang) and writes
// nothing more; another node marks it lost and adopts its run; when the
// link comes back n1 finds its lease gone and stops, and nothing it did
// lands after the adoption.
func (p *partition) cutFromStore(t *testing.T) string {
	p.t, p.lab.t, p.pg.t = t, t, t
	n1 := p.nodes["n1"]
	id := strings.TrimSpace(cli(t, n1.home, "create", "-p", "app", "--kind", "overlay").must(t).out)
	if h := p.holder(id); h != "n1" {
		t.Fatalf("run %s is on %q", id, h)
	}
	cli(t, n1.home, "tool", id, "write", "--arg", "path=kept.txt", "--arg", "content=kept").must(t)
	p.waitCheckpoint(n1.c, id)
	hang := 10 * partLease // a call that takes this long hung
	w := startWriter(n1.c, id, "n1", hang)
	p.waitFor("n1's clients writing", 10*time.Second, func() bool { return len(w.since(time.Time{})) >= 3 })

	cutAt := time.Now()
	p.lab.cut("n1", storeNet)
	lost := p.watch(func(ctx context.Context) bool { return p.nodeState("n1") == "lost" })
	adopted := p.watch(func(ctx context.Context) bool { h := p.holder(id); return h != "" && h != "n1" })
	p.waitFor("n1's run adopted", 30*time.Second, func() bool { return !adopted().IsZero() })
	adopter := p.nodes[p.holder(id)]
	// The run answers again, on its new node, through any node but n1.
	via := p.nodes["n2"]
	if adopter == via {
		via = p.nodes["n3"]
	}
	var err error
	p.waitFor("a write through "+via.id+" after the adoption", 30*time.Second, func() bool {
		_, err = via.c.CallTool(context.Background(), id, "write", map[string]string{"path": "after.txt", "content": "after"})
		return err == nil
	})
	answers := time.Now()
	// n1's clients, meanwhile, are answered: no call waits on the dead
	// link (before the lease clock, each waited for the kernel to give up
	// on its connection, a quarter of an hour, or for the link to return).
	p.waitFor("answers to n1's clients while it is cut off", hang, func() bool {
		answered := 0
		for _, c := range w.since(cutAt) {
			if c.err != nil && codeOf(c.err) != "hung" {
				answered++
			}
		}
		return answered >= 3
	})
	// The link back, n1's clients still calling: n1 finds its lease gone
	// and stops.
	mendAt := time.Now()
	p.lab.mend("n1", storeNet)
	stopIn, logs := p.exited(n1, 10*partLease)
	calls := w.halt()
	t.Logf("n1 cut at 0: marked lost at %s, its run taken by %s at %s and written to there at %s; the link back at %s, n1 stopped %s later",
		lost().Sub(cutAt).Round(time.Millisecond), adopter.id, adopted().Sub(cutAt).Round(time.Millisecond), answers.Sub(cutAt).Round(time.Millisecond),
		mendAt.Sub(cutAt).Round(time.Millisecond), stopIn.Round(time.Millisecond))
	for _, want := range []string{"has not reached the shared store for longer than its lease", "this node lost its lease: stopping"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("n1's log has no %q:\n%s", want, tail(logs, 40))
		}
	}
	acked := p.checkCutCalls(calls, cutAt, hang)
	p.checkNoStaleWrite(id, p.lab.addr(storeNet, n1.host), acked)
	return id
}

// checkCutCalls checks what n1's clients saw: before the cut, their
// writes; after it, node_lost, each within its bound, none hanging. It
// returns the writes acknowledged.
func (p *partition) checkCutCalls(calls []clientCall, cutAt time.Time, hang time.Duration) map[string]bool {
	t := p.t
	acked := map[string]bool{}
	var slowest time.Duration
	seen := map[string]int{}
	for _, c := range calls {
		if c.err == nil {
			acked[c.path] = true
		}
		if c.start.Before(cutAt) {
			continue
		}
		code := codeOf(c.err)
		seen[code]++
		slowest = max(slowest, c.took())
		if code == "hung" {
			t.Fatalf("a call to n1 after the cut hung: %s, started %s after the cut", c.path, c.start.Sub(cutAt))
		}
		if c.err == nil {
			t.Fatalf("a write to n1 after the cut was acknowledged: %s, started %s after the cut", c.path, c.start.Sub(cutAt))
		}
		if code != string(paddock.CodeNodeLost) {
			t.Logf("a call to n1 %s after the cut, answered %s later: %v", c.start.Sub(cutAt).Round(time.Millisecond), c.took().Round(time.Millisecond), c.err)
		}
	}
	first := calls[len(calls)-1]
	for _, c := range calls {
		if !c.end.Before(cutAt) && c.err != nil {
			first = c
			break
		}
	}
	t.Logf("n1's clients: %d writes acknowledged before the cut; after it %v; the first error %s after the cut: %v; the slowest answer %s",
		len(acked), seen, first.end.Sub(cutAt).Round(time.Millisecond), first.err, slowest.Round(time.Millisecond))
	if len(acked) == 0 || seen["node_lost"] == 0 {
		t.Fatalf("n1's clients: %d acknowledged, after the cut %v", len(acked), seen)
	}
	return acked
}

// checkNoStaleWrite checks run id's events in the store: gap-free; every
// write acknowledged to the cut node's clients there; nothing written
// from the cut node's address (addr) after the run was marked node_lost.
func (p *partition) checkNoStaleWrite(id, addr string, acked map[string]bool) {
	t := p.t
	evs := p.events(id)
	var lostSeq int64
	stored := map[string]bool{}
	for _, e := range evs {
		if e.typ == paddock.EventNodeLost && lostSeq == 0 {
			lostSeq = e.seq
		}
		if e.addr == addr {
			if lostSeq != 0 {
				t.Fatalf("event %d (%s) was written by the cut node after it was marked lost (event %d): %s", e.seq, e.typ, lostSeq, e.data)
			}
			for path := range acked {
				if strings.Contains(e.data, `"path":"`+path+`"`) {
					stored[path] = true
				}
			}
		}
	}
	if lostSeq == 0 {
		t.Fatalf("run %s has no %s event", id, paddock.EventNodeLost)
	}
	for path := range acked {
		if !stored[path] {
			t.Fatalf("the write of %s was acknowledged but is not among the run's events", path)
		}
	}
	t.Logf("run %s: %d events, seqs 1…%d gap-free; the cut node's last at or before %d, node_lost at %d", id, len(evs), len(evs), lostSeq-1, lostSeq)
}

// cutFromPeers: the node that holds run id, cut from the other nodes but
// not from PostgreSQL, stays alive and serves its own clients; a call for
// the run through another node fails within a bound with a typed error
// that says whether it reached the run's node; once the link is back the
// client library makes every failed write again with its key, whatever
// the error said, and each write is in the run's events once.
func (p *partition) cutFromPeers(t *testing.T, id string) {
	p.t, p.lab.t, p.pg.t = t, t, t
	if id == "" {
		t.Skip("no run from CutFromStore")
	}
	holder := p.nodes[p.holder(id)]
	via := p.nodes["n2"]
	if holder == via {
		via = p.nodes["n3"]
	}
	hang := 10 * partLease
	w := startWriter(via.c, id, "fwd", hang)
	p.waitFor("forwarded writes", 10*time.Second, func() bool { return len(w.since(time.Time{})) >= 3 })
	cutAt := time.Now()
	p.lab.cut(holder.id, peerNet)
	// Its own clients still reach it, and it the store.
	if _, err := holder.c.CallTool(context.Background(), id, "write", map[string]string{"path": "own.txt", "content": "own"}); err != nil {
		t.Fatalf("a write through %s, cut from its peers only: %v", holder.id, err)
	}
	p.waitFor("answers to the forwarded calls while the run's node is cut off", 2*hang, func() bool {
		answered := 0
		for _, c := range w.since(cutAt) {
			if c.err != nil && codeOf(c.err) != "hung" {
				answered++
			}
		}
		return answered >= 3
	})
	if st := p.nodeState(holder.id); st != "alive" {
		t.Fatalf("%s, cut from its peers but not from the store, is %s", holder.id, st)
	}
	p.lab.mend(holder.id, peerNet)
	time.Sleep(500 * time.Millisecond)
	calls := w.halt()
	p.retryOnce(via, id, calls, cutAt, hang)
}

// retryOnce checks the calls made through via after cutAt, and has the
// client library (its retries) make each failed one again with its
// idempotency key, reading nothing first: one that did not reach the run's
// node is made, one that may have is made or answered with its first
// answer. Each write is then in the run's events exactly once.
func (p *partition) retryOnce(via *partNode, id string, calls []clientCall, cutAt time.Time, hang time.Duration) {
	t := p.t
	count := func() map[string]int {
		n := map[string]int{}
		for _, e := range p.events(id) {
			if e.typ == paddock.EventToolCall {
				for _, c := range calls {
					if strings.Contains(e.data, `"path":"`+c.path+`"`) {
						n[c.path]++
					}
				}
			}
		}
		return n
	}
	before := count()
	seen := map[string]int{}
	var slowest time.Duration
	for _, c := range calls {
		if c.err == nil || c.start.Before(cutAt) {
			continue
		}
		var pe *paddock.Error
		if codeOf(c.err) == "hung" || !errors.As(c.err, &pe) || pe.Code != paddock.CodeNodeLost {
			t.Fatalf("a forwarded call to a node cut from its peers, %s after the cut: %v (took %s)", c.start.Sub(cutAt), c.err, c.took())
		}
		slowest = max(slowest, c.took())
		delivered, _ := pe.Details["delivered"].(bool)
		seen[fmt.Sprintf("delivered=%v", delivered)]++
		if !delivered && before[c.path] != 0 {
			t.Fatalf("%s was not delivered, says its error, but the run has it: %v", c.path, c.err)
		}
		ctx := client.WithIdempotencyKey(context.Background(), writeKey(c.path))
		if _, err := via.c.WithRetries(client.DefaultRetries).CallTool(ctx, id, "write", map[string]string{"path": c.path, "content": c.path}); err != nil {
			t.Fatalf("the retry of %s (delivered=%v, in the run's events %d times before): %v", c.path, delivered, before[c.path], err)
		}
		if before[c.path] != 0 {
			seen["delivered and done, answered again"]++
		}
	}
	for path, n := range count() {
		if n != 1 {
			t.Fatalf("%s is in the run's events %d times", path, n)
		}
	}
	t.Logf("forwarded calls after the cut: %v, the slowest answer %s", seen, slowest.Round(time.Millisecond))
	if len(seen) == 0 {
		t.Fatal("no forwarded call failed while the run's node was cut off")
	}
}

// lossyLink: the link between the node holding run id and PostgreSQL
// drops one packet in five each way for four leases while a client
// writes through the node. (The kernel here may lack netem, so there is
// loss, and the delay of its retransmissions, but no fixed delay.) The
// node keeps its lease, or loses it, is marked lost and stops; either
// way the run never has two owners: nothing from the node lands after
// another marked it lost, and no client call hangs.
func (p *partition) lossyLink(t *testing.T, id string) {
	p.t, p.lab.t, p.pg.t = t, t, t
	if id == "" {
		t.Skip("no run from CutFromStore")
	}
	h := p.nodes[p.holder(id)]
	hang := 10 * partLease
	w := startWriter(h.c, id, "lossy", hang)
	r := startReader(h.c, id, hang)
	p.waitFor("writes", 10*time.Second, func() bool { return len(w.since(time.Time{})) >= 3 })
	// One packet in five was too little to tell: the renewals of old (each
	// cut short after a third of a lease, its connection with it) failed
	// in some runs (6 calls in 10 answered node_lost) and not in others.
	// One in three makes them fail in every run, renewals that wait and
	// go on another connection not.
	const loss, dur = 3, 4 * partLease
	from := time.Now()
	p.lab.lossy(h.id, storeNet, loss)
	time.Sleep(dur)
	p.lab.lossy(h.id, storeNet, 0)
	until := time.Now()
	time.Sleep(partLease)
	calls := append(w.halt(), r.halt()...)
	seen := map[string]int{}
	failed, during := 0, 0
	var slowest time.Duration
	for _, c := range calls {
		if c.start.Before(from) {
			continue
		}
		seen[codeOf(c.err)]++
		if codeOf(c.err) == "hung" {
			t.Fatalf("a call on the lossy link hung: %s %s after the loss began", c.path, c.start.Sub(from))
		}
		if c.start.Before(until) {
			during++
			slowest = max(slowest, c.took())
			if c.err != nil {
				failed++
			}
		}
	}
	state := p.nodeState(h.id)
	t.Logf("%s on a link losing 1 packet in %d each way for %s: its clients' calls %v (\"\" acknowledged), %d of the %d made during the loss failed, the slowest took %s; it is %s",
		h.id, loss, dur, seen, failed, during, slowest.Round(time.Millisecond), state)
	// The node keeps its lease by its own clock too: its clients' calls
	// mostly go through (the renewals of old lost it for seconds at a
	// time, with its lease still held in the store: 74 calls of 76 made
	// during the loss answered node_lost).
	if during < 2 || 2*failed > during {
		logb, _ := os.ReadFile(filepath.Join(h.home, "test-daemon.log"))
		var renewals []string
		for _, l := range strings.Split(string(logb), "\n") {
			if strings.Contains(l, "renew") || strings.Contains(l, "reached the shared store") || strings.Contains(l, "lost its lease") {
				renewals = append(renewals, l)
			}
		}
		t.Fatalf("%d of the %d calls made through %s during the loss failed: want at most half; its renewals:\n%s",
			failed, during, h.id, tail(strings.Join(renewals, "\n"), 40))
	}
	p.checkOneOwner(id, h, state)
}

// checkOneOwner checks that node h, in state in the store, still holds run
// id (alive) or was marked lost and stopped, and that nothing of the run's
// events came from h after another node marked it lost.
func (p *partition) checkOneOwner(id string, h *partNode, state string) {
	p.t.Helper()
	switch state {
	case "alive":
		if p.holder(id) != h.id {
			p.t.Fatalf("%s is alive but its run is on %s", h.id, p.holder(id))
		}
	case "lost":
		p.exited(h, 10*partLease)
	default:
		p.t.Fatalf("%s is %s", h.id, state)
	}
	addrs := map[string]string{}
	for _, n := range p.nodes {
		addrs[p.lab.addr(storeNet, n.host)] = n.id
	}
	lostAt := map[string]int64{}
	for _, e := range p.events(id) {
		if e.typ == paddock.EventNodeLost {
			var lost struct{ Node string }
			json.Unmarshal([]byte(e.data), &lost)
			lostAt[lost.Node] = e.seq
		}
		if at, ok := lostAt[addrs[e.addr]]; ok && state == "lost" && addrs[e.addr] == h.id {
			p.t.Fatalf("event %d (%s) from %s, after it was marked lost at %d", e.seq, e.typ, h.id, at)
		}
	}
}
