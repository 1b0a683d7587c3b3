// Package mcpserver serves one run to an agent over the Model Context
// Protocol: the tools the run's capabilities offer now (the working tools,
// exec, diff, submit, verify, capabilities, request_access), the run's
// change set and event log as resources, and the notifications that keep
// an agent's view current (tools/list_changed after a grant or a state
// change, resources/updated when new events arrive, an exec's output as
// progress).
//
// It is built once, here, for both transports: `paddock mcp RUN` serves it
// on stdio as a client of the daemon (client.Client), and the daemon
// serves it at /v1/runs/{id}/mcp over streamable HTTP from its
// lifecycle.Manager (Handler). Either way every call is a call of
// paddock.Service (through the narrow interfaces of services.go), so it
// passes through the broker like any other.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/strictjson"
	"github.com/paddock-dev/paddock/tools"
)

// CallTool runs one of a run's working tools with its arguments (one JSON
// object) and returns its answer as JSON. client.Client and the daemon's
// Manager each have one, with their own types around it.
type CallTool func(ctx context.Context, id, name string, args json.RawMessage) (json.RawMessage, error)

// Config is what a run's server is made from.
type Config struct {
	// The services the server calls (services.go): the daemon's
	// Manager's, or a client.Client of it in each. All are needed.
	Runs     Runs
	Broker   Broker
	Changes  Changes
	Verifier Verifier
	Flows    Flows
	// CallTool runs a working tool (paddock.Service has no such call: the
	// API and the Manager type their tools differently).
	CallTool CallTool
	// Version is paddock's, as the server names itself.
	Version string
	Logger  *slog.Logger
}

// Resource URIs of a run.
func changeSetURI(id string) string { return "paddock://runs/" + id + "/changeset" }
func diffURI(id string) string      { return "paddock://runs/" + id + "/changeset.diff" }
func eventsURI(id string) string    { return "paddock://runs/" + id + "/events" }

// Server is the MCP server of one run.
type Server struct {
	cfg Config
	run string
	srv *mcp.Server

	mu      sync.Mutex
	offered []string // the tools listed now, by name
	net     string   // the most network the run's commands may ask for
	// menu is the run's flow's menu now, by event: each is a tool too.
	menu   map[string]paddock.MenuItem
	closed error // not nil: the run takes no more calls (rejected, cleaned)

	cancel context.CancelFunc
	done   chan struct{}
}

// New makes run id's server from its capabilities now, and watches the
// run's events to keep it current until Close. A run that does not exist
// is an error; a rejected or cleaned one is served, listing no tools and
// answering every call with an error that says why.
func New(ctx context.Context, cfg Config, id string) (*Server, error) {
	ctx = paddock.WithAgent(ctx)
	r, err := cfg.Runs.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, run: r.ID, done: make(chan struct{})}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "paddock", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: "These tools act on paddock run " + r.ID + ": its workspace, confined; every call is checked against the run's agent definition and recorded. " +
			"capabilities says what the run may do now; request_access asks for more. The tool list changes when a grant or the run's state changes it.",
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{Subscribe: true, ListChanged: true},
		},
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	s.srv.AddReceivingMiddleware(s.whileOpen)
	for _, res := range []*mcp.Resource{
		{URI: changeSetURI(r.ID), Name: "changeset", MIMEType: "application/json",
			Description: "The run's change set now: its entries with their risk labels, the hash a review binds to, and the masked unified diff."},
		{URI: diffURI(r.ID), Name: "changeset.diff", MIMEType: "text/x-diff",
			Description: "The run's change set now as a unified diff, masked (secrets and credentials)."},
		{URI: eventsURI(r.ID), Name: "events", MIMEType: "application/json",
			Description: "The run's event log: every tool call, command, grant and state change, in order."},
	} {
		s.srv.AddResource(res, s.readResource)
	}
	s.refresh(ctx)
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go s.watch(wctx, r.LastSeq)
	return s, nil
}

// whileOpen is the first thing every call meets: it marks the call as the
// run's agent's (an MCP session serves the agent, whoever authenticated
// it), and answers every call on a closed run with the reason, listing
// nothing: an agent whose run was rejected learns why on its next call.
func (s *Server) whileOpen(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ctx = paddock.WithAgent(ctx)
		closed := s.Closed()
		if closed == nil {
			return next(ctx, method, req)
		}
		switch method {
		case "tools/call":
			return errorResult(closed, s.cfg.Logger), nil
		case "tools/list":
			return &mcp.ListToolsResult{Tools: []*mcp.Tool{}}, nil
		case "resources/list":
			return &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}, nil
		case "resources/read", "resources/subscribe", "resources/templates/list":
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: oneLine(closed)}
		}
		return next(ctx, method, req)
	}
}

// MCP is the SDK's server, for a transport to serve.
func (s *Server) MCP() *mcp.Server { return s.srv }

// Close stops watching the run's events and waits until the watch ended.
func (s *Server) Close() {
	s.cancel()
	<-s.done
}

// Closed reports why the run takes no more calls, or nil.
func (s *Server) Closed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Offered lists the tools the server lists now.
func (s *Server) Offered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.offered)
}

// closedStates: a run in one of them has no workspace and takes no more
// calls; its server lists nothing.
var closedStates = []paddock.WorkspaceState{paddock.StateRejected, paddock.StateCleanupPending, paddock.StateCleaned, paddock.StateOrphaned}

// refresh lists the tools the run's capabilities offer now: each added or
// removed sends tools/list_changed to the sessions.
func (s *Server) refresh(ctx context.Context) {
	// Paddock's own read, on the agent's behalf: an agent not granted the
	// capabilities tool is still offered the tools it is granted.
	caps, err := s.cfg.Broker.Capabilities(paddock.WithoutAgent(ctx), s.run)
	var closed error
	switch {
	case err != nil && (paddock.IsCode(err, paddock.CodeNotFound) || paddock.IsCode(err, paddock.CodeConflict)):
		closed = err
	case err != nil:
		s.cfg.Logger.Warn("mcp: cannot read the run's capabilities", "run", s.run, "err", err)
		return
	case slices.Contains(closedStates, caps.State):
		closed = paddock.Errorf(paddock.CodeConflict, "run %s is %s: it takes no more calls, and its MCP server lists no tools", s.run, caps.State)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if closed != nil {
		s.closed = closed
		if len(s.offered) > 0 {
			s.srv.RemoveTools(s.offered...)
			s.offered = nil
		}
		return
	}
	var want []string
	for _, tc := range caps.Tools {
		if _, ok := toolDefs[tc.Name]; ok {
			want = append(want, tc.Name)
		}
	}
	// The flow's menu: its events are tools while they are on it.
	menu := map[string]paddock.MenuItem{}
	if caps.Menu != nil {
		for _, it := range caps.Menu.Items {
			if _, clash := toolDefs[it.Event]; !clash {
				menu[it.Event] = it
				want = append(want, it.Event)
			}
		}
	}
	menuChanged := !maps.Equal(menu, s.menu)
	s.menu = menu
	var gone []string
	for _, name := range s.offered {
		if !slices.Contains(want, name) {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
	}
	netChanged := s.net != caps.NetCeiling
	s.net = caps.NetCeiling
	for _, name := range want {
		if it, ok := menu[name]; ok {
			if !slices.Contains(s.offered, name) || menuChanged {
				s.srv.AddTool(menuTool(it), s.menuHandler(name))
			}
			continue
		}
		if slices.Contains(s.offered, name) && !(name == paddock.ToolExec && netChanged) {
			continue
		}
		s.srv.AddTool(s.tool(name), s.handler(name))
	}
	s.offered = want
}

// watch follows the run's events from seq after: new events update the
// resources a session subscribed to, and those that can change what the
// run is offered (a grant, a state change) make the server list again.
func (s *Server) watch(ctx context.Context, after int64) {
	defer close(s.done)
	if s.Closed() != nil {
		return
	}
	for ctx.Err() == nil {
		evs, err := s.cfg.Runs.WaitEvents(ctx, s.run, after, 500)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.cfg.Logger.Debug("mcp: cannot follow the run's events", "run", s.run, "err", err)
			if paddock.IsCode(err, paddock.CodeNotFound) {
				s.refresh(ctx)
				return // the run is gone
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if len(evs) == 0 {
			continue
		}
		again := false
		for _, e := range evs {
			after = max(after, e.Seq)
			switch e.Type {
			case paddock.EventAccessGranted, paddock.EventAccessDenied, paddock.TransitionEvent, paddock.EventRunRemoved,
				paddock.EventResumed, paddock.EventCheckpoint, paddock.EventSubmitted, paddock.EventApproved, paddock.EventApplied,
				paddock.EventFlowState:
				again = true
			}
		}
		if again {
			s.refresh(ctx)
		}
		if s.Closed() != nil {
			return // nothing changes a closed run any more
		}
		for _, uri := range []string{eventsURI(s.run), changeSetURI(s.run), diffURI(s.run)} {
			s.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
		}
	}
}

func (s *Server) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	switch req.Params.URI {
	case eventsURI(s.run), changeSetURI(s.run), diffURI(s.run):
		return nil
	}
	return mcp.ResourceNotFoundError(req.Params.URI)
}

func (s *Server) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	var text, mime string
	switch uri {
	case changeSetURI(s.run), diffURI(s.run):
		cs, err := s.cfg.Changes.ChangeSet(ctx, s.run)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: oneLine(err)}
		}
		if uri == diffURI(s.run) {
			text, mime = cs.Diff, "text/x-diff"
			if cs.DiffOmitted {
				text = fmt.Sprintf("# the diff (%d bytes) is larger than an answer carries; the operator reads it whole (paddock diff %s)\n", cs.DiffSize, s.run)
			}
			break
		}
		b, err := json.Marshal(cs)
		if err != nil {
			return nil, err
		}
		text, mime = string(b), "application/json"
	case eventsURI(s.run):
		evs, err := s.events(ctx)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: oneLine(err)}
		}
		b, err := json.Marshal(evs)
		if err != nil {
			return nil, err
		}
		text, mime = string(b), "application/json"
	default:
		return nil, mcp.ResourceNotFoundError(uri)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: text}}}, nil
}

// maxEvents bounds the event log a read returns: the latest ones.
const maxEvents = 10000

func (s *Server) events(ctx context.Context) ([]*paddock.Event, error) {
	out := []*paddock.Event{}
	var after int64
	for {
		evs, err := s.cfg.Runs.Events(ctx, s.run, after, 1000)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
		if len(out) > maxEvents {
			out = out[len(out)-maxEvents:]
		}
		if len(evs) == 0 {
			return out, nil
		}
		after = evs[len(evs)-1].Seq
	}
}

// toolDef is how a tool is described to an agent.
type toolDef struct {
	description string
	schema      json.RawMessage
	// the MCP hints: readOnly, destructive, idempotent (openWorld is
	// exec's alone, with a network).
	readOnly, destructive, idempotent bool
}

// toolDefs are the tools the server can offer, by name.
var toolDefs = map[string]toolDef{}

func init() {
	hints := map[string][3]bool{ // readOnly, destructive, idempotent
		"read": {true, false, true}, "glob": {true, false, true}, "grep": {true, false, true}, "list": {true, false, true}, "stat": {true, false, true},
		"write": {false, true, true}, "edit": {false, true, false}, "move": {false, true, false}, "delete": {false, true, true},
	}
	for _, t := range tools.Offered(paddock.AccessWrite) {
		h, ok := hints[t.Name]
		if !ok {
			h = [3]bool{!t.Writes, t.Writes, false}
		}
		toolDefs[t.Name] = toolDef{description: t.Description, schema: t.Schema, readOnly: h[0], destructive: h[1], idempotent: h[2]}
	}
	for _, ct := range controlTools {
		toolDefs[ct.name] = toolDef{description: ct.description, schema: json.RawMessage(ct.schema), readOnly: ct.readOnly, destructive: ct.destructive, idempotent: ct.idempotent}
	}
}

// controlTools are the control tools, with their input schemas.
var controlTools = []struct {
	name, description, schema         string
	readOnly, destructive, idempotent bool
}{
	{paddock.ToolExec, "Run a command in this run's workspace, confined by the sandbox (its own namespaces, Landlock, seccomp, limits) with no network unless it asks: net may ask for allow=DOMAIN,… (or host) within the net_ceiling capabilities shows. argv is the command, no shell unless you name one. Its output comes as progress notifications while it runs when the call carries a progress token; the result holds the exit code, the output (masked) and a summary of what the sandbox enforced (mode, net, read_only, landlock_abi, seccomp, limits, disk, degraded; capabilities has the whole record).",
		`{"type":"object","additionalProperties":false,"required":["argv"],"properties":{"argv":{"type":"array","minItems":1,"items":{"type":"string"},"description":"the command and its arguments, such as [\"go\",\"test\",\"./...\"]; no shell unless you name one ([\"sh\",\"-c\",\"…\"])"},"net":{"type":"string","description":"none (the default), allow=DOMAIN,… or host: at most what capabilities' net_ceiling gives"},"dir":{"type":"string","description":"working directory, relative to the workspace root"},"env":{"type":"array","items":{"type":"string"},"description":"KEY=VALUE pairs added to the command's environment"},"timeout":{"type":"string","description":"wall time limit such as 2m"},"stdin":{"type":"string","description":"text the command reads on standard input"},"limits":{"type":"object","additionalProperties":false,"description":"lower limits for this command (never above the run's: capabilities shows them)","properties":{"cpu":{"type":"string","description":"CPU time such as 30s"},"procs":{"type":"integer","description":"most processes at once"},"memory":{"type":"integer","description":"address space, bytes"},"file_size":{"type":"integer","description":"largest file it may write, bytes"},"output":{"type":"integer","description":"bytes kept of stdout and of stderr each"},"tmp":{"type":"integer","description":"size of its /tmp, bytes"}}}}}`,
		false, true, false},
	{paddock.ToolDiff, "This run's change set now: every entry with its risk labels (what a reviewer looks at twice) and whether it is never applied, the hash a review binds to, and the unified diff, masked.",
		`{"type":"object","additionalProperties":false,"properties":{}}`,
		true, false, true},
	{paddock.ToolSubmit, "Submit this run's change set for review: it is frozen under its hash. With expect_hash, only if the change set is still the one with that hash (the one diff showed).",
		`{"type":"object","additionalProperties":false,"properties":{"expect_hash":{"type":"string","description":"the change set's hash as diff showed it: submit only if it is still that"}}}`,
		false, false, true},
	{paddock.ToolVerify, "Run the project's checks (build, test, lint, format-check: those its manifest declares, read from the base revision) in this run's sandbox; pick checks by name, never a command; none named runs build, lint and test. The result is tied to the change set's hash.",
		`{"type":"object","additionalProperties":false,"properties":{"checks":{"type":"array","items":{"type":"string","enum":["build","test","lint","format-check"]},"description":"the checks to run, by name; none runs build, lint and test"}}}`,
		false, false, true},
	{paddock.ToolCapabilities, "What this run may do now: the tools offered and how they are narrowed, the network, limits, environment, the checks verify runs, the grants and pending requests, and what the sandbox enforced. Derived from the agent's definition and grants, never from prose.",
		`{"type":"object","additionalProperties":false,"properties":{}}`,
		true, false, true},
	{paddock.ToolPlan, "Give your plan for this run: the steps you mean to take, each pending, in_progress (at most one) or completed, and why if it helps. Each call replaces the plan whole; call it again as steps are done or the plan changes. A reviewer reads it beside your change set; it grants nothing.",
		`{"type":"object","additionalProperties":false,"required":["steps"],"properties":{"explanation":{"type":"string","maxLength":8192,"description":"why this plan, if it helps a reviewer"},"steps":{"type":"array","minItems":1,"maxItems":100,"description":"the whole plan, in order; it replaces the last one","items":{"type":"object","additionalProperties":false,"required":["step","status"],"properties":{"step":{"type":"string","maxLength":1000,"description":"what this step does, in a line"},"status":{"type":"string","enum":["pending","in_progress","completed"],"description":"where it stands: at most one step in_progress"}}}}}}`,
		false, false, false},
	{paddock.ToolRequestAccess, "Ask for more than this run's definition grants: a tool, a command (an argv prefix for exec), a path (for a writing tool), a network domain or a limit, with the reason. The request stays pending until a person or the orchestrator decides; the tool list changes when a grant adds a tool, and capabilities shows it granted or denied.",
		`{"type":"object","additionalProperties":false,"required":["kind","reason"],"properties":{"kind":{"type":"string","enum":["tool","command","path","network","limit"],"description":"what is asked for; each kind needs its own fields"},"tool":{"type":"string","description":"kind tool: the tool asked for; kind path: the writing tool (write, edit, move, delete) the path is for"},"command":{"type":"array","items":{"type":"string"},"description":"kind command: the command's first words (an argv prefix), such as [\"go\",\"test\"]"},"path":{"type":"string","description":"kind path: a glob inside the workspace, such as docs/**"},"domain":{"type":"string","description":"kind network: one domain, such as proxy.golang.org"},"limit":{"type":"string","enum":["timeout","cpu","procs","memory","file_size","output","tmp"],"description":"kind limit: which limit"},"value":{"type":"string","description":"kind limit: the value asked for, a duration such as 30m for timeout and cpu, else a number"},"reason":{"type":"string","description":"why the work needs it, for the person who decides"}}}`,
		false, false, false},
}

// tool is name's MCP description; called with s.mu held.
func (s *Server) tool(name string) *mcp.Tool {
	d := toolDefs[name]
	openWorld := name == paddock.ToolExec && s.net != "" && s.net != "none"
	destructive := d.destructive
	return &mcp.Tool{Name: name, Description: d.description, InputSchema: d.schema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: d.readOnly, DestructiveHint: &destructive, IdempotentHint: d.idempotent, OpenWorldHint: &openWorld}}
}

// handler answers calls of name.
func (s *Server) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.Params.Arguments
		if len(bytes.TrimSpace(args)) == 0 || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		var res any
		var err error
		switch name {
		case paddock.ToolExec:
			return s.exec(ctx, req, args)
		case paddock.ToolDiff:
			if err = tools.Decode(name, args, &struct{}{}); err == nil {
				var cs *paddock.ChangeSet
				if cs, err = s.cfg.Changes.ChangeSet(ctx, s.run); err == nil {
					return diffResult(cs), nil
				}
			}
		case paddock.ToolSubmit:
			var in paddock.SubmitRequest
			if err = tools.Decode(name, args, &in); err == nil {
				var cs *paddock.ChangeSet
				if cs, err = s.cfg.Changes.SubmitExpecting(ctx, s.run, in.ExpectHash); err == nil {
					res = summary(cs)
				}
			}
		case paddock.ToolVerify:
			var in paddock.VerifyRequest
			if err = tools.Decode(name, args, &in); err == nil {
				res, err = s.cfg.Verifier.Verify(ctx, s.run, in)
			}
		case paddock.ToolCapabilities:
			if err = tools.Decode(name, args, &struct{}{}); err == nil {
				res, err = s.cfg.Broker.Capabilities(ctx, s.run)
			}
		case paddock.ToolRequestAccess:
			var in paddock.AccessRequestInput
			if err = tools.Decode(name, args, &in); err == nil {
				res, err = s.cfg.Broker.RequestAccess(ctx, s.run, in)
			}
		default: // a working tool
			var out json.RawMessage
			if out, err = s.cfg.CallTool(ctx, s.run, name, args); err == nil {
				return jsonResult(out), nil
			}
		}
		if err != nil {
			return errorResult(err, s.cfg.Logger), nil
		}
		out, err := json.Marshal(res)
		if err != nil {
			return errorResult(err, s.cfg.Logger), nil
		}
		return jsonResult(out), nil
	}
}

// execArgs are exec's arguments: what the agent may ask of a command. The
// network is its definition's and grants' (never its own choice), and a
// degraded sandbox is the operator's decision alone.
type execArgs struct {
	Argv    []string           `json:"argv"`
	Net     string             `json:"net"`
	Dir     string             `json:"dir"`
	Env     []string           `json:"env"`
	Timeout string             `json:"timeout"`
	Stdin   string             `json:"stdin"`
	Limits  paddock.ExecLimits `json:"limits"`
}

// maxKept is the output an exec's result keeps of each stream (what came
// as progress came whole).
const maxKept = 8 << 20

func (s *Server) exec(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*mcp.CallToolResult, error) {
	var in execArgs
	if err := tools.Decode(paddock.ToolExec, args, &in); err != nil {
		return errorResult(err, s.cfg.Logger), nil
	}
	// No command is the caller's mistake, whatever the broker would make
	// of it under a narrowed exec.
	if len(in.Argv) == 0 {
		return errorResult(paddock.Errorf(paddock.CodeBadRequest, "exec: invalid arguments: argv is empty: name the command to run, argv[0] first").WithDetail("key", "argv"), s.cfg.Logger), nil
	}
	// A command that asks for no network gets none; the daemon holds what
	// it asks to the agent's ceiling (lifecycle's agentExec and broker).
	er := paddock.ExecRequest{Argv: in.Argv, Net: in.Net, Dir: in.Dir, Env: in.Env, Timeout: in.Timeout, Limits: in.Limits}
	if in.Stdin != "" {
		er.Stdin = []byte(in.Stdin)
	}
	p := &progress{ctx: ctx, session: req.Session, token: req.Params.GetProgressToken()}
	res, err := s.cfg.Broker.ExecStream(ctx, s.run, er, p.writer("stdout", &p.stdout), p.writer("stderr", &p.stderr))
	if err != nil {
		return errorResult(err, s.cfg.Logger), nil
	}
	res.OutputEncoding = "utf-8"
	res.Stdout, res.Stderr = p.stdout.String(), p.stderr.String()
	if !utf8.ValidString(res.Stdout) || !utf8.ValidString(res.Stderr) {
		res.OutputEncoding = "base64"
		res.Stdout, res.Stderr = b64(p.stdout.Bytes()), b64(p.stderr.Bytes())
	}
	res.Truncated = res.Truncated || p.cut
	out, err := json.Marshal(execResult{ExecResult: res, Enforcement: summarize(res.Enforcement)})
	if err != nil {
		return errorResult(err, s.cfg.Logger), nil
	}
	return jsonResult(out), nil
}

// execResult is exec's answer to a model: the API's ExecResult with its
// enforcement record cut to a summary (the outer field hides the
// embedded one). The whole record stays in the run's sandbox.enforced
// event and in capabilities' enforcement.
type execResult struct {
	*paddock.ExecResult
	Enforcement enforcementSummary `json:"enforcement"`
}

// enforcementSummary is what a model needs of a command's confinement to
// read its outcome: how it was started, its network and workspace, the
// kernel's mechanisms, its limits, and what was degraded.
type enforcementSummary struct {
	Mode string `json:"mode,omitempty"` // resident or per-exec
	// Net is what the command got, spelled as exec's net asks: none,
	// allow=DOMAIN,… or host.
	Net string `json:"net"`
	// ReadOnly: the workspace was read-only; Scratch: shown through a
	// layer of the command's own, whose writes evaporated with it.
	ReadOnly    bool          `json:"read_only,omitempty"`
	Scratch     bool          `json:"scratch_layer,omitempty"`
	LandlockABI int           `json:"landlock_abi"`
	Seccomp     bool          `json:"seccomp"`
	Limits      limitsSummary `json:"limits"`
	Disk        string        `json:"disk,omitempty"`
	Degraded    []string      `json:"degraded,omitempty"`
	// HeldBy names, for each property of the confinement, the mechanisms
	// of this kernel that held it (empty: nothing did).
	HeldBy map[string][]string `json:"held_by,omitempty"`
}

// limitsSummary is a command's limits with times as durations ("10m0s")
// and sizes in bytes.
type limitsSummary struct {
	Wall     string `json:"wall"`
	CPU      string `json:"cpu"`
	Procs    int    `json:"procs"`
	Memory   int64  `json:"memory"`
	FileSize int64  `json:"file_size"`
	Output   int64  `json:"output"`
	Tmp      int64  `json:"tmp"`
	// CPUs is CPU bandwidth (a cgroup's cpu.max); MemoryCgroup says
	// Memory bounded memory used, in a cgroup, not address space.
	CPUs         float64 `json:"cpus,omitempty"`
	IOBps        int64   `json:"io_bps,omitempty"`
	MemoryCgroup bool    `json:"memory_cgroup,omitempty"`
}

func summarize(e paddock.Enforcement) enforcementSummary {
	net := e.Net
	if net == "allow" {
		net = "allow=" + strings.Join(e.Allow, ",")
	}
	l := e.Limits
	return enforcementSummary{Mode: e.Mode, Net: net, ReadOnly: e.ReadOnly, Scratch: e.Scratch, LandlockABI: e.Landlock, Seccomp: e.Seccomp,
		Limits: limitsSummary{Wall: l.Wall.String(), CPU: l.CPU.String(), Procs: l.Procs, Memory: l.Memory, FileSize: l.FileSize, Output: l.Output, Tmp: l.Tmp,
			CPUs: l.CPUs, IOBps: l.IOBps, MemoryCgroup: l.MemoryCgroup},
		Disk: e.Disk, Degraded: e.Degraded, HeldBy: heldBy(e.Holds)}
}

func heldBy(holds []paddock.Hold) map[string][]string {
	if len(holds) == 0 {
		return nil
	}
	m := make(map[string][]string, len(holds))
	for _, h := range holds {
		m[h.Property] = h.HeldBy
	}
	return m
}

// progress sends an exec's output as progress notifications, in order, as
// it comes, when the call carried a progress token; it keeps the output
// for the result.
type progress struct {
	ctx            context.Context
	session        *mcp.ServerSession
	token          any
	mu             sync.Mutex
	sent           int64
	stdout, stderr bytes.Buffer
	cut            bool
}

func (p *progress) writer(stream string, keep *bytes.Buffer) io.Writer {
	return writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if room := maxKept - keep.Len(); room < len(b) {
			keep.Write(b[:max(room, 0)])
			p.cut = true
		} else {
			keep.Write(b)
		}
		p.sent += int64(len(b))
		if p.token != nil && p.session != nil {
			p.session.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: float64(p.sent),
				Message: string(b), Meta: mcp.Meta{"paddock/stream": stream}})
		}
		return len(b), nil
	})
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// jsonResult is an answer: its JSON as text, and as structured content.
func jsonResult(out json.RawMessage) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}, StructuredContent: out}
}

// changeSetSummary is a change set without its diff.
type changeSetSummary struct {
	RunID        string                `json:"run_id"`
	BaseRevision string                `json:"base_revision"`
	Hash         string                `json:"hash"`
	Entries      []paddock.ChangeEntry `json:"entries"`
	DiffSize     int64                 `json:"diff_size"`
	DiffOmitted  bool                  `json:"diff_omitted,omitempty"`
	Ignored      []string              `json:"ignored,omitempty"`
}

func summary(cs *paddock.ChangeSet) changeSetSummary {
	e := cs.Entries
	if e == nil {
		e = []paddock.ChangeEntry{}
	}
	return changeSetSummary{RunID: cs.RunID, BaseRevision: cs.BaseRevision, Hash: cs.Hash, Entries: e, DiffSize: cs.DiffSize, DiffOmitted: cs.DiffOmitted, Ignored: cs.Ignored}
}

// diffResult is diff's answer: a summary a person reads (one line per
// entry with its risk labels) and the unified diff as text, the summary
// as structured content.
func diffResult(cs *paddock.ChangeSet) *mcp.CallToolResult {
	var b strings.Builder
	fmt.Fprintf(&b, "%d changed, hash %s (base %s)\n", len(cs.Entries), cs.Hash, cs.BaseRevision)
	for _, e := range cs.Entries {
		fmt.Fprintf(&b, "%-8s %s", e.Op, e.Path)
		if len(e.Risks) > 0 {
			fmt.Fprintf(&b, "  [%s]", strings.Join(e.Risks, ", "))
		}
		for _, r := range e.Risks {
			if n := e.Notes[r]; n != "" {
				fmt.Fprintf(&b, "  (%s: %s)", r, n)
			}
		}
		if e.Blocked != "" {
			fmt.Fprintf(&b, "  (never applied: %s)", e.Blocked)
		}
		b.WriteByte('\n')
	}
	content := []mcp.Content{&mcp.TextContent{Text: b.String()}}
	switch {
	case cs.DiffOmitted:
		content = append(content, &mcp.TextContent{Text: fmt.Sprintf("(the diff, %d bytes, is larger than an answer carries)\n", cs.DiffSize)})
	case cs.Diff != "":
		content = append(content, &mcp.TextContent{Text: cs.Diff})
	}
	return &mcp.CallToolResult{Content: content, StructuredContent: summary(cs)}
}

// errorResult is a refusal or failure as a tool error the agent reads:
// paddock's code and a one-line message first, then the rule that
// refused, and the error itself as structured content. An internal
// error's detail stays in the log.
func errorResult(err error, log *slog.Logger) *mcp.CallToolResult {
	var pe *paddock.Error
	if !errors.As(err, &pe) || pe.Code == paddock.CodeInternal {
		log.Error("mcp: a call failed", "err", err)
		pe = &paddock.Error{Code: paddock.CodeInternal, Message: "internal error (details are in the daemon log)"}
	}
	text := oneLine(pe)
	if pe.Rule != "" {
		text += " (rule " + string(pe.Rule) + ")"
	}
	structured := map[string]any{"code": pe.Code, "message": pe.Message}
	if d := pe.PublicDetails(); len(d) > 0 {
		structured["details"] = d
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: structured}
}

// oneLine is "code: message" on one line.
func oneLine(err error) string {
	msg := strings.Join(strings.Fields(paddock.ErrorMessage(err)), " ")
	return string(paddock.ErrorCode(err)) + ": " + msg
}

// menuTool is a flow event's tool: its arguments are the menu's (the head
// a guarded event carries, the findings a findings event carries).
func menuTool(it paddock.MenuItem) *mcp.Tool {
	desc := "Pick " + it.Event + " from this run's workflow menu"
	if it.Description != "" {
		desc += ": " + it.Description
	}
	desc += ". It moves the flow on; capabilities shows the menu and what you are given (the task, the change set under review, findings)."
	var required []string
	if it.Guarded {
		desc += " Give as head the hash of the change set you reviewed; if it moved since, the pick is refused."
		required = append(required, "head")
	}
	if it.Findings {
		desc += " Give your findings: what must change."
		required = append(required, "findings")
	}
	schema := map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
		"head":     map[string]any{"type": "string", "description": "the change-set hash you reviewed"},
		"findings": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "what must change, one finding each"},
		"note":     map[string]any{"type": "string", "description": "a note for the flow's log"},
	}}
	if len(required) > 0 {
		schema["required"] = required
	}
	f, t := false, true
	return &mcp.Tool{Name: it.Event, Description: desc, InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &f, IdempotentHint: false, OpenWorldHint: &f, ReadOnlyHint: false, Title: it.Event + " (workflow)"},
		Meta:        mcp.Meta{"paddock/menu": t}}
}

// menuHandler picks event from the run's menu.
func (s *Server) menuHandler(event string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.Params.Arguments
		if len(bytes.TrimSpace(args)) == 0 || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		var in paddock.MenuEventRequest
		if err := strictjson.Unmarshal(args, &in); err != nil {
			return errorResult(paddock.Errorf(paddock.CodeBadRequest, "%s: invalid arguments: %s", event, paddock.ErrorMessage(err)), s.cfg.Logger), nil
		}
		f, err := s.cfg.Flows.PickEvent(ctx, s.run, event, in)
		if err != nil {
			return errorResult(err, s.cfg.Logger), nil
		}
		out, err := json.Marshal(map[string]any{"flow": f.ID, "state": f.State, "round": f.Round, "ended": !f.Ended.IsZero()})
		if err != nil {
			return errorResult(err, s.cfg.Logger), nil
		}
		return jsonResult(out), nil
	}
}
