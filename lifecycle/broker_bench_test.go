package lifecycle_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
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
func BenchmarkExec(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b)
	p := e.project(b)
	withSandbox(b, e)
	r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: p.Name, Kind: "overlay"})
	if err != nil {
		b.Fatal(err)
	}
	agent := paddock.WithAgent(ctx)
	argv := []string{"true"}
	if _, err := e.m.Broker.Exec(agent, r.ID, paddock.ExecRequest{Argv: argv}); err != nil {
		b.Fatal(err) // the harness is set up once, by the first
	}
	harness, err := lifecycle.HarnessExec(ctx, e.m, r.ID)
	if err != nil {
		b.Fatal(err)
	}
	var bare, through time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := harness(argv); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := e.m.Broker.Exec(agent, r.ID, paddock.ExecRequest{Argv: argv}); err != nil {
			b.Fatal(err)
		}
		bare, through = bare+t1.Sub(t0), through+time.Since(t1)
	}
	b.ReportMetric(float64(bare.Microseconds())/float64(b.N), "µs-harness/op")
	b.ReportMetric(float64(through.Microseconds())/float64(b.N), "µs-through/op")
	b.ReportMetric(float64(through-bare)/float64(b.N)/1e3, "µs-added/op")
}
