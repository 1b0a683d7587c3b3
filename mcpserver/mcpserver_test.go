package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/broker"
)

// fakeRun is a run as the server sees it through its services: its
// capabilities and its events, which a test changes, and the calls the
// fakes were asked. Each service's fake (fakeRuns, fakeBroker, ...) is a
// view of it.
type fakeRun struct {
	mu     sync.Mutex
	caps   paddock.Capabilities
	events []*paddock.Event
	wake   chan struct{}
	calls  []string
	enf    paddock.Enforcement // what ExecStream says the sandbox enforced
}

func newFake(tools ...string) *fakeRun {
	f := &fakeRun{wake: make(chan struct{}), caps: paddock.Capabilities{Run: "r-1", State: paddock.StateActive, Net: "none"}}
	for _, t := range tools {
		f.caps.Tools = append(f.caps.Tools, paddock.ToolCapability{Name: t})
	}
	return f
}

// config serves f with every service the server calls; the methods no
// test reaches are the embedded nil interfaces' (a call panics), and a
// Verifier is left out for the same reason.
func (f *fakeRun) config() Config {
	return Config{Runs: fakeRuns{f}, Broker: fakeBroker{fakeRun: f}, Changes: fakeChanges{fakeRun: f}, Flows: fakeFlows{f}}
}

// fakeRuns is the run and its event log.
type fakeRuns struct{ *fakeRun }

// fakeBroker answers the run's capabilities now, and runs a command by
// writing three lines.
type fakeBroker struct {
	Broker // RequestAccess
	*fakeRun
}

// fakeChanges answers one change set.
type fakeChanges struct {
	Changes // SubmitExpecting
	*fakeRun
}

// fakeFlows records the events picked; "stale" is refused.
type fakeFlows struct{ *fakeRun }

// emit records an event of typ, after changing the run with change.
func (f *fakeRun) emit(typ string, change func(*paddock.Capabilities)) {
	f.mu.Lock()
	if change != nil {
		change(&f.caps)
	}
	f.events = append(f.events, &paddock.Event{RunID: "r-1", Seq: int64(len(f.events) + 1), Type: typ, Data: json.RawMessage(`{}`)})
	close(f.wake)
	f.wake = make(chan struct{})
	f.mu.Unlock()
}

func (f fakeRuns) Run(ctx context.Context, id string) (*paddock.Run, error) {
	if id != "r-1" {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no run %s", id)
	}
	return &paddock.Run{ID: id}, nil
}

func (f fakeBroker) Capabilities(ctx context.Context, id string) (*paddock.Capabilities, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.caps
	c.Tools = slices.Clone(c.Tools)
	return &c, nil
}

func (f fakeRuns) Events(ctx context.Context, id string, after int64, limit int) ([]*paddock.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if int(after) >= len(f.events) {
		return nil, nil
	}
	return slices.Clone(f.events[after:]), nil
}

func (f fakeRuns) WaitEvents(ctx context.Context, id string, after int64, limit int) ([]*paddock.Event, error) {
	for {
		f.mu.Lock()
		wake := f.wake
		f.mu.Unlock()
		if evs, _ := f.Events(ctx, id, after, limit); len(evs) > 0 {
			return evs, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-wake:
		}
	}
}

func (f fakeBroker) ExecStream(ctx context.Context, id string, req paddock.ExecRequest, stdout, stderr io.Writer) (*paddock.ExecResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, "exec "+strings.Join(req.Argv, " ")+" net="+req.Net+" agent="+map[bool]string{true: "yes", false: "no"}[paddock.AgentCall(ctx)])
	f.mu.Unlock()
	stdout.Write([]byte("one\n"))
	stderr.Write([]byte("two\n"))
	stdout.Write([]byte("three\n"))
	return &paddock.ExecResult{ExitCode: 0, Enforcement: f.enf}, nil
}

func (f fakeChanges) ChangeSet(ctx context.Context, id string) (*paddock.ChangeSet, error) {
	return &paddock.ChangeSet{RunID: id, Hash: "sha256:ab", Entries: []paddock.ChangeEntry{{Path: ".github/workflows/ci.yml", Op: "add", Risks: []string{"ci"}}},
		Diff: "diff --git a/x b/x\n+hello\n"}, nil
}

// connect serves the fake run and returns a client session to it.
func connect(t *testing.T, f *fakeRun, opts *mcp.ClientOptions) (*Server, *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
	cfg := f.config()
	cfg.CallTool = func(ctx context.Context, id, name string, args json.RawMessage) (json.RawMessage, error) {
		if name == "read" && strings.Contains(string(args), "..") {
			return nil, paddock.Errorf(paddock.CodeForbidden, "the path %q\nleaves the workspace", "../x").WithRule("escape").WithDetail("path", "../x")
		}
		return json.RawMessage(`{"ok":true}`), nil
	}
	srv, err := New(ctx, cfg, "r-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return srv, cs
}

func listed(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

// TestOfferedFollowsCapabilities: the list is what the capabilities
// offer; a grant event makes the server list again and say so, and a
// network granted turns exec open-world.
func TestOfferedFollowsCapabilities(t *testing.T) {
	f := newFake("read", "exec", "capabilities", "no-such-tool")
	changed := make(chan struct{}, 8)
	_, cs := connect(t, f, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	tools := listed(t, cs)
	if len(tools) != 3 || tools["read"] == nil || tools["exec"] == nil || *tools["exec"].Annotations.OpenWorldHint {
		t.Fatalf("listed %v", tools)
	}
	if a := tools["read"].Annotations; !a.ReadOnlyHint || *a.DestructiveHint || !a.IdempotentHint || *a.OpenWorldHint {
		t.Fatalf("read's hints: %+v", a)
	}
	f.emit(paddock.EventAccessGranted, func(c *paddock.Capabilities) {
		c.Tools = append(c.Tools, paddock.ToolCapability{Name: "write"})
		c.NetCeiling = "allow=example.com"
	})
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no tools/list_changed after a grant")
	}
	tools = listed(t, cs)
	if tools["write"] == nil || !*tools["exec"].Annotations.OpenWorldHint || tools["write"].Annotations.ReadOnlyHint || !*tools["write"].Annotations.DestructiveHint {
		t.Fatalf("after the grant: %+v", tools)
	}
	// The grant's changes may have been told in more than one
	// notification (the SDK tells changes 10 ms apart separately, and a
	// loaded machine spaces them so): all of them are in before the next
	// check.
	for quiet := false; !quiet; {
		select {
		case <-changed:
		case <-time.After(500 * time.Millisecond):
			quiet = true
		}
	}
	// A tool call's event changes nothing in the list.
	f.emit(paddock.EventToolCall, nil)
	select {
	case <-changed:
		t.Fatal("tools/list_changed after a tool call")
	case <-time.After(100 * time.Millisecond):
	}
}

// TestEveryPropertyDescribed: every input property of every tool a run
// can be offered (the working tools, the control tools, a flow's menu
// events), nested ones too, says what it is: a model reads nothing else.
func TestEveryPropertyDescribed(t *testing.T) {
	f := newFake(slices.Sorted(maps.Keys(toolDefs))...)
	f.caps.NetCeiling = "allow=example.com"
	f.caps.Menu = &paddock.Menu{Flow: "f-1", State: "reviewing", Items: []paddock.MenuItem{{Event: "request_changes", Guarded: true, Findings: true}}}
	_, cs := connect(t, f, nil)
	tools := listed(t, cs)
	if len(tools) != len(toolDefs)+1 {
		t.Fatalf("listed %d tools, want every one of %d and the menu's", len(tools), len(toolDefs))
	}
	var walk func(tool, at string, s map[string]any)
	walk = func(tool, at string, s map[string]any) {
		if props, ok := s["properties"].(map[string]any); ok {
			for name, p := range props {
				ps, _ := p.(map[string]any)
				if d, _ := ps["description"].(string); strings.TrimSpace(d) == "" {
					t.Errorf("%s: property %s%s has no description", tool, at, name)
				}
				walk(tool, at+name+".", ps)
			}
		}
		if items, ok := s["items"].(map[string]any); ok {
			walk(tool, strings.TrimSuffix(at, ".")+"[].", items)
		}
	}
	for name, tl := range tools {
		b, _ := json.Marshal(tl.InputSchema)
		var s map[string]any
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: schema %s: %v", name, b, err)
		}
		walk(name, "", s)
	}
}

// TestExecProgressAndNetwork: exec's output arrives as progress, in order,
// and the result holds it; the command gets the run's network, and the
// call is the agent's.
func TestExecProgressAndNetwork(t *testing.T) {
	f := newFake("exec")
	f.caps.NetCeiling = "allow=example.com"
	var mu sync.Mutex
	var got []string
	_, cs := connect(t, f, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		got = append(got, r.Params.Message+"@"+r.Params.Meta["paddock/stream"].(string))
		mu.Unlock()
	}})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Meta: mcp.Meta{"progressToken": 7}, Arguments: map[string]any{"argv": []string{"make"}}})
	if err != nil || res.IsError {
		t.Fatalf("exec: %+v %v", res, err)
	}
	var r paddock.ExecResult
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &r)
	if r.Stdout != "one\nthree\n" || r.Stderr != "two\n" || r.OutputEncoding != "utf-8" {
		t.Fatalf("result: %s", b)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 3 || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, []string{"one\n@stdout", "two\n@stderr", "three\n@stdout"}) {
		t.Fatalf("progress: %q", got)
	}
	// No network is asked unless the call asks: the daemon gives none then
	// (lifecycle's agentExec) and holds a request to the ceiling.
	if !slices.Equal(f.calls, []string{"exec make net= agent=yes"}) {
		t.Fatalf("calls: %q", f.calls)
	}
	f.calls = nil
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"argv": []string{"true"}, "net": "allow=example.com"}}); err != nil || res.IsError {
		t.Fatalf("exec with a network: %+v %v", res, err)
	}
	if !slices.Equal(f.calls, []string{"exec true net=allow=example.com agent=yes"}) {
		t.Fatalf("calls: %q", f.calls)
	}
	// The agent does not pick a degraded sandbox.
	for _, args := range []map[string]any{{"argv": []string{"true"}, "allow_degraded": true}} {
		res, _ := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: args})
		if !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "bad_request: exec: invalid arguments") {
			t.Fatalf("exec %v: %+v", args, res)
		}
	}
}

// TestExecEmptyArgv: exec with no command (argv empty, null or missing)
// is the caller's mistake: bad_request, naming argv, and nothing reaches
// the daemon.
func TestExecEmptyArgv(t *testing.T) {
	f := newFake("exec")
	_, cs := connect(t, f, nil)
	for _, args := range []map[string]any{{"argv": []string{}}, {"argv": nil}, {}} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: args})
		if err != nil || res == nil || !res.IsError {
			t.Fatalf("exec %v: %+v %v", args, res, err)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; !strings.HasPrefix(text, "bad_request: ") || !strings.Contains(text, "argv") {
			t.Errorf("exec %v: %q, want bad_request naming argv", args, text)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var e paddock.Error
		if json.Unmarshal(b, &e) != nil || e.Code != paddock.CodeBadRequest || e.Details["key"] != "argv" {
			t.Errorf("exec %v: structured %s", args, b)
		}
	}
	if len(f.calls) != 0 {
		t.Fatalf("an exec with no command reached the daemon: %q", f.calls)
	}
}

// TestExecEnforcementSummary: exec's result gives the model a short
// summary of the enforcement (the whole record is the run's
// sandbox.enforced event's), with the network spelled as exec's net
// asks and times as durations; the rest of the result is the API's.
func TestExecEnforcementSummary(t *testing.T) {
	f := newFake("exec")
	f.enf = paddock.Enforcement{Namespaces: []string{"user", "mnt", "pid", "net", "ipc", "uts"}, UID: 65534, Landlock: 6, Seccomp: true, NoNewPrivs: true,
		Caps: "none", Net: "allow", Allow: []string{"example.com", "proxy.golang.org"}, AllowAddrs: []string{"127.0.0.1/32"},
		ReadOnly: true, Scratch: true, ReadOnlyIn: []string{".git", ".claude/settings.json", ".envrc"}, Unprotected: []string{"**/*.key: a wildcard"},
		Limits:     paddock.CommandLimits{Wall: 10 * time.Minute, CPU: 90 * time.Second, Procs: 512, Memory: 8 << 30, FileSize: 1 << 30, Output: 8 << 20, Tmp: 512 << 20},
		ProcsScope: "command", Disk: "run quota 10737418240 bytes", Degraded: []string{"seccomp: x"}, Mode: "resident", HarnessPID: 4242, OwnNet: false}
	_, cs := connect(t, f, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"argv": []string{"make"}}})
	if err != nil || res.IsError {
		t.Fatalf("exec: %+v %v", res, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var got struct {
		ExitCode    *int            `json:"exit_code"`
		Stdout      string          `json:"stdout"`
		Enforcement json.RawMessage `json:"enforcement"`
	}
	if err := json.Unmarshal(b, &got); err != nil || got.ExitCode == nil || got.Stdout != "one\nthree\n" {
		t.Fatalf("result %s: %v", b, err)
	}
	same := func(got json.RawMessage, want string) bool {
		var g, w any
		return json.Unmarshal(got, &g) == nil && json.Unmarshal([]byte(want), &w) == nil && reflect.DeepEqual(g, w)
	}
	want := `{"mode":"resident","net":"allow=example.com,proxy.golang.org","read_only":true,"scratch_layer":true,"landlock_abi":6,"seccomp":true,` +
		`"limits":{"wall":"10m0s","cpu":"1m30s","procs":512,"memory":8589934592,"file_size":1073741824,"output":8388608,"tmp":536870912},` +
		`"disk":"run quota 10737418240 bytes","degraded":["seccomp: x"]}`
	if !same(got.Enforcement, want) {
		t.Fatalf("enforcement %s\nwant        %s", got.Enforcement, want)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; strings.Contains(text, "namespaces") || strings.Contains(text, "harness_pid") {
		t.Fatalf("the text holds the whole record: %s", text)
	}
	f.enf = paddock.Enforcement{Net: "none", Landlock: 6, Seccomp: true, Mode: "per-exec"}
	res, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"argv": []string{"true"}}})
	b, _ = json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &got)
	want = `{"mode":"per-exec","net":"none","landlock_abi":6,"seccomp":true,"limits":{"wall":"0s","cpu":"0s","procs":0,"memory":0,"file_size":0,"output":0,"tmp":0}}`
	if !same(got.Enforcement, want) {
		t.Fatalf("a command with no network: enforcement %s\nwant %s", got.Enforcement, want)
	}
}

// TestErrorShape: a refusal's text is its code and one line, with the
// rule; the error itself is the structured content.
func TestErrorShape(t *testing.T) {
	_, cs := connect(t, newFake("read"), nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": "../x"}})
	if err != nil || !res.IsError || len(res.Content) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != `forbidden: the path "../x" leaves the workspace (rule escape)` {
		t.Fatalf("text %q", got)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if string(b) != `{"code":"forbidden","details":{"path":"../x","rule":"escape"},"message":"the path \"../x\"\nleaves the workspace"}` {
		t.Fatalf("structured %s", b)
	}
}

// TestDiffSummaryThenDiff: diff's text is one line per entry with its
// risks, then the diff; its structured content has no diff.
func TestDiffSummaryThenDiff(t *testing.T) {
	_, cs := connect(t, newFake("diff"), nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "diff", Arguments: map[string]any{}})
	if err != nil || res.IsError || len(res.Content) != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, ".github/workflows/ci.yml  [ci]") || !strings.Contains(got, "sha256:ab") {
		t.Fatalf("summary %q", got)
	}
	if got := res.Content[1].(*mcp.TextContent).Text; got != "diff --git a/x b/x\n+hello\n" {
		t.Fatalf("diff %q", got)
	}
	if b, _ := json.Marshal(res.StructuredContent); strings.Contains(string(b), "+hello") {
		t.Fatalf("structured %s", b)
	}
}

// TestClosedRun: a run rejected while a session is open: the list
// empties (with list_changed), every call gets the reason, resources too.
func TestClosedRun(t *testing.T) {
	f := newFake("read", "capabilities")
	changed := make(chan struct{}, 8)
	srv, cs := connect(t, f, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	f.emit(paddock.TransitionEvent, func(c *paddock.Capabilities) { c.State = paddock.StateRejected; c.Tools = c.Tools[1:] })
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no tools/list_changed after the reject")
	}
	if tools := listed(t, cs); len(tools) != 0 || srv.Closed() == nil {
		t.Fatalf("a rejected run lists %v", tools)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "capabilities", Arguments: map[string]any{}})
	if err != nil || !res.IsError || res.Content[0].(*mcp.TextContent).Text != "conflict: run r-1 is rejected: it takes no more calls, and its MCP server lists no tools" {
		t.Fatalf("a call on a rejected run: %+v %v", res, err)
	}
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "paddock://runs/r-1/events"}); err == nil || !strings.Contains(err.Error(), "rejected") {
		t.Fatalf("a resource of a rejected run: %v", err)
	}
}

// TestResourcesUpdated: a subscribed resource hears of new events.
func TestResourcesUpdated(t *testing.T) {
	f := newFake("read")
	updated := make(chan string, 8)
	_, cs := connect(t, f, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI }})
	ctx := context.Background()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "paddock://runs/r-1/changeset"}); err != nil {
		t.Fatal(err)
	}
	// A subscription may be a listen stream the client opens on its own
	// (the 2026-07-28 protocol): new events come until it hears one.
	deadline := time.After(5 * time.Second)
wait:
	for {
		f.emit(paddock.EventToolCall, nil)
		select {
		case uri := <-updated:
			if uri != "paddock://runs/r-1/changeset" {
				t.Fatalf("updated %s", uri)
			}
			break wait
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no resources/updated")
		}
	}
	r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "paddock://runs/r-1/events"})
	if err != nil || !strings.Contains(r.Contents[0].Text, `"type":"tool.call"`) {
		t.Fatalf("events: %+v %v", r, err)
	}
}

// TestHandlerKeepsRunsApart: the HTTP handler has a server per run, made
// on its first request; a run that does not exist gets none.
func TestHandlerKeepsRunsApart(t *testing.T) {
	f := newFake("read")
	h := NewHandler(Config{Runs: fakeRuns{f}, Broker: fakeBroker{fakeRun: f}}) // what listing tools takes
	defer h.Close()
	mux := http.NewServeMux()
	mux.Handle("/v1/runs/{id}/mcp", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/v1/runs/r-1/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tools := listed(t, cs); len(tools) != 1 {
		t.Fatalf("tools %v", tools)
	}
	// r-1's session is not r-2's: its id reaches nothing there.
	req, _ := http.NewRequest("POST", srv.URL+"/v1/runs/r-2/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("r-1's session on r-2: %d", resp.StatusCode)
	}
	cs.Close()
}

func (f fakeFlows) PickEvent(ctx context.Context, id, event string, req paddock.MenuEventRequest) (*paddock.Flow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("pick %s head=%s findings=%v agent=%v", event, req.Head, req.Findings, paddock.AgentCall(ctx)))
	if event == "stale" {
		return nil, paddock.Errorf(paddock.CodeConflict, "the change set under review moved")
	}
	return &paddock.Flow{ID: "f-1", State: "awaiting_approval"}, nil
}

// TestMenuTools: a flow's menu is offered as tools while it is on the
// menu (a guarded event requires head, a findings event findings), a
// pick goes to the daemon as the agent's, and a state change lists again.
func TestMenuTools(t *testing.T) {
	f := newFake("read")
	f.caps.Menu = &paddock.Menu{Flow: "f-1", State: "reviewing", Head: "sha256:ab", Items: []paddock.MenuItem{
		{Event: "approve", Guarded: true}, {Event: "request_changes", Guarded: true, Findings: true}, {Event: "read"}}}
	changed := make(chan struct{}, 8)
	_, cs := connect(t, f, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	tools := listed(t, cs)
	if tools["approve"] == nil || tools["request_changes"] == nil || len(tools) != 3 {
		t.Fatalf("listed %v", tools)
	}
	schema, _ := json.Marshal(tools["request_changes"].InputSchema)
	if !strings.Contains(string(schema), `"required":["head","findings"]`) {
		t.Fatalf("request_changes' schema: %s", schema)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "approve", Arguments: map[string]any{"head": "sha256:ab"}})
	if err != nil || res.IsError {
		t.Fatalf("approve: %+v %v", res, err)
	}
	res, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "approve", Arguments: map[string]any{"head": "x", "approved": true}})
	if !res.IsError {
		t.Fatal("an unknown argument was taken")
	}
	f.mu.Lock()
	calls := slices.Clone(f.calls)
	f.mu.Unlock()
	if !slices.Equal(calls, []string{"pick approve head=sha256:ab findings=[] agent=true"}) {
		t.Fatalf("calls: %q", calls)
	}
	// The flow moves on: the menu empties, the tools go.
	f.emit(paddock.EventFlowState, func(c *paddock.Capabilities) {
		c.Menu = &paddock.Menu{Flow: "f-1", State: "awaiting_approval", Items: []paddock.MenuItem{}}
	})
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no tools/list_changed after the flow moved")
	}
	if tools := listed(t, cs); len(tools) != 1 || tools["read"] == nil {
		t.Fatalf("after the flow moved: %v", tools)
	}
}

// TestToolNamesAreNoWorkflowEvents: every tool the MCP server may offer
// is a name a workflow's event may not take; otherwise the server drops
// that event from the menu it lists (a clash) and an MCP agent can never
// pick it.
func TestToolNamesAreNoWorkflowEvents(t *testing.T) {
	for name := range toolDefs {
		if !broker.Known(name) {
			t.Errorf("tool %s is offered over MCP but a workflow may name an event %s", name, name)
		}
	}
}
