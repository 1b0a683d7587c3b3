package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// mcpFixture is a daemon listening on loopback TCP too, a project, and
// the operator's client.
type mcpFixture struct {
	home, addr, token, repo string
	op                      *client.Client
	d                       *daemon
}

// mcpSecret is the secret a run of the fixture may declare (API_TOKEN).
const mcpSecret = "tok-mcp-5e3f9a1c-very-secret"

func newMCPFixture(t *testing.T) *mcpFixture {
	t.Helper()
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	gittest.Commit(t, repo, "verification", map[string]string{"Makefile": "test:\n\ttest -f README.md\n"})
	os.MkdirAll(filepath.Join(home, "secrets"), 0o700)
	os.WriteFile(filepath.Join(home, "secrets", "API_TOKEN"), []byte(mcpSecret+"\n"), 0o600)
	d := startDaemon(t, home, "--listen", "127.0.0.1:0")
	cli(t, home, "project", "add", repo).must(t)
	tok, err := os.ReadFile(filepath.Join(home, "token"))
	if err != nil {
		t.Fatal(err)
	}
	f := &mcpFixture{home: home, addr: d.info.Listen, token: strings.TrimSpace(string(tok)), repo: repo, d: d}
	f.op = client.TCP(f.addr, f.token)
	return f
}

// create makes a clone run with extra flags and returns its id.
func (f *mcpFixture) create(t *testing.T, flags ...string) string {
	t.Helper()
	return strings.TrimSpace(cli(t, f.home, append([]string{"create", "-p", "app", "--kind", "clone"}, flags...)...).must(t).out)
}

// url is run id's MCP endpoint.
func (f *mcpFixture) url(id string) string { return "http://" + f.addr + "/v1/runs/" + id + "/mcp" }

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// transport names how a test reaches a run's MCP server: stdio (paddock
// mcp, the operator's socket), HTTP with the operator's token, HTTP with
// the run's own token (token set).
type transport struct {
	name  string
	token string // "" on stdio
}

func (f *mcpFixture) connect(t *testing.T, tr transport, id string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	var ct mcp.Transport
	if tr.token == "" {
		cmd := exec.Command(binary, "mcp", id, "--home", f.home)
		cmd.Env = append(os.Environ(), "PADDOCK_NO_AUTOSTART=1")
		ct = &mcp.CommandTransport{Command: cmd}
	} else {
		ct = &mcp.StreamableClientTransport{Endpoint: f.url(id), HTTPClient: &http.Client{Transport: bearer{tr.token, http.DefaultTransport}}}
	}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("%s: connect: %v", tr.name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func toolNames(t *testing.T, s *mcp.ClientSession) []string {
	t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func call(t *testing.T, s *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mustOK fails unless res is a success, and returns its structured content.
func mustOK(t *testing.T, name string, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("%s: %s", name, text(res))
	}
	var m map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &m)
	return m
}

var (
	writeTools = []string{"capabilities", "delete", "diff", "edit", "exec", "glob", "grep", "list", "move", "plan", "read", "request_access", "stat", "submit", "verify", "write"}
	readTools  = []string{"capabilities", "diff", "exec", "glob", "grep", "list", "plan", "read", "request_access", "stat", "verify"}
)

// TestMCPTransports: the same server over stdio and over streamable HTTP
// (the operator's token and a run's own): the tools each access mode and
// definition is offered, with their hints; every tool called; exec's
// output as progress; the resources read and their updates; the tool
// list changing after a grant; refusals as tool errors; a rejected run.
func TestMCPTransports(t *testing.T) {
	f := newMCPFixture(t)
	ctx := context.Background()
	writeRun, readRun, noneRun := f.create(t), f.create(t, "--access", "read"), strings.TrimSpace(cli(t, f.home, "create", "-p", "app", "--access", "none").must(t).out)
	boot, err := f.op.Bootstrap(ctx, paddock.BootstrapRequest{Project: "app", Kind: "clone", Task: "narrow",
		Agent: paddock.AgentDefinition{Name: "narrow", Workspace: "write", Tools: []string{"read", "list", "capabilities", "request_access"}}})
	if err != nil {
		t.Fatal(err)
	}
	// A definition that does not grant the capabilities tool is still
	// offered the tools it grants: the server reads what the run may do on
	// the agent's behalf (it listed nothing, on every transport).
	bare, err := f.op.Bootstrap(ctx, paddock.BootstrapRequest{Project: "app", Kind: "clone", Task: "bare",
		Agent: paddock.AgentDefinition{Name: "bare", Workspace: "write", Tools: []string{"read", "write"}}})
	if err != nil {
		t.Fatal(err)
	}
	transports := []transport{{name: "stdio"}, {name: "http-operator", token: f.token}}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			for run, want := range map[string][]string{writeRun: writeTools, readRun: readTools, noneRun: {"capabilities", "plan", "request_access"},
				boot.Run.ID: {"capabilities", "list", "read", "request_access"}, bare.Run.ID: {"read", "write"}} {
				if got := toolNames(t, f.connect(t, tr, run, nil)); !slices.Equal(got, want) {
					t.Errorf("run %s offers %v, want %v", run, got, want)
				}
			}
			p := &progressLog{}
			s := f.connect(t, tr, writeRun, &mcp.ClientOptions{ProgressNotificationHandler: p.add})
			callEveryTool(t, s, p, writeRun, tr.name)
			errorShapes(t, s)
		})
	}
	// The run's own token reaches its own MCP endpoint, and no other's.
	own := transport{name: "http-run-token", token: boot.Token}
	if got := toolNames(t, f.connect(t, own, boot.Run.ID, nil)); !slices.Equal(got, []string{"capabilities", "list", "read", "request_access"}) {
		t.Fatalf("with the run's token: %v", got)
	}
	bareOwn := f.connect(t, transport{name: "http-run-token", token: bare.Token}, bare.Run.ID, nil)
	if got := toolNames(t, bareOwn); !slices.Equal(got, []string{"read", "write"}) {
		t.Fatalf("a definition without capabilities, with the run's token: %v", got)
	}
	// Its tools work; the capabilities tool, not granted, is not there to call.
	if res := call(t, bareOwn, "write", map[string]any{"path": "bare.txt", "content": "x\n"}); res.IsError {
		t.Fatalf("write by an agent without capabilities: %+v", res)
	}
	if res, err := bareOwn.CallTool(ctx, &mcp.CallToolParams{Name: "capabilities", Arguments: map[string]any{}}); err == nil && !res.IsError {
		t.Fatalf("capabilities, not granted, answered: %+v", res)
	}
	other := &mcp.StreamableClientTransport{Endpoint: f.url(writeRun), HTTPClient: &http.Client{Transport: bearer{boot.Token, http.DefaultTransport}}}
	if _, err := mcp.NewClient(&mcp.Implementation{Name: "x", Version: "1"}, nil).Connect(ctx, other, nil); err == nil || !strings.Contains(err.Error(), "403") && !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("another run's token on this run: %v", err)
	}

	t.Run("grant", func(t *testing.T) { listChangedAfterGrant(t, f, boot) })
	t.Run("resources", func(t *testing.T) {
		for _, tr := range []transport{{name: "stdio"}, own} {
			resources(t, f, tr, boot.Run.ID)
		}
	})
	t.Run("rejected", func(t *testing.T) { rejected(t, f) })
	t.Run("secrets", func(t *testing.T) { secrets(t, f) })

	// A daemon with open HTTP sessions (their streams included) stops
	// promptly: it ends them first.
	s := f.connect(t, transport{name: "http", token: f.token}, writeRun, nil)
	toolNames(t, s)
	start := time.Now()
	f.d.stop()
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the daemon took %v to stop with an MCP session open", took)
	}
}

// secrets: a run's declared secret, written by its command, reaches an
// agent over MCP masked, on both transports, in exec's progress and its
// result.
func secrets(t *testing.T, f *mcpFixture) {
	id := f.create(t, "--secret", "API_TOKEN")
	for _, tr := range []transport{{name: "stdio"}, {name: "http", token: f.token}} {
		p := &progressLog{}
		s := f.connect(t, tr, id, &mcp.ClientOptions{ProgressNotificationHandler: p.add})
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Meta: mcp.Meta{"progressToken": "p1"},
			Arguments: map[string]any{"argv": []string{"sh", "-c", "echo token=$API_TOKEN; echo $API_TOKEN > leaked.txt"}}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		streamed, _ := p.text()
		if strings.Contains(string(b), mcpSecret) || strings.Contains(streamed, mcpSecret) || !strings.Contains(string(b), "token=[REDACTED") {
			t.Fatalf("%s: exec over MCP: %s; progress %q", tr.name, b, streamed)
		}
		for _, r := range []*mcp.CallToolResult{call(t, s, "read", map[string]any{"path": "leaked.txt"}), call(t, s, "diff", map[string]any{})} {
			if b, _ := json.Marshal(r); strings.Contains(string(b), mcpSecret) {
				t.Fatalf("%s: a secret over MCP: %s", tr.name, b)
			}
		}
	}
}

// progressLog keeps the progress notifications a session heard.
type progressLog struct {
	mu       sync.Mutex
	messages []string
	last     float64
	ordered  bool
}

func (p *progressLog) add(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.messages) == 0 {
		p.ordered = true
	}
	p.ordered = p.ordered && r.Params.Progress > p.last && r.Params.ProgressToken == "p1"
	p.last = r.Params.Progress
	p.messages = append(p.messages, r.Params.Message)
}

func (p *progressLog) text() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.messages, ""), p.ordered
}

func callEveryTool(t *testing.T, s *mcp.ClientSession, p *progressLog, id, tr string) {
	ctx := context.Background()
	// The hints: a read tool is read-only; exec is destructive, and
	// open-world when the run's commands get a network (the built-in
	// coder's: host).
	caps := mustOK(t, "capabilities", call(t, s, "capabilities", map[string]any{}))
	listed, _ := s.ListTools(ctx, nil)
	for _, tl := range listed.Tools {
		a := tl.Annotations
		if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Fatalf("%s has no hints: %+v", tl.Name, a)
		}
		switch tl.Name {
		case "read", "glob", "grep", "list", "stat", "capabilities", "diff":
			if !a.ReadOnlyHint || *a.DestructiveHint || *a.OpenWorldHint {
				t.Errorf("%s: %+v", tl.Name, a)
			}
		case "exec":
			if a.ReadOnlyHint || !*a.DestructiveHint || *a.OpenWorldHint != (caps["net"] != "none") {
				t.Errorf("exec with network %v: %+v", caps["net"], a)
			}
		case "write", "delete":
			if a.ReadOnlyHint || !*a.DestructiveHint || !a.IdempotentHint {
				t.Errorf("%s: %+v", tl.Name, a)
			}
		}
	}
	file := "mcp-" + tr + ".txt"
	mustOK(t, "write", call(t, s, "write", map[string]any{"path": file, "content": "one\n"}))
	mustOK(t, "edit", call(t, s, "edit", map[string]any{"path": file, "old_string": "one", "new_string": "two"}))
	if got := mustOK(t, "read", call(t, s, "read", map[string]any{"path": file})); !strings.Contains(got["content"].(string), "two") {
		t.Fatalf("read: %v", got)
	}
	mustOK(t, "stat", call(t, s, "stat", map[string]any{"path": file}))
	mustOK(t, "list", call(t, s, "list", map[string]any{}))
	mustOK(t, "glob", call(t, s, "glob", map[string]any{"pattern": "*.txt"}))
	mustOK(t, "grep", call(t, s, "grep", map[string]any{"pattern": "two"}))
	mustOK(t, "move", call(t, s, "move", map[string]any{"from": file, "to": file + ".moved"}))
	mustOK(t, "write", call(t, s, "write", map[string]any{"path": "gone.txt", "content": "x"}))
	mustOK(t, "delete", call(t, s, "delete", map[string]any{"path": "gone.txt"}))

	// exec: the output as progress notifications, in order, then the
	// result with the output and the enforcement the sandbox recorded.
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Meta: mcp.Meta{"progressToken": "p1"},
		Arguments: map[string]any{"argv": []string{"sh", "-c", "echo first; sleep 0.2; echo second; echo err >&2"}}})
	if err != nil {
		t.Fatal(err)
	}
	got := mustOK(t, "exec", res)
	// Notifications may trail the result a little.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		streamed, ordered := p.text()
		if strings.Contains(streamed, "second") && strings.Contains(streamed, "err") {
			if !ordered || !strings.Contains(streamed, "first\n") || strings.Index(streamed, "first") > strings.Index(streamed, "second") {
				t.Fatalf("exec's progress: %q (in order: %v)", streamed, ordered)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exec's output as progress: %q", streamed)
		}
	}
	if got["exit_code"].(float64) != 0 || got["stdout"] != "first\nsecond\n" || got["stderr"] != "err\n" || got["enforcement"] == nil {
		t.Fatalf("exec: %v", got)
	}

	// diff: a summary with the entries first, then the unified diff.
	res = call(t, s, "diff", map[string]any{})
	d := mustOK(t, "diff", res)
	if !strings.Contains(text(res), file+".moved") || !strings.Contains(text(res), "+two") || d["hash"] == "" || len(d["entries"].([]any)) == 0 {
		t.Fatalf("diff: %s %v", text(res), d)
	}
	if v := call(t, s, "verify", map[string]any{"checks": []string{"test"}}); v.IsError {
		t.Fatalf("verify: %s", text(v))
	}
	if c := mustOK(t, "capabilities", call(t, s, "capabilities", map[string]any{})); c["run"] != id {
		t.Fatalf("capabilities: %v", c)
	}
	if q := mustOK(t, "request_access", call(t, s, "request_access", map[string]any{"kind": "network", "domain": "example.com", "reason": "docs"})); q["state"] != "pending" {
		t.Fatalf("request_access: %v", q)
	}
	// submit, bound to the hash diff showed; then a stale hash is refused.
	if sub := mustOK(t, "submit", call(t, s, "submit", map[string]any{"expect_hash": d["hash"]})); sub["hash"] != d["hash"] {
		t.Fatalf("submit: %v", sub)
	}
	mustOK(t, "write", call(t, s, "write", map[string]any{"path": "later-" + tr + ".txt", "content": "x"}))
	if r := call(t, s, "submit", map[string]any{"expect_hash": d["hash"]}); !r.IsError || !strings.HasPrefix(text(r), "conflict: ") {
		t.Fatalf("a stale submit: %s", text(r))
	}
}

// errorShapes: a refusal is a tool error whose text starts with paddock's
// code and one line, with the error as structured content.
func errorShapes(t *testing.T, s *mcp.ClientSession) {
	for _, tc := range []struct {
		tool string
		args any
		code paddock.Code
		key  string
	}{
		{"read", map[string]any{"path": "../../etc/passwd"}, paddock.CodeForbidden, ""},
		{"write", json.RawMessage(`{"path":"a.txt","Path":"b.txt","content":"x"}`), paddock.CodeBadRequest, "Path"},
		{"exec", map[string]any{"argv": []string{"true"}, "net": "host"}, paddock.CodeForbidden, ""},
		{"exec", map[string]any{"argv": []string{"true"}, "network": "host"}, paddock.CodeBadRequest, "network"},
		{"exec", map[string]any{"argv": []string{"curl", "https://example.com"}, "timeout": "nonsense"}, "", ""},
		{"request_access", map[string]any{"kind": "tool", "reason": "x"}, paddock.CodeBadRequest, ""},
	} {
		res := call(t, s, tc.tool, tc.args)
		first, _, _ := strings.Cut(text(res), "\n")
		var se struct {
			Code    paddock.Code   `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &se)
		switch {
		case !res.IsError:
			t.Errorf("%s %v: not an error: %s", tc.tool, tc.args, text(res))
		case strings.HasPrefix(first, "{") || !strings.HasPrefix(first, string(se.Code)+": ") || se.Message == "":
			t.Errorf("%s %v: the text %q, the structured error %s", tc.tool, tc.args, text(res), b)
		case tc.code != "" && se.Code != tc.code:
			t.Errorf("%s %v: code %s, want %s", tc.tool, tc.args, se.Code, tc.code)
		case tc.key != "" && se.Details["key"] != tc.key:
			t.Errorf("%s %v: details %v, want key %s", tc.tool, tc.args, se.Details, tc.key)
		}
	}
}

// listChangedAfterGrant: a run narrowed to read and list asks for write;
// when the operator grants it, the session hears tools/list_changed and
// the list has write.
func listChangedAfterGrant(t *testing.T, f *mcpFixture, boot *paddock.BootstrapResult) {
	ctx := context.Background()
	for _, tr := range []transport{{name: "stdio"}, {name: "http-run-token", token: boot.Token}} {
		changed := make(chan struct{}, 8)
		s := f.connect(t, tr, boot.Run.ID, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
		if got := toolNames(t, s); slices.Contains(got, "write") && tr.name == "stdio" {
			t.Fatalf("before the grant: %v", got)
		}
		if tr.name != "stdio" {
			// The grant below was given while stdio watched; here, a new
			// request (for edit) makes the list change again.
			q := mustOK(t, "request_access", call(t, s, "request_access", map[string]any{"kind": "tool", "tool": "edit", "reason": "to fix"}))
			if _, err := f.op.Grant(ctx, boot.Run.ID, q["id"].(string), "ok"); err != nil {
				t.Fatal(err)
			}
		} else {
			q := mustOK(t, "request_access", call(t, s, "request_access", map[string]any{"kind": "tool", "tool": "write", "reason": "to fix"}))
			if _, err := f.op.Grant(ctx, boot.Run.ID, q["id"].(string), "ok"); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no tools/list_changed after the grant", tr.name)
		}
		want := "write"
		if tr.name != "stdio" {
			want = "edit"
		}
		deadline := time.Now().Add(5 * time.Second)
		for got := toolNames(t, s); !slices.Contains(got, want); got = toolNames(t, s) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: after the grant: %v", tr.name, got)
			}
			time.Sleep(50 * time.Millisecond)
		}
		mustOK(t, want, call(t, s, "write", map[string]any{"path": "granted-" + tr.name + ".txt", "content": "x"}))
	}
}

// resources: the change set (JSON and diff) and the event log, read and
// subscribed to: a tool call's event updates them.
func resources(t *testing.T, f *mcpFixture, tr transport, id string) {
	ctx := context.Background()
	updated := make(chan string, 16)
	s := f.connect(t, tr, id, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
		updated <- r.Params.URI
	}})
	list, err := s.ListResources(ctx, nil)
	if err != nil || len(list.Resources) != 3 {
		t.Fatalf("%s: resources %+v %v", tr.name, list, err)
	}
	base := "paddock://runs/" + id
	if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: base + "/events"}); err != nil {
		t.Fatal(err)
	}
	// A subscription may be a listen stream the client opens on its own
	// (the 2026-07-28 protocol): calls come until it hears of one.
	deadline := time.After(10 * time.Second)
wait:
	for {
		mustOK(t, "write", call(t, s, "write", map[string]any{"path": "res-" + tr.name + ".txt", "content": "resource\n"}))
		select {
		case uri := <-updated:
			if uri != base+"/events" {
				t.Fatalf("%s: updated %s", tr.name, uri)
			}
			break wait
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s: no resources/updated after a call", tr.name)
		}
	}
	read := func(uri string) *mcp.ResourceContents {
		r, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(r.Contents) != 1 {
			t.Fatalf("%s: read %s: %+v %v", tr.name, uri, r, err)
		}
		return r.Contents[0]
	}
	var cs paddock.ChangeSet
	if c := read(base + "/changeset"); c.MIMEType != "application/json" || json.Unmarshal([]byte(c.Text), &cs) != nil || cs.Hash == "" {
		t.Fatalf("%s: changeset %+v", tr.name, c)
	}
	if c := read(base + "/changeset.diff"); !strings.Contains(c.Text, "+resource") {
		t.Fatalf("%s: diff %q", tr.name, c.Text)
	}
	var evs []paddock.Event
	if c := read(base + "/events"); json.Unmarshal([]byte(c.Text), &evs) != nil || !slices.ContainsFunc(evs, func(e paddock.Event) bool {
		return e.Type == paddock.EventToolCall && strings.Contains(string(e.Data), "res-"+tr.name)
	}) {
		t.Fatalf("%s: events %q", tr.name, c.Text)
	}
	if _, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "paddock://runs/other/events"}); err == nil {
		t.Fatalf("%s: another run's resource", tr.name)
	}
}

// rejected: a run rejected while a session is open, and one rejected
// before: no tools listed, every call answered with why.
func rejected(t *testing.T, f *mcpFixture) {
	ctx := context.Background()
	for _, tr := range []transport{{name: "stdio"}, {name: "http-operator", token: f.token}} {
		id := f.create(t)
		changed := make(chan struct{}, 8)
		s := f.connect(t, tr, id, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
		if len(toolNames(t, s)) == 0 {
			t.Fatal("no tools before the reject")
		}
		if _, err := f.op.Reject(ctx, id); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no tools/list_changed after the reject", tr.name)
		}
		for _, s := range []*mcp.ClientSession{s, f.connect(t, tr, id, nil)} {
			if got := toolNames(t, s); len(got) != 0 {
				t.Fatalf("%s: a rejected run lists %v", tr.name, got)
			}
			for _, name := range []string{"read", "capabilities"} {
				if r := call(t, s, name, map[string]any{"path": "README.md"}); !r.IsError || !strings.HasPrefix(text(r), "conflict: run "+id+" is ") || !strings.Contains(text(r), "rejected") && !strings.Contains(text(r), "clean") {
					t.Fatalf("%s: %s on a rejected run: %s", tr.name, name, text(r))
				}
			}
			if _, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "paddock://runs/" + id + "/events"}); err == nil || !strings.Contains(err.Error(), "conflict") {
				t.Fatalf("%s: a rejected run's resource: %v", tr.name, err)
			}
		}
	}
}

// TestMCPTypeScriptSDK: a client nobody here wrote, the official
// TypeScript SDK (testdata/ts-mcp, its version pinned by the lock file),
// drives both transports: the tools per access mode, every tool of a
// write run, exec's progress, the resources and their updates,
// tools/list_changed after a grant, the error shapes, a rejected run.
// Without node and npm, or without the npm registry, it is skipped (it
// fails instead under CI=true).
func TestMCPTypeScriptSDK(t *testing.T) {
	unavailable := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable("node is not installed: the TypeScript SDK's test needs node and npm")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		unavailable("npm is not installed: the TypeScript SDK's test needs it to install the SDK")
	}
	dir := t.TempDir()
	for _, name := range []string{"package.json", "package-lock.json", "drive.mjs"} {
		b, err := os.ReadFile(filepath.Join("testdata", "ts-mcp", name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		unavailable("npm ci could not install the TypeScript SDK (is the npm registry reachable?): %v\n%s", err, out)
	}

	f := newMCPFixture(t)
	boot, err := f.op.Bootstrap(ctx, paddock.BootstrapRequest{Project: "app", Kind: "clone", Task: "narrow",
		Agent: paddock.AgentDefinition{Name: "narrow", Workspace: "write", Tools: []string{"read", "list", "capabilities", "request_access"}}})
	if err != nil {
		t.Fatal(err)
	}
	rejected := f.create(t)
	if _, err := f.op.Reject(ctx, rejected); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{
		"binary": binary, "home": f.home, "base": "http://" + f.addr, "operatorToken": f.token,
		"write": f.create(t), "read": f.create(t, "--access", "read"),
		"none":   strings.TrimSpace(cli(t, f.home, "create", "-p", "app", "--access", "none").must(t).out),
		"narrow": boot.Run.ID, "narrowToken": boot.Token, "rejected": rejected,
		"writeTools": writeTools, "readTools": readTools,
	})
	drive := exec.CommandContext(ctx, node, "drive.mjs")
	drive.Dir = dir
	drive.Env = append(os.Environ(), "PADDOCK_TS_MCP="+string(cfg))
	out, err := drive.CombinedOutput()
	t.Logf("the TypeScript SDK's checks:\n%s", out)
	if err != nil {
		t.Fatalf("the TypeScript SDK's client: %v", err)
	}
}
