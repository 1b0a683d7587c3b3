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
