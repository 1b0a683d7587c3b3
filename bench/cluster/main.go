// Command cluster measures paddock's API as three nodes on one PostgreSQL
// database beside one daemon on SQLite, in one run on one machine.
//
// Each side gets the same clients, one overlay run each, made through the
// API. The write is the `write` tool (one tool.call event each, durable
// before it is answered), the cheapest API call that records an event: in
// the first phase every client writes as fast as it can, which gives the
// events appended per second and the write latency. In the second phase
// every client reads its run's record (GET /v1/runs/{id}) and its last
// events (GET /v1/runs/{id}/events), which gives the read latency. Then
// every run's events must be complete, in order and gap-free.
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
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
	"github.com/paddock-dev/paddock/client"
)

func main() {
	quick := flag.Bool("quick", false, "small workload for a CI smoke run")
	clients := flag.Int("clients", 24, "concurrent clients, one run each (a multiple of 3 spreads them evenly)")
	writes := flag.Int("writes", 300, "write tool calls per client")
	reads := flag.Int("reads", 300, "reads per client (GET run and GET events, alternately)")
	flag.Parse()
	if *quick {
		*clients, *writes, *reads = 6, 20, 20
	}
	if *clients < 3 || *writes < 1 || *reads < 2 {
		fmt.Fprintln(os.Stderr, "bench: --clients must be at least 3, --writes at least 1, --reads at least 2")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := benchutil.Subreaper()
	if err == nil {
		err = run(ctx, *quick, *clients, *writes, *reads)
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

// result is one side's figures.
type result struct {
	events   int // events appended in the write phase
	elapsed  time.Duration
	writes   []time.Duration
	local    []time.Duration // writes that reached the run's node (cluster)
	fwd      []time.Duration // writes forwarded to it (cluster)
	getRun   []time.Duration
	getEvent []time.Duration
	placed   map[string]int // node → runs
}

func run(ctx context.Context, quick bool, clients, writes, reads int) error {
	tmp, err := os.MkdirTemp("", "paddock-bench-cluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	os.Chmod(tmp, 0o755)
	pgBin, err := findPostgres()
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
	bin := filepath.Join(tmp, "paddock")
	benchutil.Step("building paddock")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/paddock").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}

	// One node on SQLite.
	benchutil.Step("one node on SQLite: %d clients, %d writes then %d reads each", clients, writes, reads)
	solo, err := startNode(ctx, bin, filepath.Join(tmp, "solo"))
	if err != nil {
		return err
	}
	lite, err := measure(ctx, []*node{solo}, repo, clients, writes, reads)
	if serr := solo.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("SQLite: %w", err)
	}

	// Three nodes on PostgreSQL.
	benchutil.Step("starting PostgreSQL (%s)", pgBin)
	pg, err := startPostgres(ctx, pgBin)
	if err != nil {
		return err
	}
	defer pg.stop()
	benchutil.Step("three nodes on PostgreSQL: %d clients, %d writes then %d reads each", clients, writes, reads)
	per := (clients + 2) / 3
	var nodes []*node
	stopAll := func() error {
		var errs []error
		for _, n := range nodes {
			errs = append(errs, n.stop())
		}
		return errors.Join(errs...)
	}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		n, err := startNode(ctx, bin, filepath.Join(tmp, id), "--store", pg.url, "--node-id", id,
			"--node-capacity", strconv.Itoa(per))
		if err != nil {
			stopAll()
			return err
		}
		nodes = append(nodes, n)
	}
	cl, err := measure(ctx, nodes, repo, clients, writes, reads)
	if serr := stopAll(); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("PostgreSQL: %w", err)
	}
	if err := pg.stop(); err != nil {
		return err
	}

	pct := func(ds []time.Duration, p float64) time.Duration { return benchutil.Round(benchutil.Percentile(ds, p)) }
	lat := func(ds []time.Duration) string { return fmt.Sprintf("p50 %s, p99 %s", pct(ds, 50), pct(ds, 99)) }
	p99 := func(a, b []time.Duration) string {
		return fmt.Sprintf("%.2f×", float64(benchutil.Percentile(a, 99))/float64(benchutil.Percentile(b, 99)))
	}
	rate := func(r result) float64 { return float64(r.events) / r.elapsed.Seconds() }
	fmt.Printf("\n%s\n\n| figure | paddock | peer | ratio |\n|---|---|---|---|\n", benchutil.Machine(tmp))
	fmt.Printf("| cluster: events appended through the API, %d clients × %d write tool calls, one overlay run each (every run's events complete and gap-free) | %.0f events/s (3 nodes on PostgreSQL, runs placed %s) | %.0f events/s (1 node on SQLite) | %.2f× |\n",
		clients, writes, rate(cl), placement(cl.placed), rate(lite), rate(cl)/rate(lite))
	fmt.Printf("| cluster: write tool call latency under that load (p99 ratio) | %s | %s | %s |\n", lat(cl.writes), lat(lite.writes), p99(cl.writes, lite.writes))
	fmt.Printf("| cluster: of which reached the run's node / forwarded to it (%d / %d calls) | %s / %s | – | %s / %s |\n",
		len(cl.local), len(cl.fwd), lat(cl.local), lat(cl.fwd), p99(cl.local, lite.writes), p99(cl.fwd, lite.writes))
	fmt.Printf("| cluster: GET run latency, %d clients reading at once (p99 ratio) | %s | %s | %s |\n", clients, lat(cl.getRun), lat(lite.getRun), p99(cl.getRun, lite.getRun))
	fmt.Printf("| cluster: GET events (last 20) latency, same load (p99 ratio) | %s | %s | %s |\n", lat(cl.getEvent), lat(lite.getEvent), p99(cl.getEvent, lite.getEvent))
	return nil
}

func placement(m map[string]int) string {
	var parts []string
	for _, id := range []string{"n1", "n2", "n3"} {
		parts = append(parts, fmt.Sprintf("%s %d", id, m[id]))
	}
	return strings.Join(parts, ", ")
}

// measure runs the workload on nodes (one, or the three of a cluster).
func measure(ctx context.Context, nodes []*node, repo string, clients, writes, reads int) (result, error) {
	res := result{placed: map[string]int{}}
	if _, err := nodes[0].c.AddProject(ctx, paddock.AddProjectRequest{Path: repo, Name: "app"}); err != nil {
		return res, err
	}
	// The runs, made one after another (placement reads the load as it is
	// when it is asked), each through the next node.
	runs := make([]string, clients)
	holder := make([]int, clients) // index in nodes of the node that holds run c
	for c := range clients {
		r, err := nodes[c%len(nodes)].c.Create(ctx, paddock.CreateRunRequest{Project: "app", Kind: string(paddock.KindOverlay)})
		if err != nil {
			return res, fmt.Errorf("create run %d: %w", c, err)
		}
		runs[c] = r.ID
		res.placed[r.Node]++
		for i, n := range nodes {
			if n.id == r.Node {
				holder[c] = i
			}
		}
		// The first write makes the run's harness: not part of the figures.
		if _, err := nodes[0].c.CallTool(ctx, r.ID, "write", map[string]string{"path": "warm.txt", "content": "x"}); err != nil {
			return res, fmt.Errorf("first write on run %d: %w", c, err)
		}
	}
	var before []int64
	for _, id := range runs {
		r, err := nodes[0].c.Run(ctx, id)
		if err != nil {
			return res, err
		}
		before = append(before, r.LastSeq)
	}

	var mu sync.Mutex
	each := func(fn func(c int) error) (time.Duration, error) {
		errs := make(chan error, clients)
		var wg sync.WaitGroup
		start := time.Now()
		for c := range clients {
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
	elapsed, err := each(func(c int) error {
		var all, local, fwd []time.Duration
		for i := range writes {
			via := (c + i) % len(nodes)
			t0 := time.Now()
			if _, err := nodes[via].c.CallTool(ctx, runs[c], "write", map[string]string{"path": fmt.Sprintf("out/%d.txt", i%50), "content": strconv.Itoa(i)}); err != nil {
				return err
			}
			d := time.Since(t0)
			all = append(all, d)
			if len(nodes) > 1 {
				if via == holder[c] {
					local = append(local, d)
				} else {
					fwd = append(fwd, d)
				}
			}
		}
		mu.Lock()
		res.writes, res.local, res.fwd = append(res.writes, all...), append(res.local, local...), append(res.fwd, fwd...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return res, err
	}
	res.elapsed = elapsed
	_, err = each(func(c int) error {
		var gr, ge []time.Duration
		for i := range reads {
			cl := nodes[(c+i)%len(nodes)].c
			t0 := time.Now()
			if i%2 == 0 {
				if _, err := cl.Run(ctx, runs[c]); err != nil {
					return err
				}
				gr = append(gr, time.Since(t0))
			} else {
				if _, err := cl.Events(ctx, runs[c], before[c]+int64(writes)-20, 20); err != nil {
					return err
				}
				ge = append(ge, time.Since(t0))
			}
		}
		mu.Lock()
		res.getRun, res.getEvent = append(res.getRun, gr...), append(res.getEvent, ge...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return res, err
	}
	// Every write's event is there once, in order, with no gap, whichever
	// node took it; read through the last node.
	for c, id := range runs {
		evs, err := nodes[len(nodes)-1].c.Events(ctx, id, 0, 1<<30)
		if err != nil {
			return res, err
		}
		n := 0
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				return res, fmt.Errorf("run %s: event %d has seq %d", id, i, e.Seq)
			}
			if e.Seq > before[c] && e.Type == paddock.EventToolCall {
				n++
			}
		}
		if n != writes {
			return res, fmt.Errorf("run %s: %d tool calls recorded after the warm-up, want %d", id, n, writes)
		}
		res.events += int(evs[len(evs)-1].Seq - before[c])
	}
	return res, nil
}

// makeRepo makes a small git repository: a few files, one commit.
func makeRepo(repo string) error {
	if err := os.MkdirAll(filepath.Join(repo, "src"), 0o755); err != nil {
		return err
	}
	for i := range 20 {
		os.WriteFile(filepath.Join(repo, "src", fmt.Sprintf("f%d.txt", i)), []byte(strings.Repeat("a line of text\n", 50)), 0o644)
	}
	if _, err := benchutil.Git("", "init", "-q", repo); err != nil {
		return err
	}
	benchutil.Git(repo, "add", "-A")
	_, err := benchutil.Git(repo, "commit", "-qm", "x")
	return err
}

// node is one paddock daemon started by the bench.
type node struct {
	id   string
	home string
	cmd  *exec.Cmd
	log  string
	c    *client.Client
}

// startNode starts `paddock serve` with its state in home and the extra
// flags, and waits for its socket to answer.
func startNode(ctx context.Context, bin, home string, extra ...string) (*node, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(home, "bench-daemon.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, append([]string{"serve", "--home", home, "--log-level", "warn"}, extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "PADDOCK_NO_AUTOSTART=1")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	n := &node{home: home, cmd: cmd, log: logf.Name(), c: client.Unix(filepath.Join(home, "paddock.sock"))}
	for i := 0; ; i++ {
		st, err := n.c.Status(ctx)
		if err == nil {
			n.id = st.Node
			return n, nil
		}
		if i > 600 || ctx.Err() != nil {
			n.stop()
			return nil, fmt.Errorf("the daemon in %s did not start: %v\n%s", home, err, n.logTail(20))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// stop stops the daemon: SIGTERM, then SIGKILL a minute later (a defect
// of the daemon's, then, and an error).
func (n *node) stop() error {
	if n.cmd.ProcessState != nil {
		return nil
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { n.cmd.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(time.Minute):
		n.cmd.Process.Kill()
		<-done
		return fmt.Errorf("the daemon in %s did not stop a minute after SIGTERM:\n%s", n.home, n.logTail(20))
	}
}

func (n *node) logTail(lines int) string {
	b, err := os.ReadFile(n.log)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(len(all)-lines, 0):], "\n")
}
