package benchutil

import (
	"math"
	"os/exec"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestLeftovers: a process whose parent ends without it becomes the
// subreaper's child, and Leftovers finds it, kills it and names it; a
// child that ends is reaped and not named.
func TestLeftovers(t *testing.T) {
	if err := Subreaper(); err != nil {
		t.Fatal(err)
	}
	if left := Leftovers(time.Second); len(left) != 0 {
		t.Fatalf("children before the test: %v", left)
	}
	// sh starts sleep in the background and exits: sleep is an orphan.
	if err := exec.Command("sh", "-c", "sleep 300 >/dev/null 2>&1 &").Run(); err != nil {
		t.Fatal(err)
	}
	// And one that ends on its own, orphaned too: reaped, not named.
	if err := exec.Command("sh", "-c", "sleep 0.2 >/dev/null 2>&1 &").Run(); err != nil {
		t.Fatal(err)
	}
	left := Leftovers(time.Second)
	if len(left) != 1 || !strings.Contains(left[0], "sleep 300") {
		t.Fatalf("left behind: %v, want the sleep 300 alone", left)
	}
	if again := Leftovers(0); len(again) != 0 {
		t.Fatalf("after the kill: %v", again)
	}
}

// TestQuantile: a histogram's quantile is estimated as Prometheus's
// histogram_quantile does, within its bucket, by the bucket's bounds.
func TestQuantile(t *testing.T) {
	bucket := func(le float64, n uint64) *dto.Bucket { return &dto.Bucket{UpperBound: &le, CumulativeCount: &n} }
	n := uint64(100)
	h := &dto.Histogram{SampleCount: &n, Bucket: []*dto.Bucket{bucket(0.01, 90), bucket(0.001, 10), bucket(math.Inf(1), 100)}}
	for _, c := range []struct{ q, want float64 }{
		{0.05, 0.0005}, // in the first bucket, from 0
		{0.5, 0.0055},  // 40 of the 80 in (0.001, 0.01]
		{0.9, 0.01},
		{0.99, 0.01}, // above the last bound: that bound
	} {
		if got := quantile(h, c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("quantile %v = %v, want %v", c.q, got, c.want)
		}
	}
	// In the first bucket, the table says only that it is under its bound.
	if got := estimate(h, 0.05); got != "≤ 1.00 ms" {
		t.Errorf("estimate in the first bucket = %q", got)
	}
	if got := estimate(h, 0.5); got != "5.50 ms" {
		t.Errorf("estimate = %q", got)
	}
}
