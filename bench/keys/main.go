// Command keys measures what an idempotency key costs a call: tool calls
// (a write and a read, each a durable event) through the daemon's API,
// with a key (what the client library sends on every write) and without,
// interleaved in one run on one daemon (embedded SQLite). It prints p50
// and p99 of each and their ratios; nothing is asserted.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
)

func main() {
	calls := flag.Int("calls", 2000, "calls of each kind")
	flag.Parse()
	if err := run(*calls); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(n int) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "paddock-bench-keys-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	d, err := benchutil.StartDaemon(ctx, tmp)
	if err != nil {
		return err
	}
	defer d.Stop()
	repo := filepath.Join(tmp, "repo")
	if err := benchutil.Repo(repo, map[string]string{"page.txt": "page\n"}); err != nil {
		return err
	}
	if _, err := d.Client.AddProject(ctx, paddock.AddProjectRequest{Path: repo, Name: "bench"}); err != nil {
		return err
	}
	r, err := d.Client.Create(ctx, paddock.CreateRunRequest{Project: "bench"})
	if err != nil {
		return err
	}
	sock := filepath.Join(d.Home, "paddock.sock")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	call := func(tool, body string, keyed bool) (time.Duration, error) {
		req, _ := http.NewRequest(http.MethodPost, "http://paddock/v1/runs/"+r.ID+"/tools/"+tool, bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		if keyed {
			req.Header.Set(paddock.IdempotencyHeader, rand.Text())
		}
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("%s: %d %s", tool, resp.StatusCode, b)
		}
		return time.Since(t0), nil
	}
	type kind struct {
		name, tool, body string
		keyed            bool
		lat              []time.Duration
	}
	kinds := []*kind{
		{name: "write, no key", tool: "write", body: `{"path":"out.txt","content":"x"}`},
		{name: "write, key", tool: "write", body: `{"path":"out.txt","content":"x"}`, keyed: true},
		{name: "read, no key", tool: "read", body: `{"path":"page.txt"}`},
		{name: "read, key", tool: "read", body: `{"path":"page.txt"}`, keyed: true},
	}
	benchutil.Step("%d calls of each kind, interleaved", n)
	for i := 0; i < n; i++ {
		for _, k := range kinds {
			d, err := call(k.tool, k.body, k.keyed)
			if err != nil {
				return err
			}
			k.lat = append(k.lat, d)
		}
	}
	fmt.Println("| call | p50 | p99 | keyed ÷ unkeyed (p50, p99) |")
	fmt.Println("|---|---|---|---|")
	for i, k := range kinds {
		ratio := "–"
		if k.keyed {
			base := kinds[i-1]
			ratio = fmt.Sprintf("%.2f×, %.2f×", ratioOf(k.lat, base.lat, 50), ratioOf(k.lat, base.lat, 99))
		}
		fmt.Printf("| %s | %s | %s | %s |\n", k.name, benchutil.Round(benchutil.Percentile(k.lat, 50)), benchutil.Round(benchutil.Percentile(k.lat, 99)), ratio)
	}
	return nil
}

func ratioOf(ours, base []time.Duration, p float64) float64 {
	return float64(benchutil.Percentile(ours, p)) / float64(benchutil.Percentile(base, p))
}
