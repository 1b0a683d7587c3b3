package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/postgres/pgtest"
)

// TestServeOnPostgres: the daemon keeps its state in PostgreSQL when told
// (--store, PADDOCK_STORE or store in paddock.toml): a run is made, works,
// survives a kill -9 and a restart, and is rejected; a second daemon on
// the same database joins it as another node, and a second daemon that
// claims the first's node id is refused.
func TestServeOnPostgres(t *testing.T) {
	base := t.TempDir()
	url := pgtest.Need(t).URL(t, base) // a database of its own, each time
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 3)
	d := startDaemon(t, home, "--store", url)
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "clone").must(t).out)
	if r := cli(t, home, "exec", id, "--", "sh", "-c", "echo on postgres > pg.txt && cat pg.txt"); r.code != 0 || r.out != "on postgres\n" {
		t.Fatalf("exec: %d %q %s", r.code, r.out, r.err)
	}
	if _, err := os.Stat(filepath.Join(home, "state.db")); !os.IsNotExist(err) {
		t.Fatalf("a state.db beside a PostgreSQL store: %v", err)
	}
	// Another state directory, the same database: another node, unless
	// it claims the first one's id.
	other := filepath.Join(base, "other")
	os.MkdirAll(other, 0o700)
	r := cli(t, other, "serve", "--store", url, "--node-id", d.info.Node)
	if r.code != exitBusy || !strings.Contains(r.err, "belongs to another state directory: node "+d.info.Node+" is alive") {
		t.Fatalf("a second daemon as the first's node: %d %s", r.code, r.err)
	}
	second := startDaemon(t, other, "--store", url)
	if nodes := decode[[]paddock.Node](t, cli(t, other, "nodes", "--json")); len(nodes) != 2 || second.info.Node == d.info.Node {
		t.Fatalf("nodes: %+v", nodes)
	}
	second.stop()
	// Settings a node could only fail on later are refused at its start.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-capacity", "0"}, "node_capacity: want a number of runs of at least 1"},
		{[]string{"--node-listen", "0.0.0.0:0"}, "listens on every address"},
		{[]string{"--node-address", "http://127.0.0.1"}, "want http://HOST:PORT"},
		{[]string{"--node-adopt", "sometimes"}, "want manual or auto"},
	} {
		r := cli(t, other, append([]string{"serve", "--store", url}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.err, tc.want) {
			t.Fatalf("serve %v: %d %s", tc.args, r.code, r.err)
		}
	}
	// A node whose address reaches nothing stops, saying so.
	third := filepath.Join(base, "third")
	os.MkdirAll(third, 0o700)
	cmd := exec.Command(binary, "serve", "--home", third, "--store", url, "--node-address", "http://127.0.0.1:1")
	cmd.Env = append(os.Environ(), "PADDOCK_NO_AUTOSTART=1")
	out, err := runFor(cmd, 60*time.Second)
	if err == nil || !strings.Contains(out, "does not reach its node listener") {
		t.Fatalf("a node with a wrong address: %v\n%s", err, out)
	}
	d.kill9()
	startDaemon(t, home, "--store", url)
	run := decode[*paddock.Run](t, cli(t, home, "show", id, "--json"))
	if run.Agent == nil || run.Agent.Name != "coder" || run.State() != paddock.StateCheckpointed {
		t.Fatalf("after a restart: %+v", run)
	}
	evs := cli(t, home, "events", id).must(t).out
	if !strings.Contains(evs, "exec") || !strings.Contains(evs, "workspace.checkpoint") {
		t.Fatalf("the events after a restart:\n%s", evs)
	}
	cli(t, home, "reject", id).must(t)
	if r := cli(t, other, "serve", "--store", "mysql://x"); r.code != exitUsage || !strings.Contains(r.err, "want sqlite or a postgres:// URL") {
		t.Fatalf("an unknown store: %d %s", r.code, r.err)
	}
}

// runFor runs cmd to its end, killing it after d, and returns its output.
func runFor(cmd *exec.Cmd, d time.Duration) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		return out.String(), fmt.Errorf("still running after %s", d)
	}
}
