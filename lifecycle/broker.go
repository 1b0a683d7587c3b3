package lifecycle

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/agent"
	"github.com/paddock-dev/paddock/broker"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/sandbox"
	"github.com/paddock-dev/paddock/tools"
)

// Broker is the agent-call path: it judges each tool call and command an agent asks for, runs it, and records it.
type Broker struct {
	*kernel
	// the services it calls
	executor   *executor
	flows      *Flows
	forks      *Forks
	provenance *Provenance
	runs       *Runs
	verifier   *Verifier
	views      *views

	sandboxProbe sandboxProbe // whether a command can be confined here at all
	// drivers are the principals known to have driven a run here
	// ("RUN\x00PRINCIPAL"): run.driven is recorded once for each.
	drivers sync.Map
}

// Every tool call on a run, from every interface (the API, MCP, the CLI,
// jobs), passes through Manager.broker: definition → decision → run →
// redact → record → answer. The functions that reach a tool (callTool,
// execStream, runCommand, tools.Tool.Call) are called only from the run of
// a brokered call; TestNothingAroundTheBroker holds the code to that.

// brokered is one call: what the broker decides on, and how to run it.
type brokered struct {
	call broker.Call
	// args is what a refusal records of the call's arguments.
	args json.RawMessage
	// run does an allowed call. It returns the answer and the events that
	// record the call (recorded even when it fails), and says whether the
	// answer is masked already (exec masks its output as it streams).
	run func(ctx context.Context, c *callContext) (res any, evs []callEvent, err error)
	// declaredOrNot answers the call whether or not the run's definition
	// declares its tool (the read of what the run may do). Every other
	// rule holds.
	declaredOrNot bool
	// inWorkspace: the call works in the run's workspace (a tool, a
	// command), so the run's project is read with the run, in one look at
	// the store (callContext.project).
	inWorkspace bool
}

// callContext is what a brokered call's run gets: the run, its definition
// and grants as decided on, and the redactor of its secrets.
type callContext struct {
	run *paddock.Run
	// project is the run's, read with it for a call in its workspace; nil
	// otherwise, or if it could not be read (workspaceFor reads it again
	// and says why).
	project *paddock.Project
	def     *paddock.AgentDefinition
	grants  []*paddock.AccessRequest
	red     *redact.Redactor
	masked  bool // set by run when its answer is masked already
}

// callEvent is one event a call records.
type callEvent struct {
	typ  string
	data any
}

// broker decides a call on run id and, if it is allowed, runs it, masks
// its answer and records it. A denial is recorded too (a tool.call event
// with its decision and rule), and a call that needs approval becomes a
// pending access request.
func (br *Broker) broker(ctx context.Context, id string, b brokered) (_ any, err error) {
	stage := br.stages(b.call.Tool)
	release, err := br.forks.useRun(id) // a fork of the run waits for none (fork.go)
	if err != nil {
		return nil, err
	}
	defer release()
	ctx, unhold, err := br.holdExpect(ctx, id) // checked and recorded as one step (expect.go)
	if err != nil {
		return nil, err
	}
	defer unhold()
	if changesFiles(b.call.Tool) {
		// The last call's effects are its own: the look at the files after
		// it (which runs after its answer) first, and the run read after
		// it, as it is now (workspaceFor takes an active run as read here).
		br.provenance.settle(id)
	}
	stage(StageQueue)
	r, p, grants, err := br.runAndGrants(ctx, id, b.inWorkspace)
	if err != nil {
		return nil, err
	}
	stage(StageRead)
	// A keyed call's key is claimed while the run was read (httpapi's
	// gated routes): nothing of the call, not even a refusal's event, is
	// recorded or done before it is.
	if paddock.ClaimGated(ctx) {
		if err := paddock.AwaitClaim(ctx); err != nil {
			return nil, err
		}
		stage(StageClaim)
	}
	def := definitionOf(r)
	start := time.Now()
	ctx, end := br.span(ctx, "tool "+b.call.Tool, r, attribute.String("paddock.tool", b.call.Tool))
	v := broker.Decide(def, grants, b.call, broker.State{Access: r.Access, Workspace: r.State()})
	if b.declaredOrNot && v.Rule == broker.RuleUndeclared {
		v = broker.Verdict{Decision: paddock.DecisionAllow}
	}
	defer func() {
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("paddock.decision", string(v.Decision)), attribute.String("paddock.rule", string(v.Rule)))
		end(err)
		br.observer().ToolCall(b.call.Tool, r.Access, v.Decision, string(v.Rule), err, time.Since(start))
	}()
	if v.Decision != paddock.DecisionAllow {
		return nil, br.refuse(ctx, r, b, v)
	}
	cc := &callContext{run: r, project: p, def: def, grants: grants, red: br.redactor(r)}
	res, evs, callErr := b.run(ctx, cc)
	stage(StageCall)
	if len(evs) > 0 {
		var first string
		evs, first = br.driven(ctx, id, b.call.Tool, evs)
		seq, err := br.recordEventsSeq(ctx, id, maskEvents(cc.red, evs))
		stage(StageRecord)
		if err != nil {
			br.drivers.Delete(first) // not recorded: the next call says it
			if callErr == nil {
				return nil, err
			}
			br.log().Error("cannot record a failed call", "run", id, "tool", b.call.Tool, "err", err)
		} else if changesFiles(b.call.Tool) {
			// What the call did to the files, for diff --blame: a failed
			// command may have written too.
			br.provenance.trackEffects(ctx, r, seq, writtenBy(b.call)...)
		}
	}
	if callErr != nil {
		return nil, callErr
	}
	if cc.masked || res == nil {
		return res, nil
	}
	return redactValue(cc.red, res)
}

// stages times the stages of a call of tool through broker, each from
// the end of the last (Observer.CallStage).
func (br *Broker) stages(tool string) func(stage string) {
	o, last := br.observer(), time.Now()
	return func(stage string) {
		now := time.Now()
		o.CallStage(tool, stage, now.Sub(last))
		last = now
	}
}

// driven puts after a call's events, the first time a principal drives
// the run on this node (writes its files or runs a command in it; reading
// them, or verifying them, is a reviewer's work too), the event that says
// so, and the key it marked.
func (br *Broker) driven(ctx context.Context, id, tool string, evs []callEvent) ([]callEvent, string) {
	p := paddock.PrincipalOf(ctx)
	if p == "" || (tool != paddock.ToolExec && !slices.Contains(broker.WriteTools, tool)) {
		return evs, ""
	}
	key := id + "\x00" + p
	if _, seen := br.drivers.LoadOrStore(key, true); seen {
		return evs, ""
	}
	// After the call's own events: the first is the call's (its seq is
	// what diff --blame files the call's effects under).
	return append(evs, callEvent{paddock.EventRunDriven, map[string]string{"principal": p}}), key
}

// recordEvents appends a call's events in one transaction; a canceled
// call is still recorded.
func (br *Broker) recordEvents(ctx context.Context, id string, evs []callEvent) error {
	_, err := br.recordEventsSeq(ctx, id, evs)
	return err
}

// maskEvents masks the run's declared secrets in what a call's events
// hold (a command's arguments, its directory, an error quoting them, a
// host it connected to) before they are stored: a store read after the
// secret changed, or by another daemon, never holds the value. An event
// that holds none keeps its data as it is.
func maskEvents(red *redact.Redactor, evs []callEvent) []callEvent {
	if !red.Declared() {
		return evs
	}
	out := make([]callEvent, len(evs))
	for i, e := range evs {
		out[i] = e
		out[i].data = maskedData(red, e.data)
	}
	return out
}

// maskedData is an event's data with red's secrets masked: as it is if
// it holds none, else its JSON masked.
func maskedData(red *redact.Redactor, data any) any {
	if !red.Declared() {
		return data
	}
	b, err := json.Marshal(data)
	if err != nil {
		return data
	}
	if m := red.Secrets(b); !bytes.Equal(m, b) {
		return json.RawMessage(m)
	}
	return data
}

// recordEventsSeq is recordEvents that says the first event's seq: the
// call's own (a command's enforcement record follows it).
func (br *Broker) recordEventsSeq(ctx context.Context, id string, evs []callEvent) (int64, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	drafts := make([]paddock.EventDraft, len(evs))
	for i, e := range evs {
		drafts[i] = paddock.EventDraft{Type: e.typ, Data: e.data}
	}
	out, err := br.appendEvents(context.WithoutCancel(ctx), id, drafts)
	if err != nil {
		return 0, err
	}
	return out[0].Seq, nil
}

// refuse records a denial, or files the access request a call that needs
// approval stands for, and returns the error the caller gets.
func (br *Broker) refuse(ctx context.Context, r *paddock.Run, b brokered, v broker.Verdict) error {
	err := v.Err()
	args := b.args
	if args == nil {
		args = json.RawMessage(`{}`)
	}
	if b.call.Tool == paddock.ToolExec {
		args, _ = json.Marshal(map[string]any{"argv": br.redactor(r).Strings(b.call.Argv)})
	}
	o := tools.Outcome{Tool: b.call.Tool, Args: json.RawMessage(br.redactor(r).Bytes(args)), Code: paddock.ErrorCode(err), Rule: v.Rule, Decision: v.Decision}
	if v.Decision == paddock.DecisionNeedsApproval && v.Ask != nil {
		in := *v.Ask
		in.Reason = "asked by the broker: " + v.Reason
		req, rerr := br.fileRequest(ctx, r.ID, in)
		if rerr != nil {
			return rerr
		}
		o.Request = req.ID
		err = paddock.Errorf(paddock.CodeForbidden, "%s; request %s is pending (paddock requests %s)", v.Reason, req.ID, r.ID).
			WithRule(broker.RuleNeedsApproval).WithDetail("request", req.ID)
	}
	if rerr := br.recordTool(ctx, r.ID, o); rerr != nil {
		br.log().Error("cannot record a refused call", "run", r.ID, "tool", b.call.Tool, "err", rerr)
	}
	return err
}

// definitionOf is the definition a run was made with; a run made before
// definitions existed gets the built-in of its access mode.
func definitionOf(r *paddock.Run) *paddock.AgentDefinition {
	if r.Agent != nil {
		return r.Agent
	}
	return agent.ForAccess(r.Access)
}

// CallTool runs one working tool in a run's workspace, through the broker,
// and records the call as an event (tool, arguments without file contents,
// outcome, duration, bytes).
func (br *Broker) CallTool(ctx context.Context, id, name string, args json.RawMessage) (any, error) {
	call := broker.Call{Tool: name}
	if slices.Contains(broker.WriteTools, name) {
		var a struct {
			Path, From, To string
			Recursive      bool
		}
		json.Unmarshal(args, &a) // a malformed call is refused by the tool itself
		for _, p := range []string{a.Path, a.From, a.To} {
			if p != "" {
				call.Paths = append(call.Paths, p)
			}
		}
		call.Trees = a.Recursive || name == "move"
	}
	if name == paddock.ToolPlan {
		return br.givePlan(ctx, id, args)
	}
	if !slices.Contains(broker.ReadTools, name) && !slices.Contains(broker.WriteTools, name) {
		// The control tools have their own calls; here only working tools
		// and plan, which has no call of its own.
		if _, err := br.Run(ctx, id); err != nil {
			return nil, err
		}
		if err := paddock.AwaitClaim(ctx); err != nil { // as broker
			return nil, err
		}
		err := paddock.Errorf(paddock.CodeNotFound, "no tool %q", name)
		if rerr := br.recordTool(ctx, id, tools.Outcome{Tool: name, Args: json.RawMessage(`{}`), Code: paddock.CodeNotFound, Decision: paddock.DecisionDeny}); rerr != nil {
			br.log().Error("cannot record a refused tool call", "run", id, "tool", name, "err", rerr)
		}
		return nil, err
	}
	return br.broker(ctx, id, brokered{call: call, inWorkspace: true, run: func(ctx context.Context, c *callContext) (any, []callEvent, error) {
		res, o, err := br.callTool(ctx, c.run, c.project, name, args)
		if o == nil {
			return nil, nil, err
		}
		o.Args = json.RawMessage(c.red.Bytes(o.Args))
		o.Decision = paddock.DecisionAllow
		return res, []callEvent{{paddock.EventToolCall, o}}, err
	}})
}

// givePlan is the plan tool: the agent's plan, checked and masked, is
// kept as the run's (plan.go), through the broker like every call.
func (br *Broker) givePlan(ctx context.Context, id string, args json.RawMessage) (any, error) {
	var in paddock.PlanInput
	if err := tools.Decode(paddock.ToolPlan, args, &in); err != nil {
		return nil, err
	}
	return br.broker(ctx, id, brokered{call: broker.Call{Tool: paddock.ToolPlan}, args: json.RawMessage(`{}`),
		run: func(ctx context.Context, c *callContext) (any, []callEvent, error) {
			plan, err := br.plans.give(ctx, id, in, c.red)
			return plan, nil, err
		}})
}

// ExecStream runs a command in a run's workspace, through the broker: it is
// the exec tool. It passes the output, masked, to stdout and stderr as it
// comes (either may be nil); see execStream.
func (br *Broker) ExecStream(ctx context.Context, id string, req paddock.ExecRequest, stdout, stderr io.Writer) (*paddock.ExecResult, error) {
	if err := br.checkOpen(); err != nil {
		return nil, err
	}
	if err := br.agentExec(ctx, id, &req); err != nil {
		return nil, err
	}
	return br.execBrokered(ctx, id, execCall(ctx, req), req, paddock.ExecIO{Stdout: stdout, Stderr: stderr})
}

// ExecAttach runs a command like ExecStream, with its stdin streamed from
// streams.Stdin as it comes and, when req asks for a terminal, on one,
// resized by streams.Resize; through the broker like every exec, and held
// to what the agent was given like ExecStream (agentExec).
func (br *Broker) ExecAttach(ctx context.Context, id string, req paddock.ExecRequest, streams paddock.ExecIO) (*paddock.ExecResult, error) {
	if err := br.checkOpen(); err != nil {
		return nil, err
	}
	if err := br.agentExec(ctx, id, &req); err != nil {
		return nil, err
	}
	return br.execBrokered(ctx, id, execCall(ctx, req), req, streams)
}

// agentExec holds an agent's command (a call made as the run's agent: its
// token, its socket, `paddock mcp`, either MCP transport), and a
// principal's other than an admin's (paddock.HeldToCeiling), to what the
// operator gave the agent: a command that asks for no network gets none,
// whatever its definition's network (a ceiling, which the broker holds a
// request to: execCall), and no less confinement than the machine
// enforces. One check for every way an agent reaches exec, jobs included.
func (br *Broker) agentExec(ctx context.Context, id string, req *paddock.ExecRequest) error {
	if !paddock.HeldToCeiling(ctx) {
		return nil
	}
	if req.AllowDegraded {
		return paddock.Errorf(paddock.CodeForbidden, "allow_degraded is the operator's (or an admin's) decision, not the agent's nor an orchestrator's").WithRule("ceiling")
	}
	if req.Session {
		return paddock.Errorf(paddock.CodeForbidden, "session is the operator's (or an admin's): an agent's commands are commands of its session, with their own limits").WithRule("ceiling")
	}
	if req.Net == "" {
		req.Net = string(sandbox.NetNone)
	}
	return nil
}

// execBrokered is ExecStream deciding on call: an agent's start command
// (a bootstrap job) is decided as such.
func (br *Broker) execBrokered(ctx context.Context, id string, call broker.Call, req paddock.ExecRequest, streams paddock.ExecIO) (*paddock.ExecResult, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		// A malformed request, not a refused command (as MCP's exec says).
		return nil, paddock.Errorf(paddock.CodeBadRequest, "exec needs a command: argv is empty").WithDetail("key", "argv")
	}
	res, err := br.broker(ctx, id, brokered{call: call, inWorkspace: true, run: func(ctx context.Context, c *callContext) (any, []callEvent, error) {
		c.masked = true
		res, evs, err := br.executor.execStream(ctx, c, req, streams)
		if res == nil {
			return nil, evs, err
		}
		return res, evs, err
	}})
	if err != nil {
		return nil, err
	}
	return res.(*paddock.ExecResult), nil
}

// runAndGrants reads a run and its access requests in one snapshot, with
// its project if withProject: one look at the store a call, not two (on
// a store across a network, one round trip: paddock.ReadRun). A project
// that could not be read is for workspaceFor to read again and say why,
// after the call is decided and recorded.
func (br *Broker) runAndGrants(ctx context.Context, id string, withProject bool) (*paddock.Run, *paddock.Project, []*paddock.AccessRequest, error) {
	r, p, grants, err := paddock.ReadRun(ctx, br.Store, id, paddock.RunWith{Grants: true, Project: withProject})
	if err != nil {
		return nil, nil, nil, err
	}
	br.describe(r)
	return r, p, grants, nil
}

// precheck decides a call ahead of running it (a job, decided when it is
// started so that its caller hears of a refusal), recording a refusal.
func (br *Broker) precheck(ctx context.Context, r *paddock.Run, call broker.Call) error {
	grants, err := br.AccessRequests(ctx, r.ID)
	if err != nil {
		return err
	}
	v := broker.Decide(definitionOf(r), grants, call, broker.State{Access: r.Access, Workspace: r.State()})
	if v.Decision == paddock.DecisionAllow {
		return nil
	}
	return br.refuse(ctx, r, brokered{call: call}, v)
}

// Exec is ExecStream that keeps the output in the result.
func (br *Broker) Exec(ctx context.Context, id string, req paddock.ExecRequest) (*paddock.ExecResult, error) {
	return br.ExecStream(ctx, id, req, nil, nil)
}

// AccessRequests returns a run's access requests, oldest first.
func (br *Broker) AccessRequests(ctx context.Context, id string) (out []*paddock.AccessRequest, err error) {
	err = br.Store.View(ctx, func(tx paddock.Tx) error {
		out, err = tx.AccessRequests().List(ctx, id)
		return err
	})
	if out == nil {
		out = []*paddock.AccessRequest{}
	}
	return out, err
}

// RequestAccess files an agent's request for more than its definition
// grants: a tool, a command, a path, a network domain or a limit, with a
// reason. It stays pending until a person or the orchestrator decides; it
// is the request_access tool, so it passes through the broker too.
func (br *Broker) RequestAccess(ctx context.Context, id string, in paddock.AccessRequestInput) (*paddock.AccessRequest, error) {
	if err := broker.CheckRequest(in); err != nil {
		return nil, err
	}
	args, _ := json.Marshal(in)
	res, err := br.broker(ctx, id, brokered{call: broker.Call{Tool: paddock.ToolRequestAccess}, args: args,
		run: func(ctx context.Context, c *callContext) (any, []callEvent, error) {
			req, err := br.fileRequest(ctx, id, in)
			return req, nil, err
		}})
	if err != nil {
		return nil, err
	}
	return res.(*paddock.AccessRequest), nil
}

// fileRequest stores a pending request and records it, in one transaction.
func (br *Broker) fileRequest(ctx context.Context, id string, in paddock.AccessRequestInput) (*paddock.AccessRequest, error) {
	var raw [6]byte
	rand.Read(raw[:])
	// Stored with the run's secrets masked in every field: a person is
	// never asked to grant what they cannot see, and a grant of a masked
	// command or domain matches nothing (the agent that put a secret in a
	// request is refused). The reason is free text: credential shapes are
	// masked in it too.
	red := br.redactorFor(ctx, id)
	secrets := func(s string) string { return string(red.Secrets([]byte(s))) }
	var command []string
	for _, a := range in.Command {
		command = append(command, secrets(a))
	}
	req := &paddock.AccessRequest{ID: "q-" + hex.EncodeToString(raw[:]), RunID: id, Kind: in.Kind, Tool: in.Tool, Command: command,
		Path: secrets(in.Path), Domain: secrets(in.Domain), Limit: in.Limit, Value: secrets(in.Value), Reason: red.String(in.Reason),
		State: paddock.RequestPending, CreatedAt: now()}
	ctx = context.WithoutCancel(ctx)
	err := br.update(ctx, func(tx paddock.Tx) error {
		if err := tx.AccessRequests().Create(ctx, req); err != nil {
			return err
		}
		_, err := tx.AppendEvent(ctx, id, paddock.EventAccessRequested, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	return req, nil
}

func (br *Broker) redactorFor(ctx context.Context, id string) *redact.Redactor {
	if r, err := br.Run(ctx, id); err == nil {
		return br.redactor(r)
	}
	return redact.New(nil)
}

// DecideAccess grants or denies a pending request. Only an operator may
// (the API refuses a run's token): an agent never grants itself anything.
// The decision is an event.
func (br *Broker) DecideAccess(ctx context.Context, id, reqID string, grant bool, by, note string) (*paddock.AccessRequest, error) {
	if paddock.AgentCall(ctx) {
		return nil, paddock.Errorf(paddock.CodeForbidden, "an agent cannot decide access requests; a person or the orchestrator does").WithRule("grant_by_agent")
	}
	var out *paddock.AccessRequest
	err := br.update(ctx, func(tx paddock.Tx) error {
		reqs, err := tx.AccessRequests().List(ctx, id)
		if err != nil {
			return err
		}
		for _, q := range reqs {
			if q.ID != reqID {
				continue
			}
			if q.State != paddock.RequestPending {
				return paddock.Errorf(paddock.CodeConflict, "request %s is %s already", reqID, q.State)
			}
			q.State, q.DecidedAt, q.DecidedBy, q.Note = paddock.RequestDenied, now(), by, note
			typ := paddock.EventAccessDenied
			if grant {
				q.State, typ = paddock.RequestGranted, paddock.EventAccessGranted
			}
			if err := tx.AccessRequests().Update(ctx, q); err != nil {
				return err
			}
			out = q
			_, err := tx.AppendEvent(ctx, id, typ, q)
			return err
		}
		if _, err := tx.Run(ctx, id); err != nil {
			return err
		}
		return paddock.Errorf(paddock.CodeNotFound, "run %s has no request %s", id, reqID)
	})
	return out, err
}

// Capabilities says what a run may do now, derived from its definition,
// its grants and the sandbox's recorded enforcement; it is the
// capabilities tool, so it passes through the broker.
func (br *Broker) Capabilities(ctx context.Context, id string) (*paddock.Capabilities, error) {
	res, err := br.broker(ctx, id, brokered{call: broker.Call{Tool: paddock.ToolCapabilities},
		run: func(ctx context.Context, c *callContext) (any, []callEvent, error) {
			caps, err := br.capabilities(ctx, c)
			return caps, nil, err
		},
		// What the run may do is read by its MCP server (in the daemon, or
		// `paddock mcp` in the run, with the agent's credential) to list
		// the tools the agent is granted, whether or not the capabilities
		// tool is one: an MCP client calls only the tools listed.
		declaredOrNot: true})
	if err != nil {
		return nil, err
	}
	return res.(*paddock.Capabilities), nil
}

// effectiveLimits are the limits a command of the run gets when it asks
// for none: the daemon's ceilings (exec_limits, or the sandbox's defaults)
// lowered by the definition and its grants. What capabilities say is what
// the sandbox is given, never a blank where the daemon's ceilings hold.
func (br *Broker) effectiveLimits(def *paddock.AgentDefinition, grants []*paddock.AccessRequest) paddock.AgentLimits {
	l, err := br.executor.commandLimits(paddock.ExecRequest{}, broker.Limits(def, grants))
	if err != nil {
		return broker.Limits(def, grants)
	}
	out := paddock.AgentLimits{Procs: l.Procs, Memory: l.Memory, FileSize: l.FileSize, Output: l.Output, Tmp: l.Tmp}
	if l.Wall > 0 {
		out.Timeout = l.Wall.String()
	}
	if l.CPU > 0 {
		out.CPU = l.CPU.String()
	}
	return out
}

func (br *Broker) capabilities(ctx context.Context, c *callContext) (*paddock.Capabilities, error) {
	r, def := c.run, c.def
	caps := &paddock.Capabilities{Run: r.ID, Agent: def.Name, AgentHash: cmp.Or(r.AgentHash, def.Hash()), Workspace: r.Access,
		State: r.State(), Net: string(sandbox.NetNone), NetCeiling: broker.Net(def, c.grants), Limits: br.effectiveLimits(def, c.grants), Env: def.Env, Secrets: r.Secrets,
		Tools: []paddock.ToolCapability{}, Holds: sandbox.KernelHolds()}
	if menu, err := br.flows.Menu(ctx, r.ID); err == nil && menu.Flow != "" {
		caps.Menu = menu
	}
	switch r.State() {
	case paddock.StateReady, paddock.StateActive, paddock.StateCheckpointed:
		caps.Working = r.Access != paddock.AccessNone
	}
	st := broker.State{Access: r.Access, Workspace: r.State()}
	for _, t := range agent.AllTools() {
		// A tool is offered if the broker would let a call of it through
		// (its narrowing aside: those calls are decided one by one).
		if v := broker.Decide(def, c.grants, broker.Call{Tool: t, Argv: []string{"true"}}, st); v.Decision == paddock.DecisionDeny && v.Rule != broker.RuleCommand {
			continue
		}
		if t == paddock.ToolExec || t == paddock.ToolVerify {
			// Offered only where a command can be confined at all.
			if why := br.sandboxProbe.unavailable(ctx, br.SandboxUID); why != "" {
				if caps.Unavailable == nil {
					caps.Unavailable = map[string]string{}
				}
				caps.Unavailable[t] = why
				continue
			}
		}
		tc := paddock.ToolCapability{Name: t}
		rule := def.Tool[t]
		tc.Allow, tc.Deny, tc.Ask = rule.Allow, rule.Deny, rule.Ask
		for _, g := range c.grants {
			if g.State != paddock.RequestGranted {
				continue
			}
			if g.Kind == paddock.AccessCommand && t == paddock.ToolExec && len(rule.Allow) > 0 {
				tc.Allow = append(slices.Clone(tc.Allow), strings.Join(g.Command, " "))
			}
			if g.Kind == paddock.AccessPath && g.Tool == t && len(rule.Allow) > 0 {
				tc.Allow = append(slices.Clone(tc.Allow), g.Path)
			}
		}
		caps.Tools = append(caps.Tools, tc)
	}
	for _, g := range c.grants {
		switch g.State {
		case paddock.RequestGranted:
			caps.Grants = append(caps.Grants, g)
		case paddock.RequestPending:
			caps.Pending = append(caps.Pending, g)
		}
	}
	if r.Access != paddock.AccessNone && r.Workspace != nil && (def.Declares(paddock.ToolVerify) || c.grantsTool(paddock.ToolVerify)) {
		if checks, err := br.verifier.checks(ctx, r); err == nil {
			for _, ch := range checks {
				if !slices.Contains(caps.Checks, ch.Name) {
					caps.Checks = append(caps.Checks, ch.Name)
				}
			}
		}
	}
	if r.Workspace != nil && len(br.views.routingBinds(br.views.homeDir(r.ID))) > 0 {
		caps.AgentToolsOff = AgentToolsOff
	}
	caps.Enforcement = br.lastEnforcement(ctx, r)
	return caps, nil
}

// lastEnforcement is what the sandbox recorded for the run's latest
// command, or nil before the first: read from the run's latest events
// backwards, a window at a time, not from its first.
func (br *Broker) lastEnforcement(ctx context.Context, r *paddock.Run) *paddock.Enforcement {
	const window = 256
	for hi := r.LastSeq; hi > 0; hi -= window {
		lo := max(hi-window, 0)
		evs, err := br.runs.Events(ctx, r.ID, lo, int(hi-lo))
		if err != nil {
			return nil
		}
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].Type == paddock.EventSandboxEnforced {
				e := new(paddock.Enforcement)
				if json.Unmarshal(evs[i].Data, e) == nil {
					return e
				}
			}
		}
	}
	return nil
}

func (c *callContext) grantsTool(t string) bool {
	return slices.ContainsFunc(c.grants, func(g *paddock.AccessRequest) bool {
		return g.State == paddock.RequestGranted && g.Kind == paddock.AccessTool && g.Tool == t
	})
}

// writtenBy is the files call wrote, when it wrote only files' content
// (write, edit: its path); none for any other call (a command, a delete,
// a move), whose effects are read from the whole workspace.
func writtenBy(call broker.Call) []string {
	if (call.Tool == "write" || call.Tool == "edit") && !call.Trees {
		return call.Paths
	}
	return nil
}
