package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/postgres/pgtest"
)

// TestAutoAdoptionInUseFirst (issue #35): a node with node_adopt = auto
// adopted a lost node's runs one at a time, about a second each, oldest
// made first: a run an agent was using waited behind every idle run
// made before it. A lost node holds 12 runs of three kinds, each with a
// file of its own; the three made last are in use (written to just
// before the loss), the rest idle. The auto-adopting node adopts the
// three in use first (among its first takes, several going at once),
// several at once (at most adoptParallel), each run once, and every
// run's files are intact. The wall time is printed beside that of the
// same adoptions one at a time (measured first, on another node, with
// paddock adopt).
func TestAutoAdoptionInUseFirst(t *testing.T) {
	base := t.TempDir()
	url := pgtest.Need(t).URL(t, base)
	repo := newRepo(t, filepath.Join(base, "src", "app"), 30)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := func(id string, extra ...string) *node {
		n := &node{id: id, home: filepath.Join(base, id)}
		n.d = startDaemon(t, n.home, append([]string{"--store", url, "--node-id", id, "--node-lease", "2s", "--node-capacity", "32"}, extra...)...)
		n.c = client.Unix(filepath.Join(n.home, "paddock.sock"))
		return n
	}
	a := start("a")
	cli(t, a.home, "project", "add", repo).must(t)
	const total, hot = 12, 3
	var ids []string
	for i := range total {
		kind := []string{"overlay", "worktree", "clone"}[i%3]
		id := strings.TrimSpace(cli(t, a.home, "create", "-p", "app", "--kind", kind).must(t).out)
		cli(t, a.home, "exec", id, "--", "sh", "-c", fmt.Sprintf("echo run %d > own.txt && echo changed %d > README.md", i, i)).must(t)
		ids = append(ids, id)
	}
	hotIDs := ids[total-hot:] // made last: oldest first, they came last
	waitCheckpoints(ctx, t, a.c, ids)

	// The baseline: another node adopts them one at a time.
	a.d.kill9()
	killHarnesses(a.home)
	b := start("b")
	waitLost(ctx, t, b.home, "a")
	t0 := time.Now()
	for _, id := range ids {
		cli(t, b.home, "adopt", id).must(t)
	}
	serial := time.Since(t0)
	bSpan := adoptionSpan(ctx, t, b.c, ids, "b")
	// In use on b: the three made last are written to.
	for _, id := range hotIDs {
		cli(t, b.home, "exec", id, "--", "sh", "-c", "echo in use > hot.txt").must(t)
	}
	waitCheckpoints(ctx, t, b.c, ids)

	// b is lost; c adopts by itself.
	b.d.kill9()
	killHarnesses(b.home)
	c := start("c", "--node-adopt", "auto")
	// Watched in c's log, not through its API: calls while it adopts
	// would slow down what is measured.
	for i := 0; ; i++ {
		logb, _ := os.ReadFile(filepath.Join(c.home, "test-daemon.log"))
		if n := strings.Count(string(logb), `msg="adopted a lost node's run"`); n >= total {
			break
		} else if i > 600 {
			t.Fatalf("c adopted %d of %d runs:\n%s", n, total, logb)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cSpan := adoptionSpan(ctx, t, c.c, ids, "c")
	t.Logf("adopting %d runs: one at a time (paddock adopt, node b) %s (first take to last end %s); node_adopt = auto (node c) %s, at most %d at once",
		total, serial.Round(time.Millisecond), bSpan.d.Round(time.Millisecond), cSpan.d.Round(time.Millisecond), cSpan.most)
	t.Logf("node b's takes (start:duration): %v", bSpan.each)
	t.Logf("node c's takes (start:duration): %v", cSpan.each)
	t.Logf("node c's takes, in order: %v (in use: %v)", cSpan.order, hotIDs)
	for _, id := range hotIDs {
		if pos := slices.Index(cSpan.order, id); pos < 0 || pos >= hot+adoptParallel-1 {
			t.Errorf("run %s, in use, was taken %d-th of %d", id, pos+1, total)
		}
	}
	// Wall times on a shared machine of two cores vary too much to
	// assert on (printed above); what makes the adoption faster is that
	// several go on at once, within the bound.
	if cSpan.most < 2 || cSpan.most > adoptParallel {
		t.Errorf("node c had at most %d adoptions under way at once, want 2 to %d", cSpan.most, adoptParallel)
	}
	for i, id := range ids {
		want := map[string]string{"own.txt": fmt.Sprintf("run %d\n", i), "README.md": fmt.Sprintf("changed %d\n", i)}
		if slices.Contains(hotIDs, id) {
			want["hot.txt"] = "in use\n"
		}
		for f, content := range want {
			if out := cli(t, c.home, "exec", id, "--", "cat", f).must(t).out; out != content {
				t.Errorf("run %s: %s is %q, want %q", id, f, out, content)
			}
		}
	}
}

// span is a node's adoption of runs: its takes in order, and the time
// from its first take to the end of its last adoption.
type span struct {
	order []string
	each  []string // each run's take, from the first take, and how long it took
	d     time.Duration
	most  int // the most adoptions under way at once
}

// adoptionSpan reads, from the runs' events, node's adoption of them:
// each run is adopted by it once.
func adoptionSpan(ctx context.Context, t *testing.T, c *client.Client, ids []string, node string) span {
	t.Helper()
	type take struct {
		id       string
		at, done time.Time
	}
	var takes []take
	for _, id := range ids {
		evs, err := c.Events(ctx, id, 0, 10000)
		if err != nil {
			t.Fatal(err)
		}
		var tk *take
		for _, e := range evs {
			switch e.Type {
			case paddock.EventAdopted:
				var d struct {
					To string `json:"to_node"`
				}
				json.Unmarshal(e.Data, &d)
				if d.To != node {
					continue
				}
				if tk != nil {
					t.Errorf("run %s adopted by %s twice", id, node)
				}
				tk = &take{id: id, at: e.Time}
			case paddock.EventResumed:
				if tk != nil && tk.done.IsZero() {
					tk.done = e.Time
				}
			}
		}
		if tk == nil || tk.done.IsZero() {
			t.Fatalf("run %s: no adoption by %s that ended", id, node)
		}
		takes = append(takes, *tk)
	}
	slices.SortFunc(takes, func(x, y take) int { return x.at.Compare(y.at) })
	var s span
	last := takes[0].done
	for _, tk := range takes {
		s.order = append(s.order, tk.id)
		s.each = append(s.each, fmt.Sprintf("+%s:%s", tk.at.Sub(takes[0].at).Round(time.Millisecond), tk.done.Sub(tk.at).Round(time.Millisecond)))
		if tk.done.After(last) {
			last = tk.done
		}
	}
	s.d = last.Sub(takes[0].at)
	for _, x := range takes {
		at := 0
		for _, y := range takes {
			if !y.at.After(x.at) && y.done.After(x.at) {
				at++
			}
		}
		s.most = max(s.most, at)
	}
	return s
}

// waitCheckpoints waits until each run's checkpoint in the shared store
// holds its last changes: its last event is run.checkpoint_stored.
func waitCheckpoints(ctx context.Context, t *testing.T, c *client.Client, ids []string) {
	t.Helper()
	for _, id := range ids {
		for i := 0; ; i++ {
			evs, _ := c.Events(ctx, id, 0, 10000)
			if n := len(evs); n > 0 && evs[n-1].Type == paddock.EventClusterCheckpoint {
				break
			}
			if i > 300 {
				t.Fatalf("run %s: no checkpoint stored", id)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// waitLost waits until the node of home sees node id lost.
func waitLost(ctx context.Context, t *testing.T, home, id string) {
	t.Helper()
	for i := 0; ; i++ {
		for _, n := range decode[[]paddock.Node](t, cli(t, home, "nodes", "--json")) {
			if n.ID == id && n.State == paddock.NodeLost {
				return
			}
		}
		if i > 300 || ctx.Err() != nil {
			t.Fatalf("node %s not marked lost", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
