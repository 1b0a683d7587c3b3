// Command soak runs three paddock nodes on one PostgreSQL, each in a
// network namespace of its own (internal/netlab), for a long while:
// clients walk a few hundred runs through their lives (made, written to,
// commands run, then submitted, approved and applied to a branch or the
// working tree, or rejected, or left), retrying as the errors say, while a
// schedule drawn from --seed kills nodes, cuts them from the store or
// from each other, makes a link lossy and restarts PostgreSQL. At the end,
// every fault healed and every node up, it checks:
//
//   - every run is in the state its events explain (its workspace's state
//     the last its events moved it to, its holder the node its last
//     adoption gave it to, its review as its last change-set event says);
//   - no event is missing: each run's seqs are 1…last_seq, and every call
//     a client had acknowledged has its event;
//   - the project repository is as it was but for what was approved and
//     applied: its refs as they were, but a branch per run applied to a
//     branch, whose commit is the approved change set on the run's base;
//     its working tree and index as they were, but the change sets
//     applied into it; git fsck clean.
//
// It prints the schedule, the clients' calls (by operation, p50 and p99,
// errors by code) and each check; it exits 1 if a check fails.
//
//	sudo go run ./bench/soak --duration 30m --seed 1
//
// It needs root, ip, nsenter, nft and PostgreSQL (as TestClusterPartition
// does).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/internal/netlab"
	"github.com/paddock-dev/paddock/sandbox"
)

// config is what a soak is given.
type config struct {
	Duration time.Duration
	Seed     int64
	Runs     int
	Clients  int
	Lease    time.Duration
	Repo     string // a repository to copy as the project; "" makes one
	Bin      string // the paddock binary; "" builds one (benchutil.Binary)
	Keep     bool   // keep the soak's directory (the nodes' logs)
}

func main() {
	var cfg config
	flag.DurationVar(&cfg.Duration, "duration", 30*time.Minute, "how long the clients make runs and the schedule injects faults")
	flag.Int64Var(&cfg.Seed, "seed", 1, "seed of the fault schedule and of the clients' choices")
	flag.IntVar(&cfg.Runs, "runs", 300, "runs made over the duration")
	flag.IntVar(&cfg.Clients, "clients", 6, "clients, each walking one run at a time")
	flag.DurationVar(&cfg.Lease, "lease", 2*time.Second, "the nodes' --node-lease")
	flag.StringVar(&cfg.Repo, "repo", "", "a git repository to copy as the project (default: one made for the soak)")
	flag.BoolVar(&cfg.Keep, "keep", false, "keep the soak's directory (nodes' homes and logs)")
	flag.Parse()
	if cfg.Runs < 1 || cfg.Clients < 1 || cfg.Duration < 10*time.Second {
		fmt.Fprintln(os.Stderr, "soak: --runs and --clients must be at least 1, --duration at least 10s")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := benchutil.Subreaper()
	if err == nil {
		err = run(ctx, cfg, os.Stdout)
	}
	stop()
	if errors.Is(err, netlab.ErrUnavailable) {
		fmt.Printf("soak: skipped: %v\n", err)
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// soak is one soak under way.
type soak struct {
	cfg     config
	out     io.Writer
	start   time.Time
	lab     *netlab.Lab
	pg      *netlab.Postgres
	db      *pgxpool.Pool
	nodes   []*node
	dir     string
	repo    string
	tracked int // src/f0.txt … in the made repository
	rec     recorder
	stored  map[string]*storedRun // the store's runs, as checkEvents read them

	mu   sync.Mutex
	runs []*runRec
	byID map[string]*runRec
}

func (s *soak) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "soak %7s: %s\n", time.Since(s.start).Round(100*time.Millisecond), fmt.Sprintf(format, args...))
}

func (s *soak) node(id string) *node {
	for _, n := range s.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

func (s *soak) setID(r *runRec) {
	s.mu.Lock()
	s.byID[r.id] = r
	s.mu.Unlock()
}

// errChecks is what run returns when the soak ran and a check failed.
var errChecks = errors.New("a check failed")

// run sets the lab up, soaks, checks, and tears everything down however it
// ends; it returns errChecks (wrapped) if a check failed.
func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	s := &soak{cfg: cfg, out: out, start: time.Now(), byID: map[string]*runRec{}}
	lab, err := netlab.New()
	if err != nil {
		return err
	}
	s.lab = lab
	defer func() {
		if cerr := lab.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the lab: %w", cerr))
		}
	}()
	if cfg.Keep {
		s.dir, err = os.MkdirTemp("", "paddock-soak-")
		if err == nil {
			err = os.Chmod(s.dir, 0o755)
		}
		fmt.Fprintf(os.Stderr, "soak: keeping %s\n", s.dir)
	} else {
		s.dir, err = lab.TempDir("soak")
	}
	if err != nil {
		return err
	}
	if s.cfg.Bin == "" {
		if s.cfg.Bin, err = benchutil.Binary(s.dir); err != nil {
			return err
		}
	}
	s.logf("starting PostgreSQL in the lab")
	if s.pg, err = lab.StartPostgres(ctx); err != nil {
		return err
	}
	s.repo = filepath.Join(s.dir, "src", "app")
	if err := s.makeRepo(); err != nil {
		return err
	}
	before, err := readRepo(s.repo)
	if err != nil {
		return err
	}
	// The nodes, each on its own machine; the supervisors stop with
	// superviseCtx, then the nodes (before the lab deletes their machines).
	superviseCtx, stopSupervising := context.WithCancel(context.WithoutCancel(ctx))
	var supervisors sync.WaitGroup
	defer func() {
		stopSupervising()
		supervisors.Wait()
		err = errors.Join(err, s.stopNodes())
	}()
	for i, id := range []string{"n1", "n2", "n3"} {
		n := &node{id: id, host: 11 + i, home: filepath.Join(s.dir, id)}
		n.c = client.Unix(filepath.Join(n.home, "paddock.sock"))
		if n.ns, err = lab.Machine(id, n.host, netlab.StoreNet, netlab.PeerNet); err != nil {
			return err
		}
		s.nodes = append(s.nodes, n)
		s.logf("starting node %s", id)
		if err := s.startNode(ctx, n); err != nil {
			return err
		}
	}
	if s.db, err = pgxpool.New(ctx, s.pg.DSN("paddock")); err != nil {
		return fmt.Errorf("the soak's own connections to the store: %w", err)
	}
	defer s.db.Close()
	for _, n := range s.nodes {
		supervisors.Add(1)
		go func() { defer supervisors.Done(); s.supervise(superviseCtx, n) }()
	}
	if _, err := s.nodes[0].c.AddProject(ctx, paddock.AddProjectRequest{Path: s.repo, Name: "app"}); err != nil {
		return fmt.Errorf("adding the project: %w", err)
	}

	faults := schedule(cfg.Seed, cfg.Duration, []string{"n1", "n2", "n3"})
	fmt.Fprintf(out, "soak: %d runs over %s, %d clients, seed %d, lease %s; %s\n", cfg.Runs, cfg.Duration, cfg.Clients, cfg.Seed, cfg.Lease, benchutil.Machine(s.dir))
	fmt.Fprintf(out, "\nfault schedule (seed %d):\n", cfg.Seed)
	for _, f := range faults {
		fmt.Fprintf(out, "  %s\n", f)
	}
	s.start = time.Now()
	soakCtx, endSoak := context.WithTimeout(ctx, cfg.Duration+5*time.Minute)
	defer endSoak()
	var injector sync.WaitGroup
	injector.Add(1)
	go func() { defer injector.Done(); s.inject(soakCtx, s.start, faults) }()
	s.drive(soakCtx)
	injector.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	elapsed := time.Since(s.start)
	s.logf("clients done; healing every link and waiting for the cluster to settle")
	if err := s.heal(ctx); err != nil {
		return err
	}
	settled := s.settle(ctx)
	var res results
	res.add("the cluster settled: every node up and alive, no run on a lost node or being adopted", settled)
	s.checkReviews(ctx, &res)
	stopSupervising()
	supervisors.Wait()
	if err := s.stopNodes(); err != nil {
		res.add("every node stopped on SIGTERM", err)
	}
	s.checkEvents(ctx, &res)
	s.checkRepo(ctx, before, &res)
	// PostgreSQL stopped too: what is left was left by the nodes.
	s.db.Close()
	s.pg.Stop()
	left := benchutil.Leftovers(10 * time.Second)
	for _, n := range s.nodes {
		sandbox.SweepCgroupsOf(filepath.Join(n.home, "harness"))
	}
	s.report(elapsed, faults, left, &res)
	if res.failed > 0 {
		return fmt.Errorf("%w: %d of %d checks", errChecks, res.failed, len(res.lines))
	}
	return nil
}

// drive releases the runs evenly over 85% of the duration to the
// clients, and waits for every life to end.
func (s *soak) drive(ctx context.Context) {
	queue := make(chan *runRec, s.cfg.Runs)
	var wg sync.WaitGroup
	for c := range s.cfg.Clients {
		wg.Add(1)
		w := &worker{s: s, rng: newRand(s.cfg.Seed, 1_000_000+c)}
		go func() {
			defer wg.Done()
			for r := range queue {
				w.live(ctx, r)
				s.logf("run %s (%s) %s: %s", r.tag, r.id, r.fate, orDone(r.ended))
			}
		}()
	}
	span := s.cfg.Duration * 85 / 100
	for i := range s.cfg.Runs {
		at := s.start.Add(span * time.Duration(i) / time.Duration(s.cfg.Runs))
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(at)):
		}
		if ctx.Err() != nil {
			break
		}
		r := &runRec{i: i, tag: fmt.Sprintf("r%04d", i)}
		r.fate = drawFate(newRand(s.cfg.Seed, i))
		s.mu.Lock()
		s.runs = append(s.runs, r)
		s.mu.Unlock()
		queue <- r
	}
	close(queue)
	wg.Wait()
}

func orDone(s string) string {
	if s == "" {
		return "done"
	}
	return "ended early at " + s
}

// stopNodes stops every node (SIGTERM).
func (s *soak) stopNodes() error {
	var errs []error
	for _, n := range s.nodes {
		errs = append(errs, n.stop())
	}
	return errors.Join(errs...)
}

// settle waits (up to five minutes) for every node to be up and alive in
// the store, and no run to be on a lost node or in an adoption.
func (s *soak) settle(ctx context.Context) error {
	deadline := time.Now().Add(5 * time.Minute)
	var why string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		why = s.unsettled(ctx)
		if why == "" {
			time.Sleep(3 * s.cfg.Lease) // the last checkpoints stored
			if why = s.unsettled(ctx); why == "" {
				return nil
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("not within 5m: %s", why)
}

func (s *soak) unsettled(ctx context.Context) string {
	for _, n := range s.nodes {
		if !n.running() {
			return "node " + n.id + " is not running"
		}
		var st string
		if err := s.db.QueryRow(ctx, `SELECT state FROM paddock_nodes WHERE id = $1`, n.id).Scan(&st); err != nil {
			return "node " + n.id + ": " + err.Error()
		}
		if st != string(paddock.NodeAlive) {
			return "node " + n.id + " is " + st
		}
	}
	var stranded, adopting int
	err := s.db.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE n.state <> 'alive' AND w.state NOT IN ('cleaned', 'rejected', 'cleanup_pending')),
		count(*) FILTER (WHERE w.state = 'preparing')
		FROM runs r JOIN workspaces w ON w.run_id = r.id LEFT JOIN paddock_nodes n ON n.id = r.node`).Scan(&stranded, &adopting)
	if err != nil {
		return err.Error()
	}
	if stranded+adopting > 0 {
		return fmt.Sprintf("%d live runs on a node not alive, %d being prepared or adopted", stranded, adopting)
	}
	return ""
}
