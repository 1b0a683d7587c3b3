package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/client/mcphttp"
	"github.com/paddock-dev/paddock/fakeagent"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/httpapi"
)

// TestContract plays testdata/contract.json with the fake agent against a
// real daemon: every action of the protocol, and every error code a client
// can provoke (internal is covered by the API's own tests: nothing a client
// sends should cause it).
func TestContract(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	// The manifest a verify job reads at the base: make test.
	gittest.Commit(t, repo, "verification", map[string]string{"Makefile": "test:\n\ttest -f README.md\n"})
	plain := newRepo(t, filepath.Join(base, "src", "plain"), 1) // no manifest at all
	os.MkdirAll(filepath.Join(home, "secrets"), 0o700)
	os.WriteFile(filepath.Join(home, "paddock.toml"), []byte("apply_name = \"Op\"\napply_email = \"op@example.com\"\n"), 0o600)
	// The first run declares this secret; its agent and commands write it
	// into files in every form (contract.json).
	os.WriteFile(filepath.Join(home, "secrets", "API_TOKEN"), []byte(contractSecret+"\n"), 0o600)
	spare := newRepo(t, filepath.Join(base, "src", "spare"), 1) // added, then removed by the script
	startDaemon(t, home)
	// The route of every request the script's client sends, agent's and
	// operator's, as the server's own table and http.ServeMux match it.
	routes := http.NewServeMux()
	for _, rt := range httpapi.Routes() {
		routes.HandleFunc(rt.Method+" "+rt.Path, func(http.ResponseWriter, *http.Request) {})
	}
	var mu sync.Mutex
	sent := map[string]bool{}
	operator := client.Unix(filepath.Join(home, "paddock.sock")).WithObserver(func(method, path string) {
		_, route := routes.Handler(httptest.NewRequest(method, path, nil))
		mu.Lock()
		sent[route] = true
		mu.Unlock()
	})
	ctx := context.Background()
	cli(t, home, "project", "add", repo).must(t)
	for _, p := range []string{plain, spare} {
		if _, err := operator.AddProject(ctx, paddock.AddProjectRequest{Path: p}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile("testdata/contract.json")
	if err != nil {
		t.Fatal(err)
	}
	var steps []fakeagent.Step
	if err := json.Unmarshal(b, &steps); err != nil {
		t.Fatal(err)
	}
	var log, answers bytes.Buffer
	r := &fakeagent.Runner{Operator: operator, Log: &log, Answers: &answers}
	if err := r.Run(ctx, steps); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	requireNoSecret(t, home, answers.String())
	// The apply wrote the real bytes, from the frozen blobs.
	if got := gittest.Git(t, repo, "show", "paddock/"+firstRun(t, home)+":config/token.txt"); got != "token = "+contractSecret {
		t.Fatalf("the applied file holds %q", got)
	}
	// Every action and every code a client can provoke is in the script.
	actions := map[string]bool{}
	codes := map[paddock.Code]bool{}
	for _, s := range steps {
		actions[s.Do] = true
		codes[s.Expect] = true
	}
	for _, a := range []string{"bootstrap", "status", "job_status", "events", "artifact", "tool", "exec", "start", "wait", "cancel", "submit", "approve", "apply", "reject",
		"create", "changeset", "diff", "tools", "jobs", "exec_stream", "follow", "inbox", "checkpoint", "resume", "retain", "rm", "undo",
		"health", "daemon", "doctor", "openapi", "projects", "project", "runs", "project_set", "project_rm", "unlock", "gc",
		"agent_add", "agents", "agent", "agent_rm", "manifest", "checkout", "capabilities", "verify", "request_access", "requests", "grant", "deny"} {
		if !actions[a] {
			t.Errorf("the contract script never does %s", a)
		}
	}
	// The worktree apply wrote into the project, and its undo took it back.
	if _, err := os.Stat(filepath.Join(repo, "applied.txt")); !os.IsNotExist(err) {
		t.Errorf("applied.txt after the undo: %v", err)
	}
	// MCP over streamable HTTP, through the operator's client: a session's
	// messages, its stream and its end.
	mcpRun, err := operator.Create(ctx, paddock.CreateRunRequest{Project: "app"})
	if err != nil {
		t.Fatal(err)
	}
	endpoint, hc := mcphttp.Endpoint(operator, mcpRun.ID)
	session, err := mcp.NewClient(&mcp.Implementation{Name: "contract", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tools, err := session.ListTools(ctx, nil); err != nil || len(tools.Tools) == 0 {
		t.Fatalf("MCP over HTTP: %+v %v", tools, err)
	}
	session.Close()
	// An attached command on a terminal, through the operator's client.
	var attached bytes.Buffer
	res, err := operator.ExecAttach(ctx, mcpRun.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", `echo "size $(stty size)"; read -r a; echo "got $a"`},
		Terminal: &paddock.TerminalSize{Rows: 5, Cols: 40}}, paddock.ExecIO{Stdin: strings.NewReader("typed\n"), Stdout: &attached})
	if err != nil || res.ExitCode != 0 || !strings.Contains(attached.String(), "size 5 40\r\n") || !strings.Contains(attached.String(), "got typed\r\n") {
		t.Fatalf("an attached command: %v %+v %q", err, res, attached.String())
	}
	// The review page's login link, and bundles: the first run's holds the
	// declared secret and is refused; another travels back in whole.
	if l, err := operator.UILogin(ctx); err != nil || !strings.Contains(l.URL, "/ui/login?code=") {
		t.Fatalf("ui login: %+v %v", l, err)
	}
	if k, err := operator.BundleKey(ctx); err != nil || !strings.HasPrefix(k.PublicKey, "ed25519 ") {
		t.Fatalf("bundle key: %+v %v", k, err)
	}
	if err := operator.Bundle(ctx, firstRun(t, home), io.Discard); !paddock.IsCode(err, paddock.CodeForbidden) {
		t.Fatalf("a bundle of the run holding the secret: %v", err)
	}
	if _, err := operator.Exec(ctx, mcpRun.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "echo bundled > bundled.txt"}}); err != nil {
		t.Fatal(err)
	}
	bcs, err := operator.Submit(ctx, mcpRun.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := operator.Blame(ctx, mcpRun.ID, bcs.Hash); err != nil || len(b.Hunks) != 1 {
		t.Fatalf("blame: %+v %v", b, err)
	}
	var bundled bytes.Buffer
	if err := operator.Bundle(ctx, mcpRun.ID, &bundled); err != nil {
		t.Fatal(err)
	}
	if res, err := operator.Import(ctx, paddock.ImportRequest{Project: "app"}, &bundled); err != nil || res.Hash != bcs.Hash || !res.Trusted {
		t.Fatalf("import: %+v %v", res, err)
	}
	// A fork of the run (refused as unsupported where it is not an overlay).
	if fr, err := operator.Fork(ctx, mcpRun.ID, paddock.ForkRequest{Count: 2}); err == nil {
		if len(fr.Runs) != 2 || fr.Runs[0].State() != paddock.StateReady {
			t.Fatalf("a fork: %+v", fr)
		}
	} else if !paddock.IsCode(err, paddock.CodeUnsupported) {
		t.Fatalf("a fork: %v", err)
	}
	// The merge queue: the bundled run, approved, lands on a branch, is
	// listed, undone, and (no longer queued) cannot be taken out.
	gittest.Git(t, repo, "branch", "landing")
	if _, err := operator.Approve(ctx, mcpRun.ID, bcs.Hash); err != nil {
		t.Fatal(err)
	}
	if _, err := operator.QueueAdd(ctx, mcpRun.ID, paddock.QueueAddRequest{Branch: "landing"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		e, err := operator.QueueEntry(ctx, mcpRun.ID)
		if err != nil || e.State == paddock.QueueLanded {
			break
		}
		if time.Now().After(deadline) || e.State == paddock.QueueReturned {
			t.Fatalf("the queue: %+v", e)
		}
	}
	if es, err := operator.Queue(ctx, "app", true); err != nil || len(es) != 1 {
		t.Fatalf("queue ls: %+v %v", es, err)
	}
	if _, err := operator.QueueUndo(ctx, mcpRun.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := operator.QueueRemove(ctx, mcpRun.ID); !paddock.IsCode(err, paddock.CodeConflict) {
		t.Fatalf("removing an undone entry: %v", err)
	}
	// The firehose: the script's submissions and approvals, across runs.
	var notices []*paddock.Notice
	fctx, stopFollowing := context.WithTimeout(ctx, 30*time.Second)
	errDone := errors.New("seen")
	err = operator.FollowNotices(fctx, 0, []string{paddock.EventSubmitted}, func(n *paddock.Notice) error {
		notices = append(notices, n)
		return errDone
	})
	stopFollowing()
	if !errors.Is(err, errDone) || len(notices) != 1 || notices[0].Type != paddock.EventSubmitted {
		t.Fatalf("the firehose: %v %+v", err, notices)
	}
	// Principals and their tokens: made, read, changed, revoked, removed.
	if who, err := operator.WhoAmI(ctx); err != nil || who.Principal != "" || who.Role != paddock.RoleAdmin {
		t.Fatalf("whoami: %+v %v", who, err)
	}
	if _, err := operator.AddPrincipal(ctx, paddock.PrincipalRequest{Name: "viv", Role: paddock.RoleViewer}); err != nil {
		t.Fatal(err)
	}
	if ps, err := operator.Principals(ctx); err != nil || len(ps) != 1 {
		t.Fatalf("principals: %+v %v", ps, err)
	}
	if p, err := operator.SetPrincipal(ctx, "viv", paddock.PrincipalRequest{Role: paddock.RoleReviewer, Projects: []string{"app"}}); err != nil || p.Role != paddock.RoleReviewer {
		t.Fatalf("set principal: %+v %v", p, err)
	}
	if p, err := operator.Principal(ctx, "viv"); err != nil || len(p.Projects) != 1 {
		t.Fatalf("principal: %+v %v", p, err)
	}
	tok, err := operator.CreateToken(ctx, paddock.TokenRequest{Principal: "viv", Expires: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	if ts, err := operator.Tokens(ctx, "viv"); err != nil || len(ts) != 1 || ts[0].ID != tok.ID {
		t.Fatalf("tokens: %+v %v", ts, err)
	}
	if rt, err := operator.RevokeToken(ctx, tok.ID); err != nil || rt.RevokedAt.IsZero() {
		t.Fatalf("revoke: %+v %v", rt, err)
	}
	if _, err := operator.RemovePrincipal(ctx, "viv"); err != nil {
		t.Fatal(err)
	}
	// Every route was called at least once (the OpenAPI document has an
	// operation for each: httpapi's TestOpenAPIOperations).
	// The nodes' routes need a shared store: TestClusterOfThree calls them.
	// /metrics is Prometheus's, not a client's: TestMetricsScrapedByPrometheus.
	clusterOnly := map[string]bool{"GET /v1/nodes": true, "POST /v1/runs/{id}/adopt": true, "GET /metrics": true}
	for _, rt := range httpapi.Routes() {
		if !sent[rt.Method+" "+rt.Path] && !clusterOnly[rt.Method+" "+rt.Path] {
			t.Errorf("the contract never calls %s %s", rt.Method, rt.Path)
		}
	}
	for _, c := range paddock.Codes {
		if !codes[c] && c != paddock.CodeInternal && c != paddock.CodeNodeLost { // node_lost: TestClusterOfThree provokes it
			t.Errorf("the contract script never provokes %s", c)
		}
	}
	if !strings.Contains(log.String(), "got run_mismatch") {
		t.Fatalf("log:\n%s", log.String())
	}
}

// firstRun is the id of the oldest run.
func firstRun(t *testing.T, home string) string {
	t.Helper()
	runs := decode[[]*paddock.Run](t, cli(t, home, "ls", "--all", "--json"))
	if len(runs) == 0 {
		t.Fatal("no runs")
	}
	return runs[0].ID
}
