// Command cluster measures paddock's API as three nodes on one PostgreSQL
// database beside one daemon on SQLite, in one run on one machine.
//
// Both sides run side by side and get the same clients, one overlay run
// each, made through the API; their phases interleave in rounds (--rounds),
// since the machine's other load drifts. The write is the `write` tool (one
// tool.call event each, durable before it is answered), the cheapest API
// call that records an event: in a write phase every client writes as fast
// as it can, which gives the events appended per second and the write
// latency. In a read phase every client reads its run's record
// (GET /v1/runs/{id}) and its last events (GET /v1/runs/{id}/events),
// alternately, which gives the read latency. Then every run's events must
// be complete, in order and gap-free.
//
// On the cluster, client c's call i goes through node (c+i) mod 3's unix
// socket: a third of the writes reach the node that holds the run, two
// thirds are forwarded to it over the node listener; the reads are answered
// by whichever node they reach, from the shared store. Each node takes a
// third of the runs (--node-capacity).
//
// PostgreSQL is a private server this program starts (initdb in a
// temporary directory, a unix socket only) with its default durability
// (fsync on, synchronous_commit on), as SQLite's store is (WAL,
// synchronous=FULL). Without PostgreSQL, --quick prints a skip line and
// exits 0; a full run fails.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
	"github.com/paddock-dev/paddock/postgres/pgtest"
)

func main() {
	quick := flag.Bool("quick", false, "small workload for a CI smoke run")
	clients := flag.Int("clients", 24, "concurrent clients, one run each (a multiple of 3 spreads them evenly)")
	writes := flag.Int("writes", 300, "write tool calls per client")
	reads := flag.Int("reads", 300, "reads per client (GET run and GET events, alternately)")
	rounds := flag.Int("rounds", 3, "rounds, each side's writes and reads in turn in each")
	flag.Parse()
	if *quick {
		*clients, *writes, *reads, *rounds = 6, 20, 20, 2
	}
	if *clients < 3 || *rounds < 1 || *writes < *rounds || *reads < 2**rounds {
		fmt.Fprintln(os.Stderr, "bench: --clients must be at least 3, --rounds at least 1, --writes at least --rounds, --reads at least twice --rounds")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := benchutil.Subreaper()
	if err == nil {
		err = run(ctx, *quick, *clients, *writes, *reads, *rounds)
	}
	// Every daemon and the PostgreSQL server have been waited for by now:
	// what is left was left behind.
	if left := benchutil.Leftovers(10 * time.Second); len(left) > 0 {
		err = errors.Join(err, fmt.Errorf("processes left behind after the daemons stopped, killed: %s", strings.Join(left, "; ")))
	}
	stop()
	var skip errSkip
	if errors.As(err, &skip) {
		fmt.Printf("bench cluster: skipped: %s\n", skip.why)
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// errSkip ends a --quick run that cannot run here, with exit code 0.
type errSkip struct{ why string }

func (e errSkip) Error() string { return e.why }

// side is one of the two setups the bench compares: one node on SQLite,
// or three nodes on PostgreSQL, with its runs and its figures.
type side struct {
	name   string
	nodes  []*node
	runs   []string
	holder []int   // index in nodes of the node that holds run c
	before []int64 // run c's last seq before the measured writes
	placed map[string]int
	done   int // writes made per client so far

	events   int // events appended in the write phases
	elapsed  time.Duration
	writes   []time.Duration
	local    []time.Duration // writes that reached the run's node (cluster)
	fwd      []time.Duration // writes forwarded to it (cluster)
	getRun   []time.Duration
	getEvent []time.Duration
}

func run(ctx context.Context, quick bool, clients, writes, reads, rounds int) error {
	tmp, err := os.MkdirTemp("", "paddock-bench-cluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	os.Chmod(tmp, 0o755)
	pgBin, err := pgtest.FindBin()
	if err != nil {
		if quick {
			return errSkip{"PostgreSQL is not installed (" + err.Error() + "); apt-get install postgresql"}
		}
		return fmt.Errorf("PostgreSQL is not installed (%v); apt-get install postgresql", err)
	}
	repo := filepath.Join(tmp, "src", "app")
	if err := makeRepo(repo); err != nil {
		return err
	}
	bin, err := benchutil.Binary(tmp)
	if err != nil {
		return err
	}
	benchutil.Step("starting PostgreSQL (%s)", pgBin)
	// The server's own durability: pgtest's test server does not flush,
	// which would compare a PostgreSQL that does not with a SQLite that does.
	pg, err := pgtest.Start(pgBin, true)
	if err != nil {
		return err
	}
	defer pg.Stop()

	// Both sides run side by side, so that their phases interleave: one
	// node on SQLite, three on PostgreSQL, each taking a third of the runs.
	benchutil.Step("starting one node on SQLite and three on PostgreSQL")
	var all []*node
	stopAll := func() error {
		var errs []error
		for _, n := range all {
			errs = append(errs, n.Stop())
		}
		all = nil
		return errors.Join(errs...)
	}
	defer stopAll()
	solo, err := startNode(ctx, bin, filepath.Join(tmp, "solo"))
	if err != nil {
		return err
	}
	all = append(all, solo)
	lite := &side{name: "SQLite", nodes: []*node{solo}}
	cl := &side{name: "PostgreSQL"}
	per := (clients + 2) / 3
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		n, err := startNode(ctx, bin, filepath.Join(tmp, id), "--store", pg.DatabaseURL("postgres"), "--node-id", id,
			"--node-capacity", strconv.Itoa(per))
		if err != nil {
			return err
		}
		all = append(all, n)
		cl.nodes = append(cl.nodes, n)
	}
	for _, sd := range []*side{lite, cl} {
		if err := sd.setUp(ctx, repo, clients); err != nil {
			return fmt.Errorf("%s: %w", sd.name, err)
		}
	}
	// The rounds: each side's writes, then each side's reads, in turn.
	for r := range rounds {
		n := writes/rounds + btoi(r < writes%rounds)
		m := reads/rounds + btoi(r < reads%rounds)
		for _, sd := range []*side{lite, cl} {
			benchutil.Step("round %d/%d, %s: %d clients, %d writes each, then %d reads each", r+1, rounds, sd.name, clients, n, m)
			if err := sd.write(ctx, n); err != nil {
				return fmt.Errorf("%s: %w", sd.name, err)
			}
			if err := sd.read(ctx, m); err != nil {
				return fmt.Errorf("%s: %w", sd.name, err)
			}
		}
	}
	for _, sd := range []*side{lite, cl} {
		if err := sd.check(ctx, writes); err != nil {
			return fmt.Errorf("%s: %w", sd.name, err)
		}
	}
	if err := stopAll(); err != nil {
		return err
	}
	pg.Stop()

	pct := func(ds []time.Duration, p float64) time.Duration { return benchutil.Round(benchutil.Percentile(ds, p)) }
	lat := func(ds []time.Duration) string { return fmt.Sprintf("p50 %s, p99 %s", pct(ds, 50), pct(ds, 99)) }
	p99 := func(a, b []time.Duration) string {
		return fmt.Sprintf("%.2f×", float64(benchutil.Percentile(a, 99))/float64(benchutil.Percentile(b, 99)))
	}
	rate := func(sd *side) float64 { return float64(sd.events) / sd.elapsed.Seconds() }
	fmt.Printf("\n%s\n\n| figure | paddock | peer | ratio |\n|---|---|---|---|\n", benchutil.Machine(tmp))
	fmt.Printf("| cluster: events appended through the API, %d clients × %d write tool calls, one overlay run each, %d interleaved rounds (every run's events complete and gap-free) | %.0f events/s (3 nodes on PostgreSQL, runs placed %s) | %.0f events/s (1 node on SQLite) | %.2f× |\n",
		clients, writes, rounds, rate(cl), placement(cl.placed), rate(lite), rate(cl)/rate(lite))
	fmt.Printf("| cluster: write tool call latency under that load (p99 ratio) | %s | %s | %s |\n", lat(cl.writes), lat(lite.writes), p99(cl.writes, lite.writes))
	fmt.Printf("| cluster: of which reached the run's node / forwarded to it (%d / %d calls) | %s / %s | – | %s / %s |\n",
		len(cl.local), len(cl.fwd), lat(cl.local), lat(cl.fwd), p99(cl.local, lite.writes), p99(cl.fwd, lite.writes))
	fmt.Printf("| cluster: GET run latency, %d clients reading at once (p99 ratio) | %s | %s | %s |\n", clients, lat(cl.getRun), lat(lite.getRun), p99(cl.getRun, lite.getRun))
	fmt.Printf("| cluster: GET events (last 20) latency, same load (p99 ratio) | %s | %s | %s |\n", lat(cl.getEvent), lat(lite.getEvent), p99(cl.getEvent, lite.getEvent))
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func placement(m map[string]int) string {
	var parts []string
	for _, id := range []string{"n1", "n2", "n3"} {
		parts = append(parts, fmt.Sprintf("%s %d", id, m[id]))
	}
	return strings.Join(parts, ", ")
}

// setUp adds the project and makes the side's runs, one after another
// (placement reads the load as it is when it is asked), each through the
// next node, and writes once in each (the first write makes the run's
// harness: not part of the figures).
func (sd *side) setUp(ctx context.Context, repo string, clients int) error {
	sd.placed = map[string]int{}
	if _, err := sd.nodes[0].Client.AddProject(ctx, paddock.AddProjectRequest{Path: repo, Name: "app"}); err != nil {
		return err
	}
	sd.runs, sd.holder = make([]string, clients), make([]int, clients)
	for c := range clients {
		r, err := sd.nodes[c%len(sd.nodes)].Client.Create(ctx, paddock.CreateRunRequest{Project: "app", Kind: string(paddock.KindOverlay)})
		if err != nil {
			return fmt.Errorf("create run %d: %w", c, err)
		}
		sd.runs[c] = r.ID
		sd.placed[r.Node]++
		for i, n := range sd.nodes {
			if n.id == r.Node {
				sd.holder[c] = i
			}
		}
		if _, err := sd.nodes[0].Client.CallTool(ctx, r.ID, "write", map[string]string{"path": "warm.txt", "content": "x"}); err != nil {
			return fmt.Errorf("first write on run %d: %w", c, err)
		}
	}
	for _, id := range sd.runs {
		r, err := sd.nodes[0].Client.Run(ctx, id)
		if err != nil {
			return err
		}
		sd.before = append(sd.before, r.LastSeq)
	}
	return nil
}

// each runs fn for every client at once and returns how long they took.
func (sd *side) each(fn func(c int) error) (time.Duration, error) {
	errs := make(chan error, len(sd.runs))
	var wg sync.WaitGroup
	start := time.Now()
	for c := range sd.runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(c); err != nil {
				errs <- fmt.Errorf("client %d: %w", c, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return time.Since(start), <-errs
}

// write has every client make n write tool calls on its run as fast as it
// can; on the cluster, client c's call i goes through node (c+i) mod 3.
func (sd *side) write(ctx context.Context, n int) error {
	var mu sync.Mutex
	elapsed, err := sd.each(func(c int) error {
		var all, local, fwd []time.Duration
		for k := range n {
			i := sd.done + k
			via := (c + i) % len(sd.nodes)
			t0 := time.Now()
			if _, err := sd.nodes[via].Client.CallTool(ctx, sd.runs[c], "write", map[string]string{"path": fmt.Sprintf("out/%d.txt", i%50), "content": strconv.Itoa(i)}); err != nil {
				return err
			}
			d := time.Since(t0)
			all = append(all, d)
			if len(sd.nodes) > 1 {
				if via == sd.holder[c] {
					local = append(local, d)
				} else {
					fwd = append(fwd, d)
				}
			}
		}
		mu.Lock()
		sd.writes, sd.local, sd.fwd = append(sd.writes, all...), append(sd.local, local...), append(sd.fwd, fwd...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	sd.done += n
	sd.elapsed += elapsed
	sd.events += n * len(sd.runs)
	return nil
}

// read has every client read its run's record and its last 20 events,
// alternately, n calls in all, through the nodes in turn.
func (sd *side) read(ctx context.Context, n int) error {
	var mu sync.Mutex
	_, err := sd.each(func(c int) error {
		var gr, ge []time.Duration
		for i := range n {
			cl := sd.nodes[(c+i)%len(sd.nodes)].Client
			t0 := time.Now()
			if i%2 == 0 {
				if _, err := cl.Run(ctx, sd.runs[c]); err != nil {
					return err
				}
				gr = append(gr, time.Since(t0))
			} else {
				if _, err := cl.Events(ctx, sd.runs[c], max(sd.before[c]+int64(sd.done)-20, 0), 20); err != nil {
					return err
				}
				ge = append(ge, time.Since(t0))
			}
		}
		mu.Lock()
		sd.getRun, sd.getEvent = append(sd.getRun, gr...), append(sd.getEvent, ge...)
		mu.Unlock()
		return nil
	})
	return err
}

// check: every write's event is there once, in order, with no gap,
// whichever node took it (read through the last node), and nothing else
// was appended while the writes were measured.
func (sd *side) check(ctx context.Context, writes int) error {
	for c, id := range sd.runs {
		evs, err := sd.nodes[len(sd.nodes)-1].Client.Events(ctx, id, 0, 1<<30)
		if err != nil {
			return err
		}
		n, housekeeping := 0, 0
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				return fmt.Errorf("run %s: event %d has seq %d", id, i, e.Seq)
			}
			switch {
			case e.Seq <= sd.before[c]:
			case e.Type == paddock.EventToolCall:
				n++
			case e.Type == paddock.EventClusterCheckpoint:
				// A node stores a changed run's checkpoint within 3 s, on
				// its own schedule: it may land among the writes.
				housekeeping++
			}
		}
		if n != writes || len(evs) != int(sd.before[c])+writes+housekeeping {
			return fmt.Errorf("run %s: %d tool calls and %d events recorded after the warm-up, want %d of each", id, n, len(evs)-int(sd.before[c])-housekeeping, writes)
		}
	}
	return nil
}

// makeRepo makes a small git repository: a few files, one commit.
func makeRepo(repo string) error {
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("src/f%d.txt", i)] = strings.Repeat("a line of text\n", 50)
	}
	return benchutil.Repo(repo, files)
}

// node is one paddock daemon started by the bench, and its node id.
type node struct {
	*benchutil.Daemon
	id string
}

// startNode starts `paddock serve` with its state in home and the extra
// flags, and waits for its socket to answer.
func startNode(ctx context.Context, bin, home string, extra ...string) (*node, error) {
	d, err := benchutil.StartDaemonFrom(ctx, bin, home, extra...)
	if err != nil {
		return nil, err
	}
	st, err := d.Client.Status(ctx)
	if err != nil {
		d.Stop()
		return nil, err
	}
	return &node{Daemon: d, id: st.Node}, nil
}
