package lifecycle_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/httpapi"
	"github.com/paddock-dev/paddock/lifecycle"
)

// BenchmarkBroker: a read through the broker (decision, redaction, the
// event) beside the same read without it, in one run; the difference is
// what the broker adds per call (docs/PERFORMANCE.md).
func BenchmarkBroker(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b)
	r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: e.project(b).Name, Kind: "clone"})
	if err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"path":"README.md"}`)
	// Interleaved, so that the machine's noise (the store's fsyncs above
	// all) falls on both sides alike.
	var without, through time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := lifecycle.CallToolUnbrokered(ctx, e.m, r.ID, "read", args); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := e.m.Broker.CallTool(ctx, r.ID, "read", args); err != nil {
			b.Fatal(err)
		}
		without, through = without+t1.Sub(t0), through+time.Since(t1)
	}
	b.ReportMetric(float64(without.Microseconds())/float64(b.N), "µs-without/op")
	b.ReportMetric(float64(through.Microseconds())/float64(b.N), "µs-through/op")
	b.ReportMetric(float64(through-without)/float64(b.N)/1e3, "µs-added/op")
}

// BenchmarkExec: an exec of /bin/true through the broker (the decision,
// the command's limits and cgroup, its durable event) beside the same
// command handed to the run's harness alone, interleaved; the difference
// is what paddock adds per command beside the API's own HTTP.
// PADDOCK_BENCH_KIND sets the run's kind (overlay), PADDOCK_BENCH_FILES
// adds as many files to the repository (a command's effects are looked
// for after it: a clone's in the whole tree, and the next command waits).
func BenchmarkExec(b *testing.B) {
	ctx := context.Background()
	e, r := benchRun(b)
	agent := paddock.WithAgent(ctx)
	againstHarness(b, e, r.ID, func() error {
		_, err := e.m.Broker.Exec(agent, r.ID, paddock.ExecRequest{Argv: []string{"true"}})
		return err
	})
}

// benchRun makes a run for BenchmarkExec and BenchmarkWrite: of
// PADDOCK_BENCH_KIND (overlay), on a repository with PADDOCK_BENCH_FILES
// files more.
func benchRun(b *testing.B) (*env, *paddock.Run) {
	e := newEnv(b)
	if n, _ := strconv.Atoi(os.Getenv("PADDOCK_BENCH_FILES")); n > 0 {
		files := map[string]string{}
		for i := range n {
			files[fmt.Sprintf("mod%02d/pkg%02d/file%05d.go", i/400, (i/20)%20, i)] = fmt.Sprintf("package p // %d\n", i)
		}
		gittest.Commit(b, e.repo, "many files", files)
	}
	p := e.project(b)
	withSandbox(b, e)
	r, err := e.m.Runs.Create(context.Background(), paddock.CreateRunRequest{Project: p.Name, Kind: cmp.Or(os.Getenv("PADDOCK_BENCH_KIND"), "overlay")})
	if err != nil {
		b.Fatal(err)
	}
	return e, r
}

// BenchmarkWrite: write tool calls one after the other on one run, each
// of which the next waits for the look at what it changed (blame's
// journal): PADDOCK_BENCH_KIND and PADDOCK_BENCH_FILES as BenchmarkExec.
func BenchmarkWrite(b *testing.B) {
	benchWrites(b, func(int) string { return "notes.txt" })
}

// BenchmarkWriteNewFiles is BenchmarkWrite with each write a file of
// its own, as an agent writing a tree: the look after each reads only the
// file written, whatever the run wrote before.
func BenchmarkWriteNewFiles(b *testing.B) {
	benchWrites(b, func(i int) string { return fmt.Sprintf("notes/%d/%d.txt", i%50, i) })
}

// benchWrites makes write tool calls one after the other on one run, the
// i-th to path(i).
func benchWrites(b *testing.B, path func(i int) string) {
	ctx := context.Background()
	e, r := benchRun(b)
	agent := paddock.WithAgent(ctx)
	i := 0
	for b.Loop() {
		i++
		args, _ := json.Marshal(map[string]string{"path": path(i), "content": fmt.Sprintf("version %d\n", i)})
		if _, err := e.m.Broker.CallTool(agent, r.ID, "write", args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreate: an overlay run created at a snapshotted base (its
// records and events, its workspace mounted) beside the set-up of a run's
// harness (the resident sandbox: its namespaces, mounts, Landlock rules and
// cgroup), interleaved. The harness's set-up is what a command on a new
// harness takes beyond a command on a running one. (#35: create within 2×
// of the harness's own set-up.)
func BenchmarkCreate(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b)
	p := e.project(b)
	withSandbox(b, e)
	r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: p.Name, Kind: "overlay"})
	if err != nil {
		b.Fatal(err) // the base's snapshot is built once, by the first
	}
	argv := []string{"true"}
	if _, err := e.m.Broker.Exec(paddock.WithAgent(ctx), r.ID, paddock.ExecRequest{Argv: argv}); err != nil {
		b.Fatal(err)
	}
	harness, err := lifecycle.HarnessExec(ctx, e.m, r.ID)
	if err != nil {
		b.Fatal(err)
	}
	var fresh, running, create time.Duration
	for b.Loop() {
		lifecycle.ReleaseHarness(e.m, r.ID)
		t0 := time.Now()
		if err := harness(argv); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := harness(argv); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		c, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: p.Name, Kind: "overlay"})
		if err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		if _, err := e.m.Runs.Remove(ctx, c.ID); err != nil {
			b.Fatal(err)
		}
		fresh, running, create = fresh+t1.Sub(t0), running+t2.Sub(t1), create+t3.Sub(t2)
	}
	setup := fresh - running
	b.ReportMetric(float64(setup.Microseconds())/float64(b.N), "µs-harness-setup/op")
	b.ReportMetric(float64(create.Microseconds())/float64(b.N), "µs-create/op")
	b.ReportMetric(float64(create)/float64(setup), "create/setup")
}

// BenchmarkChangeSet: the change set of an overlay run with 1,000 of a
// 12,000-file repository's files edited (PADDOCK_BENCH_CHANGES sets
// another number, up to 12,000; PADDOCK_BENCH_KIND=clone a clone run), beside git status --porcelain + git diff
// on the same edits in a clone of it, interleaved (#35: a change set costs
// at most what git's own answer does).
func BenchmarkChangeSet(b *testing.B) {
	ctx := context.Background()
	edits := 1000
	if s := os.Getenv("PADDOCK_BENCH_CHANGES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 12000 {
			b.Fatalf("PADDOCK_BENCH_CHANGES=%q: want a number of files from 1 to 12000", s)
		}
		edits = n
	}
	e := newEnv(b)
	// The files of bench/core: 64 bytes to 4 KiB of letters on one line.
	rng := rand.New(rand.NewPCG(1, 2))
	files := map[string]string{}
	for i := range 12000 {
		body := make([]byte, 64+rng.IntN(4096))
		for j := range body {
			body[j] = byte('a' + rng.IntN(26))
		}
		files[fmt.Sprintf("mod%02d/pkg%02d/file%05d.go", i/400, (i/20)%20, i)] = string(body)
	}
	gittest.Commit(b, e.repo, "many files", files)
	p := e.project(b)
	withSandbox(b, e)
	kind := cmp.Or(os.Getenv("PADDOCK_BENCH_KIND"), "overlay")
	r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: p.Name, Kind: kind})
	if err != nil {
		b.Fatal(err)
	}
	peer := filepath.Join(b.TempDir(), "peer")
	if out, err := exec.Command("git", "clone", "--quiet", "--shared", e.repo, peer).CombinedOutput(); err != nil {
		b.Fatalf("git clone: %v %s", err, out)
	}
	var script strings.Builder
	step := 12000 / edits
	for k := range edits {
		i := k * step
		rel := fmt.Sprintf("mod%02d/pkg%02d/file%05d.go", i/400, (i/20)%20, i)
		fmt.Fprintf(&script, "printf '\\n// edited %d\\n' >> %s\n", k, rel)
		f, err := os.OpenFile(filepath.Join(peer, rel), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(f, "\n// edited %d\n", k)
		f.Close()
		if k%500 == 499 || k == edits-1 {
			if res, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", script.String()}}); err != nil || res.ExitCode != 0 {
				b.Fatalf("editing the run: %v %+v", err, res)
			}
			script.Reset()
		}
	}
	var ours, git time.Duration
	for b.Loop() {
		t0 := time.Now()
		cs, err := e.m.Changes.ChangeSet(ctx, r.ID)
		if err != nil || len(cs.Entries) != edits {
			b.Fatalf("change set: %v", err)
		}
		t1 := time.Now()
		for _, args := range [][]string{{"status", "--porcelain"}, {"diff"}} {
			cmd := exec.Command("git", args...)
			cmd.Dir = peer
			if out, err := cmd.Output(); err != nil || len(out) == 0 {
				b.Fatalf("git %s: %v", args[0], err)
			}
		}
		ours, git = ours+t1.Sub(t0), git+time.Since(t1)
	}
	b.ReportMetric(float64(ours.Microseconds())/float64(b.N)/1e3, "ms-paddock/op")
	b.ReportMetric(float64(git.Microseconds())/float64(b.N)/1e3, "ms-git/op")
	b.ReportMetric(float64(ours)/float64(git), "paddock/git")
}

// BenchmarkExecAPI: an exec of true through the HTTP API (the Go client on
// a unix socket, the API's handler, its idempotency key, the broker)
// beside the harness's own exec of it, on the same run, interleaved. #35
// asks that the API add at most 1 ms (µs-added/op).
func BenchmarkExecAPI(b *testing.B) {
	ctx := context.Background()
	e, r := benchRun(b)
	// Calls, as the daemon has: the client sends every exec with an
	// idempotency key, claimed in the store before the command runs.
	api := &httpapi.Server{Projects: e.m.Projects, Runs: e.m.Runs, Jobs: e.m.Jobs, Broker: e.m.Broker, Changes: e.m.Changes, Provenance: e.m.Provenance, Calls: e.m.Calls}
	sock := filepath.Join(b.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: api.Handler()}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	c := client.Unix(sock)
	againstHarness(b, e, r.ID, func() error {
		res, err := c.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"true"}})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("true exited %d", res.ExitCode)
		}
		return err
	})
}

// againstHarness times exec, an exec of true on run id (the first of
// which sets the run's harness up), beside the harness's own exec of it,
// alternating: a call made right after another pays for the look at what
// the other changed, which runs once its answer is given, so each side
// follows the other. It reports both and what exec adds.
func againstHarness(b *testing.B, e *env, id string, exec func() error) {
	if err := exec(); err != nil {
		b.Fatal(err)
	}
	harness, err := lifecycle.HarnessExec(context.Background(), e.m, id)
	if err != nil {
		b.Fatal(err)
	}
	var bare, through time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := harness([]string{"true"}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := exec(); err != nil {
			b.Fatal(err)
		}
		bare, through = bare+t1.Sub(t0), through+time.Since(t1)
	}
	b.ReportMetric(float64(bare.Microseconds())/float64(b.N), "µs-harness/op")
	b.ReportMetric(float64(through.Microseconds())/float64(b.N), "µs-through/op")
	b.ReportMetric(float64(through-bare)/float64(b.N)/1e3, "µs-added/op")
}
