package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/bench/internal/benchutil"
	"github.com/paddock-dev/paddock/internal/netlab"
	"github.com/paddock-dev/paddock/internal/testenv"
)

// TestSoakBriefly runs the soak for real, briefly, so that it cannot rot:
// three nodes and PostgreSQL in the lab, 10 runs over 40 s under three
// faults drawn from a fixed seed, and every check. It fails when a check
// fails, when a fault was not played, or when the soak did not run all
// its checks. It needs what the lab needs (root, ip, nsenter, nft,
// PostgreSQL) and skips without it.
func TestSoakBriefly(t *testing.T) {
	if testing.Short() {
		t.Skip("a 40 s soak")
	}
	// A lab made and closed at once: whether this machine can make one.
	probe, err := netlab.New()
	if errors.Is(err, netlab.ErrUnavailable) {
		testenv.Need(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := probe.Close(); err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv("PADDOCK_BENCH_BINARY")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "paddock")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/paddock-dev/paddock/cmd/paddockd").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	if err := benchutil.Subreaper(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	err = run(ctx, config{Duration: 40 * time.Second, Seed: 1, Runs: 10, Clients: 4, Lease: 2 * time.Second, Bin: bin}, &out)
	t.Logf("the soak took %s:\n%s", time.Since(start).Round(time.Second), out.String())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "not played") {
		t.Fatal("a fault of the schedule was not played")
	}
	if n := strings.Count(out.String(), "\n  PASS  "); n != 6 {
		t.Fatalf("%d checks passed, want 6", n)
	}
}
