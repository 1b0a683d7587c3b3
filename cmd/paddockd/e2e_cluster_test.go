package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/postgres/pgtest"
)

// node is one daemon of the cluster the test makes.
type node struct {
	id   string
	home string
	d    *daemon
	c    *client.Client
}

func startNode(t *testing.T, base, id, url string) *node {
	t.Helper()
	home := filepath.Join(base, id)
	d := startDaemon(t, home, "--store", url, "--node-id", id, "--node-lease", "2s", "--node-capacity", "2")
	return &node{id: id, home: home, d: d, c: client.Unix(filepath.Join(home, "paddock.sock"))}
}

// TestClusterOfThree: three daemons on one PostgreSQL database act as one
// paddock. Runs made through each are placed by room and warm snapshots;
// a call for a run through a node that does not hold it is forwarded; an
// event stream on one node sees another node's events at once (LISTEN/
// NOTIFY, not its 15 s keep-alive). One node is killed with kill -9 in
// the middle of a job: the others mark it lost, its runs say node_lost,
// its job is interrupted and holds no lease; the run is adopted on another
// node from its checkpoint and its job runs again there to its end; the
// stream saw every event once, in order. A node paused past its lease is
// marked lost; when it runs again its writes are refused and it stops.
func TestClusterOfThree(t *testing.T) {
	base := t.TempDir()
	url := pgtest.Need(t).URL(t, base)
	repo := newRepo(t, filepath.Join(base, "src", "app"), 5)
	ns := []*node{startNode(t, base, "n1", url), startNode(t, base, "n2", url), startNode(t, base, "n3", url)}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	cli(t, ns[0].home, "project", "add", repo).must(t)
	nodes := decode[[]paddock.Node](t, cli(t, ns[1].home, "nodes", "--json"))
	if len(nodes) != 3 {
		t.Fatalf("nodes: %+v", nodes)
	}
	// A run made through each node; each node takes two (its capacity).
	holder := map[string]*node{}
	count := map[string]int{}
	// The sixth is made with an idempotency key, as the Go client makes
	// every write: made again through another node once every node is
	// full, it is the same run, answered from the shared store before any
	// node is placed (a placement would find no capacity).
	sixth := paddock.CreateRunRequest{Project: "app", Kind: "overlay"}
	keyCtx := client.WithIdempotencyKey(ctx, "the-sixth-run")
	for i := range 6 {
		via := ns[i%3]
		var id string
		if i == 5 {
			r, err := via.c.Create(keyCtx, sixth)
			if err != nil {
				t.Fatalf("the sixth run, with a key: %v", err)
			}
			id = r.ID
		} else {
			id = strings.TrimSpace(cli(t, via.home, "create", "-p", "app", "--kind", "overlay").must(t).out)
		}
		r := runState(t, ns[(i+1)%3].home, id)
		for _, n := range ns {
			if n.id == r.Node {
				holder[id] = n
			}
		}
		if holder[id] == nil || r.NodeState != paddock.NodeAlive || r.State() != paddock.StateReady {
			t.Fatalf("run %s: node %q (%s), state %s", id, r.Node, r.NodeState, r.State())
		}
		count[r.Node]++
	}
	if count["n1"] != 2 || count["n2"] != 2 || count["n3"] != 2 {
		t.Fatalf("placement: %v", count)
	}
	if again, err := ns[0].c.Create(keyCtx, sixth); err != nil || holder[again.ID] == nil || len(holder) != 6 {
		t.Fatalf("the sixth run made again with its key through n1: %+v %v", again, err)
	}
	if runs := decode[[]paddock.Run](t, cli(t, ns[0].home, "ls", "--json")); len(runs) != 6 {
		t.Fatalf("after the sixth run was made again with its key, %d runs", len(runs))
	}
	if r := cli(t, ns[0].home, "create", "-p", "app"); r.code != exitBusy || !strings.Contains(r.err, "capacity") {
		t.Fatalf("a seventh run: %d %s", r.code, r.err)
	}
	// Each run, worked through a node that does not hold it.
	var victim, other, orphan string // runs of n1's (two), and one of n3's
	for id, h := range holder {
		via := ns[0]
		if h == ns[0] {
			via = ns[1]
		}
		if r := cli(t, via.home, "exec", id, "--", "sh", "-c", "echo "+id+" > who.txt && cat who.txt"); r.code != 0 || r.out != id+"\n" {
			t.Fatalf("forwarded exec on %s: %d %q %s", id, r.code, r.out, r.err)
		}
		switch {
		case h == ns[0] && victim == "":
			victim = id
		case h == ns[0]:
			orphan = id
		case h == ns[2] && other == "":
			other = id
		}
	}
	// An attached command (the upgraded connection), through a node that
	// does not hold the run: its stdin in, its output out.
	var attached bytes.Buffer
	via := ns[1]
	if holder[victim] == via {
		via = ns[2]
	}
	attachRes, err := via.c.ExecAttach(ctx, victim, paddock.ExecRequest{Argv: []string{"sh", "-c", "cat; echo done"}},
		paddock.ExecIO{Stdin: strings.NewReader("piped through a node\n"), Stdout: &attached, Stderr: &attached})
	if err != nil || attachRes.ExitCode != 0 || attached.String() != "piped through a node\ndone\n" {
		t.Fatalf("a forwarded attached exec: %+v %v %q", attachRes, err, attached.String())
	}
	diff := cli(t, ns[2].home, "diff", victim).must(t).out
	if !strings.Contains(diff, "+++ b/who.txt") || !strings.Contains(diff, "+"+victim) {
		t.Fatalf("diff through a third node:\n%s", diff)
	}

	// n2 follows the victim's events from the start.
	survivor := ns[1]
	var mu sync.Mutex
	var seen []*paddock.Event
	got := make(chan *paddock.Event, 1000)
	fctx, stopFollowing := context.WithCancel(ctx)
	followed := make(chan error, 1)
	go func() {
		followed <- survivor.c.Follow(fctx, victim, 0, func(e *paddock.Event) error {
			mu.Lock()
			seen = append(seen, e)
			mu.Unlock()
			got <- e
			return nil
		})
	}()
	waitEvent := func(what string, match func(*paddock.Event) bool, within time.Duration) *paddock.Event {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case e := <-got:
				if match(e) {
					return e
				}
			case <-deadline:
				t.Fatalf("n2's stream saw no %s within %s", what, within)
			}
		}
	}
	// An event n1 appends reaches n2's stream at once.
	written := time.Now()
	cli(t, ns[0].home, "tool", victim, "write", "--arg", "path=note.txt", "--arg", "content=noted").must(t)
	waitEvent("write", func(e *paddock.Event) bool {
		return e.Type == paddock.EventToolCall && strings.Contains(string(e.Data), "note.txt")
	}, 5*time.Second)
	fanout := time.Since(written)
	// The write's checkpoint is stored within seconds.
	waitEvent("the write's checkpoint", func(e *paddock.Event) bool {
		return e.Type == paddock.EventClusterCheckpoint && strings.Contains(string(e.Data), `"files changed"`)
	}, 10*time.Second)

	// A job on the victim, killed with its node in the middle.
	job, err := ns[2].c.StartJob(ctx, victim, paddock.StartJobRequest{Kind: paddock.JobExec,
		Exec: &paddock.ExecRequest{Argv: []string{"sh", "-c", "echo run >> runs.txt; sleep 4; echo done >> runs.txt"}}})
	if err != nil {
		t.Fatal(err)
	}
	// The files as the job starts are those of the write's checkpoint: it
	// is not stored again.
	waitEvent("the job's start", func(e *paddock.Event) bool { return e.Type == paddock.EventJobStarted }, 10*time.Second)
	for i := 0; ; i++ {
		b, err := survivor.c.CallTool(ctx, victim, "read", map[string]string{"path": "runs.txt"})
		if err == nil && strings.Contains(string(b), "run") {
			break
		}
		if i > 200 {
			t.Fatalf("the job never wrote: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// n1's other run was worked through exec alone: its checkpoint is
	// stored within seconds of its last change.
	for i := 0; ; i++ {
		evs, err := survivor.c.Events(ctx, orphan, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if evs[len(evs)-1].Type == paddock.EventClusterCheckpoint {
			break
		}
		if i > 500 {
			t.Fatalf("run %s was never checkpointed after its exec", orphan)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ns[0].d.kill9()
	killHarnesses(ns[0].home)
	waitEvent("node_lost", func(e *paddock.Event) bool { return e.Type == paddock.EventNodeLost }, 15*time.Second)
	waitEvent("job.interrupted", func(e *paddock.Event) bool { return e.Type == paddock.EventJobInterrupted }, 5*time.Second)
	for _, n := range decode[[]paddock.Node](t, cli(t, ns[2].home, "nodes", "--json")) {
		if want := map[string]paddock.NodeState{"n1": paddock.NodeLost, "n2": paddock.NodeAlive, "n3": paddock.NodeAlive}[n.ID]; n.State != want {
			t.Fatalf("node %s is %s, want %s", n.ID, n.State, want)
		}
	}
	r := runState(t, survivor.home, victim)
	if r.Node != "n1" || r.NodeState != paddock.NodeLost {
		t.Fatalf("the victim: node %s %s", r.Node, r.NodeState)
	}
	cli(t, survivor.home, "diff", victim).wantCode(t, exitNodeLost, "paddock adopt "+victim)
	// The dead node holds no lease: no job of its runs is running.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var leases int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE (state = 'running' OR lease_until IS NOT NULL) AND run_id IN (SELECT id FROM runs WHERE node = 'n1')`).Scan(&leases); err != nil || leases != 0 {
		t.Fatalf("the dead node's leases: %d %v", leases, err)
	}

	// Adopted on n2: restored from the checkpoint the job started from,
	// the job run again there to its end.
	res := decode[paddock.AdoptResult](t, cli(t, survivor.home, "adopt", victim, "--json"))
	if res.FromNode != "n1" || res.Job != job.ID || res.Run.Node != "n2" {
		t.Fatalf("adopt: %+v", res)
	}
	waitEvent("job.adopted", func(e *paddock.Event) bool { return e.Type == paddock.EventJobAdopted }, 5*time.Second)
	waitEvent("the adopted job's end", func(e *paddock.Event) bool {
		return e.Type == paddock.EventJobFinished && strings.Contains(string(e.Data), `"succeeded"`)
	}, 30*time.Second)
	for path, want := range map[string]string{"who.txt": victim + "\n", "note.txt": "noted", "runs.txt": "run\ndone\n"} {
		b, err := ns[2].c.CallTool(ctx, victim, "read", map[string]string{"path": path})
		var rd struct {
			Content string `json:"content"`
		}
		json.Unmarshal(b, &rd)
		if err != nil || rd.Content != want {
			t.Fatalf("%s after adoption: %q %v", path, rd.Content, err)
		}
	}
	j, err := survivor.c.Job(ctx, victim, job.ID)
	if err != nil || j.State != paddock.JobSucceeded {
		t.Fatalf("the adopted job: %+v %v", j, err)
	}
	// n1's machine is gone: its other run's directory with it. Another
	// node's gc leaves that run alone (it is n1's); adopted, it has the
	// file its exec wrote.
	os.RemoveAll(filepath.Join(ns[0].home, "workspaces"))
	for _, f := range decode[[]paddock.Finding](t, cli(t, ns[2].home, "gc", "--json")) {
		if f.RunID == orphan || f.RunID == victim {
			t.Fatalf("n3's gc judged another node's run: %+v", f)
		}
	}
	if r := runState(t, ns[2].home, orphan); r.State() != paddock.StateActive || r.NodeState != paddock.NodeLost {
		t.Fatalf("n1's other run after n3's gc: %s on %s (%s)", r.State(), r.Node, r.NodeState)
	}
	if res := decode[paddock.AdoptResult](t, cli(t, ns[2].home, "adopt", orphan, "--json")); res.Job != "" || res.Run.Node != "n3" {
		t.Fatalf("adopting n1's other run: %+v", res)
	}
	if out := cli(t, ns[1].home, "exec", orphan, "--", "cat", "who.txt").must(t).out; out != orphan+"\n" {
		t.Fatalf("who.txt of the adopted run: %q", out)
	}
	cli(t, ns[1].home, "adopt", orphan).wantCode(t, exitConflict, "is on node n3, which is alive")

	// The stream saw every event of the run once, in order (once it has
	// caught up with the last one stored).
	all, err := survivor.c.Events(ctx, victim, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 250; i++ {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n >= len(all) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopFollowing()
	<-followed
	mu.Lock()
	if len(seen) != len(all) {
		t.Fatalf("the stream saw %d events, the run has %d", len(seen), len(all))
	}
	for i := range all {
		if seen[i].Seq != int64(i+1) || all[i].Seq != int64(i+1) || seen[i].Type != all[i].Type {
			t.Fatalf("event %d: seen %d %s, stored %d %s", i, seen[i].Seq, seen[i].Type, all[i].Seq, all[i].Type)
		}
	}
	mu.Unlock()

	// n3, paused past its lease, is marked lost; running again, it finds
	// its lease gone, writes nothing more and stops.
	paused := ns[2]
	var before int64
	if err := conn.QueryRow(ctx, `SELECT last_seq FROM runs WHERE id = $1`, other).Scan(&before); err != nil {
		t.Fatal(err)
	}
	paused.d.cmd.Process.Signal(syscall.SIGSTOP)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var state string
		conn.QueryRow(ctx, `SELECT state FROM paddock_nodes WHERE id = 'n3'`).Scan(&state)
		if state == "lost" {
			break
		}
		if time.Now().After(deadline) {
			paused.d.cmd.Process.Signal(syscall.SIGCONT)
			t.Fatalf("the paused node is %s", state)
		}
		time.Sleep(100 * time.Millisecond)
	}
	paused.d.cmd.Process.Signal(syscall.SIGCONT)
	exited := make(chan error, 1)
	go func() { exited <- paused.d.cmd.Wait() }()
	select {
	case err := <-exited:
		if err == nil {
			t.Fatal("the fenced node exited 0")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the fenced node did not stop")
	}
	logb, _ := os.ReadFile(filepath.Join(paused.home, "test-daemon.log"))
	if !strings.Contains(string(logb), "this node lost its lease: stopping") {
		t.Fatalf("the fenced node's log:\n%s", logb)
	}
	// It stopped without a checkpoint of its runs: its shutdown's writes
	// were refused. The only event since is the survivors' node_lost.
	evs, err := survivor.c.Events(ctx, other, before, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if fmt.Sprint(types) != "["+paddock.EventNodeLost+"]" {
		t.Fatalf("events of the fenced node's run since it was paused: %v", types)
	}
	t.Logf("fan-out of an event to another node's stream: %s", fanout)
}

// TestClusterAdoptsByPolicy: a node with node_adopt = "auto" adopts a lost
// node's run by itself, from its checkpoint, and runs its interrupted job
// again to its end.
func TestClusterAdoptsByPolicy(t *testing.T) {
	base := t.TempDir()
	url := pgtest.Need(t).URL(t, base)
	repo := newRepo(t, filepath.Join(base, "src", "app"), 3)
	a := startNode(t, base, "a", url)
	b := &node{id: "b", home: filepath.Join(base, "b")}
	b.d = startDaemon(t, b.home, "--store", url, "--node-id", "b", "--node-lease", "2s", "--node-capacity", "2", "--node-adopt", "auto")
	b.c = client.Unix(filepath.Join(b.home, "paddock.sock"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli(t, a.home, "project", "add", repo).must(t)
	// Made through a: placed on a (both empty, a first by id).
	id := strings.TrimSpace(cli(t, a.home, "create", "-p", "app", "--kind", "overlay").must(t).out)
	if r := runState(t, b.home, id); r.Node != "a" {
		t.Fatalf("run %s is on %q", id, r.Node)
	}
	cli(t, b.home, "exec", id, "--", "sh", "-c", "echo kept > kept.txt").must(t)
	for i := 0; ; i++ { // its checkpoint, within seconds of the change
		evs, _ := b.c.Events(ctx, id, 0, 1000)
		if n := len(evs); n > 0 && evs[n-1].Type == paddock.EventClusterCheckpoint {
			break
		}
		if i > 500 {
			t.Fatal("no checkpoint stored")
		}
		time.Sleep(20 * time.Millisecond)
	}
	job, err := b.c.StartJob(ctx, id, paddock.StartJobRequest{Kind: paddock.JobExec,
		Exec: &paddock.ExecRequest{Argv: []string{"sh", "-c", "sleep 3; cat kept.txt > done.txt"}}})
	if err != nil {
		t.Fatal(err)
	}
	a.d.kill9()
	killHarnesses(a.home)
	// b marks a lost, adopts the run by itself, and the job ends there.
	for i := 0; ; i++ {
		j, err := b.c.Job(ctx, id, job.ID)
		if err == nil && j.State == paddock.JobSucceeded {
			break
		}
		if i > 600 {
			logb, _ := os.ReadFile(filepath.Join(b.home, "test-daemon.log"))
			t.Fatalf("the job was not adopted and finished: %+v %v\n%s", j, err, logb)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := runState(t, b.home, id)
	if r.Node != "b" {
		t.Fatalf("run on %q", r.Node)
	}
	if out := cli(t, b.home, "exec", id, "--", "cat", "done.txt").must(t).out; out != "kept\n" {
		t.Fatalf("done.txt: %q", out)
	}
	evs := cli(t, b.home, "events", id).must(t).out
	if !strings.Contains(evs, "node_adopt = auto") || !strings.Contains(evs, paddock.EventJobAdopted) {
		t.Fatalf("events:\n%s", evs)
	}
}
