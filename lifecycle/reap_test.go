package lifecycle_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/lifecycle"
	"github.com/paddock-dev/paddock/postgres"
	"github.com/paddock-dev/paddock/postgres/pgtest"
	"github.com/paddock-dev/paddock/sandbox"
	"github.com/paddock-dev/paddock/workspace"
)

// The node tests below kill a node with SIGKILL: node na is this test
// binary started again (TestKilledNodeHelper), which joins the shared
// store, makes a run, runs a command in it through the run's harness, says
// so, and waits to be killed. Its harness outlives it, as a real node's
// does after kill -9.

const reapLease = 2 * time.Second

// reapCluster is one PostgreSQL database, one project, and node na's
// state directory.
type reapCluster struct {
	dsn, base, repo string
}

func (c *reapCluster) state(id string) string { return filepath.Join(c.base, id, "state") }

func newReapCluster(t *testing.T) *reapCluster {
	t.Helper()
	if _, err := gitx.New(context.Background()); err != nil {
		t.Skipf("git unavailable: %v", err)
	}
	c := &reapCluster{base: t.TempDir()}
	c.dsn = pgtest.Need(t).Database(t, c.base)
	c.repo = gittest.NewRepo(t, filepath.Join(c.base, "src", "my app"), map[string]string{"README.md": "hello\n"})
	return c
}

// node opens node id's Manager on the cluster: joined with a lease, its
// harnesses in its state directory when withHarnesses. Its lease is
// renewed until the test ends; the Manager is closed then.
func (c *reapCluster) node(t testing.TB, id string, withHarnesses bool) (*lifecycle.Manager, *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	g, err := gitx.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	state := c.state(id)
	wsDir := filepath.Join(state, "workspaces")
	os.MkdirAll(wsDir, 0o700)
	s, err := postgres.Open(ctx, c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Join(ctx, postgres.NodeConfig{ID: id, Home: id, Address: "http://127.0.0.1:1", Capacity: 8, Lease: reapLease}); err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go func() {
		for rctx.Err() == nil {
			s.Renew(rctx)
			select {
			case <-rctx.Done():
			case <-time.After(reapLease / 4):
			}
		}
	}()
	m, err := lifecycle.NewManager(ctx, lifecycle.Config{Store: s, Cluster: s, Git: g,
		Providers: workspace.Providers(g, wsDir), WorkspacesDir: wsDir, ArtifactsDir: filepath.Join(state, "artifacts")})
	if err != nil {
		t.Fatal(err)
	}
	if withHarnesses {
		m.Harnesses = &sandbox.Pool{Dir: filepath.Join(state, "harness")}
		if os.Getuid() == 0 {
			m.SandboxUID = 65534
		}
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m, s
}

// TestKilledNodeHelper is node na of the tests below when
// PADDOCK_KILLED_NODE is set (to the cluster's base directory; the DSN and
// the project in the variables beside it); otherwise it does nothing.
func TestKilledNodeHelper(t *testing.T) {
	base := os.Getenv("PADDOCK_KILLED_NODE")
	if base == "" {
		return
	}
	c := &reapCluster{base: base, dsn: os.Getenv("PADDOCK_KILLED_NODE_DSN"), repo: os.Getenv("PADDOCK_KILLED_NODE_REPO")}
	ctx := context.Background()
	m, _ := c.node(t, "na", true)
	if _, err := m.Projects.Project(ctx, "my-app"); err != nil {
		if _, err := m.Projects.AddProject(ctx, paddock.AddProjectRequest{Path: c.repo}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: string(paddock.KindClone)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "echo work > work.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.Enforcement.HarnessPID == 0 {
		t.Fatalf("the command: exit %d, harness %d, mode %s %s: %s", res.ExitCode, res.Enforcement.HarnessPID, res.Enforcement.Mode, res.Enforcement.ModeReason, res.Stderr)
	}
	lifecycle.StoreCheckpoint(ctx, m, r.ID, "test")
	fmt.Printf("RUN %s %d\n", r.ID, res.Enforcement.HarnessPID)
	select {} // until killed
}

// killedNode starts node na (TestKilledNodeHelper), which makes a run and
// its harness, and kills it with SIGKILL; it returns the run and the pid
// of its harness, which is killed when the test ends, whatever happened.
func (c *reapCluster) killedNode(t *testing.T) (runID string, harness int) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root: the harness runs its commands as another user")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledNodeHelper$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), "PADDOCK_KILLED_NODE="+c.base, "PADDOCK_KILLED_NODE_DSN="+c.dsn, "PADDOCK_KILLED_NODE_REPO="+c.repo)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	var lines []string
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "RUN %s %d", &runID, &harness); err == nil {
			break
		}
		lines = append(lines, sc.Text())
	}
	if harness == 0 {
		cmd.Wait()
		t.Fatalf("node na made no run and harness:\n%s\n%s", strings.Join(lines, "\n"), stderr.String())
	}
	t.Cleanup(func() {
		syscall.Kill(harness, syscall.SIGKILL)
		waitGone(harness, 5*time.Second)
		sandbox.SweepCgroupsOf(filepath.Join(c.state("na"), "harness"))
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	return runID, harness
}

// alive says whether process pid is running (a zombie is not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

func waitGone(pid int, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if !alive(pid) {
			return true
		}
	}
	return !alive(pid)
}

// loseNode waits until node id's lease ran out and marks it lost, as
// another node's reaper does.
func loseNode(t *testing.T, s *postgres.Store, id string) {
	t.Helper()
	for end := time.Now().Add(4 * reapLease); time.Now().Before(end); time.Sleep(reapLease / 4) {
		lost, err := s.Reap(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lost {
			if l.Node.ID == id {
				return
			}
		}
	}
	t.Fatalf("node %s was not marked lost", id)
}

// TestRestartReapsHarnessOfRunAdoptedAway: node na is killed with -9
// while its run's harness runs; nb marks it lost and adopts the run; na
// starts again. The run is nb's now: na's harness of it must be stopped.
func TestRestartReapsHarnessOfRunAdoptedAway(t *testing.T) {
	c := newReapCluster(t)
	ctx := context.Background()
	id, harness := c.killedNode(t)
	b, sb := c.node(t, "nb", false)
	loseNode(t, sb, "na")
	if _, err := b.Nodes.Adopt(ctx, id, "test"); err != nil {
		t.Fatal(err)
	}
	a, _ := c.node(t, "na", true)
	if _, err := a.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if !waitGone(harness, 10*time.Second) {
		t.Fatalf("node na started again and left running the harness (pid %d) of run %s, adopted by nb", harness, id)
	}
}

// TestCloseStopsHarnessLeftByKilledNode: node na is killed with -9 while
// its run's harness runs and starts again before any node adopts the run;
// nothing runs in the run afterwards, and na stops cleanly. A clean stop
// gives every harness back: the one its killed self left too.
func TestCloseStopsHarnessLeftByKilledNode(t *testing.T) {
	c := newReapCluster(t)
	ctx := context.Background()
	id, harness := c.killedNode(t)
	a, _ := c.node(t, "na", true)
	if _, err := a.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if !alive(harness) {
		t.Fatalf("node na started again and stopped the harness of run %s, which it still holds", id)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !waitGone(harness, 10*time.Second) {
		t.Fatalf("node na stopped cleanly and left running the harness (pid %d) of its run %s", harness, id)
	}
}
