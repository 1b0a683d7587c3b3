package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
)

// TestStopsWithStreamsOpen: a daemon asked to stop (SIGTERM) while
// clients hold streams open (a run's event stream, the operator's notice
// stream, an events request held for what comes) ends them and stops at
// once, and its active run is checkpointed. A graceful shutdown waits for
// every handler, and a stream never returns by itself: one open stream
// held the stop for its whole 15 s budget, and the checkpoints then found
// their context ended ("checkpoint at shutdown failed").
func TestStopsWithStreamsOpen(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	d := startDaemon(t, home)
	c := client.Unix(filepath.Join(home, "paddock.sock"))
	ctx := context.Background()
	if _, err := c.AddProject(ctx, paddock.AddProjectRequest{Path: repo}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Create(ctx, paddock.CreateRunRequest{Project: "app", Kind: "clone"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ForAgent().CallTool(ctx, r.ID, "write", map[string]string{"path": "w.txt", "content": "x\n"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Run(ctx, r.ID); got.State() != paddock.StateActive {
		t.Fatalf("the run is %s, want active", got.State())
	}
	ended := make(chan string, 3)
	streams, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		c.Follow(streams, r.ID, 0, func(*paddock.Event) error { return nil })
		ended <- "events"
	}()
	go func() {
		c.FollowNotices(streams, 0, nil, func(*paddock.Notice) error { return nil })
		ended <- "notices"
	}()
	go func() {
		c.WaitEvents(streams, r.ID, 1<<40, 0) // nothing comes: held
		ended <- "held"
	}()
	time.Sleep(500 * time.Millisecond) // the three are open
	start := time.Now()
	d.stop()
	took := time.Since(start)
	logb, _ := os.ReadFile(filepath.Join(home, "test-daemon.log"))
	if took > 5*time.Second || strings.Contains(string(logb), "checkpoint at shutdown failed") {
		t.Fatalf("the daemon took %s to stop with streams open:\n%s", took.Round(time.Millisecond), tail(string(logb), 20))
	}
	// The run was checkpointed by the stop: the next daemon finds it so.
	startDaemon(t, home)
	if got, err := c.Run(ctx, r.ID); err != nil || got.State() != paddock.StateCheckpointed {
		t.Fatalf("after the stop the run is %v (%v), want checkpointed", got.State(), err)
	}
	t.Logf("stopped in %s with three streams open", took.Round(time.Millisecond))
}
