package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/workspace"
)

// runSocketClient is an HTTP client that reaches run id's own API socket
// from the host, as a command inside the run reaches it at
// /run/paddock/api/paddock.sock (the socket's handler does not tell them
// apart: whoever connects is the run's agent). A socket path longer than
// an address holds is dialled through its directory's descriptor.
func runSocketClient(t *testing.T, home, id string) *http.Client {
	t.Helper()
	dir := filepath.Join(workspace.AuxDir(filepath.Join(home, "workspaces"), id), "api")
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	addr := fmt.Sprintf("/proc/self/fd/%d/paddock.sock", d.Fd())
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", addr)
	}}}
}

// TestRunSocketMCPKeepsTheRunsNetwork: a run made with no network (the
// default of create, exec and paddock run) must not get another network
// for its commands through its own socket. Its REST exec refuses
// net=host; its MCP endpoint on the same socket must not run the exec
// tool with the agent definition's network (the built-in coder's is
// host) either: that is the operator's choice (httpapi.operatorOnly).
//
// Red-team reproduction: fails on 50e7b06, where the MCP exec on the
// socket ran with enforcement.net "host" (no net namespace) and reached
// the host's loopback.
func TestRunSocketMCPKeepsTheRunsNetwork(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "app"), map[string]string{"README.md": "hello\n"})
	startDaemon(t, home)
	cli(t, home, "project", "add", repo, "--name", "app").must(t)
	run := decode[paddock.Run](t, cli(t, home, "create", "--project", "app", "--json"))
	// The first command serves the run's socket.
	cli(t, home, "exec", run.ID, "--stdin=false", "--", "true").must(t)
	hc := runSocketClient(t, home, run.ID)

	// The REST route on the socket refuses another network.
	resp, err := hc.Post("http://paddock/v1/runs/"+run.ID+"/exec", "application/json",
		strings.NewReader(`{"argv":["true"],"net":"host"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("REST exec with net=host through the run's socket: %s, want 403", resp.Status)
	}

	// MCP over HTTP on the same socket.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: "http://paddock/v1/runs/" + run.ID + "/mcp", HTTPClient: hc}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "redteam", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("MCP over the run's socket: %v", err)
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"argv": []string{"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		return // refused: the run's network was kept
	}
	var out struct {
		Enforcement struct {
			Net string `json:"net"`
		} `json:"enforcement"` // the MCP result's summary of it
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("exec result: %v\n%s", err, b)
	}
	if out.Enforcement.Net != "none" {
		t.Errorf("an exec through MCP on the socket of a run with no network ran with net %q; want none or a refusal\n%s", out.Enforcement.Net, b)
	}
}

// TestRunSocketAnswersAfterARestart: a run's socket is served again after
// the daemon restarts (Recover), and must then answer as before, not
// only its health check.
//
// Red-team reproduction: fails on 50e7b06. serve.go calls m.Recover,
// which Listens on every live run's socket, before runSockets.API is set:
// each of those sockets is served by RunHandler of a nil *httpapi.Server,
// /healthz answers and every other request panics (the client sees EOF),
// for the whole life of the daemon.
func TestRunSocketAnswersAfterARestart(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "app"), map[string]string{"README.md": "hello\n"})
	d := startDaemon(t, home)
	cli(t, home, "project", "add", repo, "--name", "app").must(t)
	run := decode[paddock.Run](t, cli(t, home, "create", "--project", "app", "--json"))
	inside := []string{"exec", run.ID, "--stdin=false", "--", "sh", "-c", `/run/paddock/bin/paddock capabilities "$PADDOCK_RUN" --json >/dev/null && echo ANSWERS`}
	if r := cli(t, home, inside...); !strings.Contains(r.out, "ANSWERS") {
		t.Fatalf("before the restart, the socket does not answer: %d\n%s\n%s", r.code, r.out, r.err)
	}
	d.stop()
	startDaemon(t, home)
	if st := runState(t, home, run.ID); st.Workspace.State == paddock.StateCheckpointed {
		cli(t, home, "resume", run.ID).must(t)
	}
	if r := cli(t, home, inside...); !strings.Contains(r.out, "ANSWERS") {
		t.Errorf("after a restart, the run's socket does not answer: %d\n%s\n%s", r.code, r.out, r.err)
	}
}
