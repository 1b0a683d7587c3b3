// Command protocol is the load test of the action protocol on loopback:
// concurrent clients each bootstrap a run and make tool calls and confined
// execs with the run's own token. Afterwards every run's events must be
// complete, in order, gap-free and without duplicates. It reports p50/p99
// latencies and events per second.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
)

func main() {
	quick := flag.Bool("quick", false, "small workload for a CI smoke run")
	clients := flag.Int("clients", 200, "concurrent clients, one run each")
	tools := flag.Int("tools", 500, "tool calls per client")
	execs := flag.Int("execs", 50, "confined execs per client")
	flag.Parse()
	if *quick {
		*clients, *tools, *execs = 8, 20, 2
	}
	if err := run(*clients, *tools, *execs); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(clients, ntools, nexecs int) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "paddock-bench-protocol-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	repo := filepath.Join(tmp, "repo")
	os.MkdirAll(repo, 0o755)
	os.WriteFile(filepath.Join(repo, "page.txt"), []byte("a page of text\n"), 0o644)
	if _, err := benchutil.Git("", "init", "-q", repo); err != nil {
		return err
	}
	benchutil.Git(repo, "add", "-A")
	if _, err := benchutil.Git(repo, "commit", "-qm", "x"); err != nil {
		return err
	}
	os.Chmod(tmp, 0o755)
	d, err := benchutil.StartDaemon(ctx, tmp)
	if err != nil {
		return err
	}
	defer d.Stop()
	if _, err := d.Client.AddProject(ctx, paddock.AddProjectRequest{Path: repo, Name: "load"}); err != nil {
		return err
	}
	benchutil.Step("%d clients: bootstrap, %d tool calls and %d execs each", clients, ntools, nexecs)
	var mu sync.Mutex
	var toolLat, execLat []time.Duration
	runs := make([]string, clients)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := d.Client.Bootstrap(ctx, paddock.BootstrapRequest{Project: "load", Task: "load", Agent: paddock.AgentDefinition{Name: "load"}})
			if err != nil {
				errs <- err
				return
			}
			runs[c] = b.Run.ID
			agent := d.Client.WithToken(b.Token)
			var tl, el []time.Duration
			for i := 0; i < ntools; i++ {
				t0 := time.Now()
				var err error
				if i%2 == 0 {
					_, err = agent.CallTool(ctx, b.Run.ID, "read", map[string]string{"path": "page.txt"})
				} else {
					_, err = agent.CallTool(ctx, b.Run.ID, "write", map[string]string{"path": fmt.Sprintf("out/%d.txt", i), "content": "x"})
				}
				if err != nil {
					errs <- err
					return
				}
				tl = append(tl, time.Since(t0))
			}
			for i := 0; i < nexecs; i++ {
				t0 := time.Now()
				if _, err := agent.Exec(ctx, b.Run.ID, paddock.ExecRequest{Argv: []string{"true"}}); err != nil {
					errs <- err
					return
				}
				el = append(el, time.Since(t0))
			}
			mu.Lock()
			toolLat, execLat = append(toolLat, tl...), append(execLat, el...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	benchutil.Step("checking every run's events")
	total, err := checkEvents(ctx, d, runs, ntools, nexecs)
	if err != nil {
		return err
	}
	fmt.Printf("\n%s\n\n| figure | paddock | peer | ratio |\n|---|---|---|---|\n", benchutil.Machine(tmp))
	fmt.Printf("| load: %d clients × (%d tool calls + %d execs), one-file repository, every run's events complete and gap-free | %d events in %s, %.0f events/s | – | – |\n",
		clients, ntools, nexecs, total, benchutil.Round(elapsed), float64(total)/elapsed.Seconds())
	fmt.Printf("| tool call latency under that load | p50 %s, p99 %s | – | – |\n",
		benchutil.Round(benchutil.Percentile(toolLat, 50)), benchutil.Round(benchutil.Percentile(toolLat, 99)))
	if len(execLat) > 0 {
		fmt.Printf("| exec latency under that load | p50 %s, p99 %s | – | – |\n",
			benchutil.Round(benchutil.Percentile(execLat, 50)), benchutil.Round(benchutil.Percentile(execLat, 99)))
	}
	return printStages(ctx, d)
}

// checkEvents checks that every run's events are complete, in order,
// gap-free and without duplicates, and says how many there are.
func checkEvents(ctx context.Context, d *benchutil.Daemon, runs []string, ntools, nexecs int) (int, error) {
	total := 0
	for _, id := range runs {
		evs, err := d.Client.Events(ctx, id, 0, 1<<30)
		if err != nil {
			return 0, err
		}
		tools, execs := 0, 0
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				return 0, fmt.Errorf("run %s: event %d has seq %d", id, i, e.Seq)
			}
			switch e.Type {
			case "tool.call":
				tools++
			case "exec":
				execs++
			}
		}
		if tools != ntools || execs != nexecs {
			return 0, fmt.Errorf("run %s: %d tool calls and %d execs recorded, want %d and %d", id, tools, execs, ntools, nexecs)
		}
		total += len(evs)
	}
	return total, nil
}

// printStages prints where the calls' time went, stage by stage, in the
// daemon: its own histograms, so the client's share is what the
// latencies above hold beyond these.
func printStages(ctx context.Context, d *benchutil.Daemon) error {
	fams, err := d.Metrics(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("\nIn the daemon, stage by stage (paddock_tool_call_stage_duration_seconds):\n\n%s\n%s\n%s",
		benchutil.StageTable(fams, paddock.ToolExec), benchutil.StageTable(fams, "write"), benchutil.StageTable(fams, "read"))
	return nil
}
