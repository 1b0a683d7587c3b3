package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/lifecycle"
)

// Red team (flows): failing tests that show what a coder or a reviewer
// can make a flow do that #19 says must fail by construction.

// TestFlowApproveOfResubmission: the coder submits again while
// its first change set is under review. The flow's review run still holds
// the first (its workspace never sees the second), yet the head guard
// compares against the coder's newest submission, and the refusal of the
// old head even names the new one: the reviewer approves a change set it
// never reviewed and the flow waits for a person as if it had been.
func TestFlowApproveOfResubmission(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	e.project(t)
	withSandbox(t, e)
	f, err := e.m.Flows.StartFlow(ctx, paddock.StartFlowRequest{Workflow: paddock.WorkflowTaskWithReview, Project: "my-app", Task: "add a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	coder := f.Runs["coding"]
	if _, err := e.m.Broker.CallTool(agentCtx, coder, "write", json.RawMessage(`{"path":"a.txt","content":"harmless\n"}`)); err != nil {
		t.Fatal(err)
	}
	if f, err = e.m.Flows.PickEvent(agentCtx, coder, "done", paddock.MenuEventRequest{}); err != nil || f.State != "reviewing" {
		t.Fatalf("done: %+v %v", f, err)
	}
	reviewer, reviewed := f.Runs["reviewing"], f.Head
	// The coder, its run off the menu, writes more and submits again.
	if _, err := e.m.Broker.CallTool(agentCtx, coder, "write", json.RawMessage(`{"path":"evil.txt","content":"never reviewed\n"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Changes.Submit(agentCtx, coder); !isRule(err, paddock.RuleMenu) {
		t.Fatalf("the coder's own submit off its state: %v", err)
	}
	// The operator may still submit it again: the flow's review moves.
	cs, err := e.m.Changes.Submit(ctx, coder)
	if err != nil {
		t.Fatalf("the operator's second submit: %v", err)
	}
	// The reviewer approves what it saw: refused, the detail names the new hash.
	_, err = e.m.Flows.PickEvent(agentCtx, reviewer, "approve", paddock.MenuEventRequest{Head: reviewed})
	// Refused: its review moved (the run given back) or its head is not
	// the flow's any more.
	var pe *paddock.Error
	if !errors.As(err, &pe) || pe.Code != paddock.CodeConflict && pe.Code != paddock.CodeForbidden {
		t.Fatalf("approve of the reviewed head: %v", err)
	}
	if strings.Contains(err.Error(), cs.Hash) || pe.Details["head"] != nil {
		t.Fatalf("the refusal tells the new hash: %v (details %v)", err, pe.Details)
	}
	// What the flow's reviewer can see: only the first change set.
	if _, err := e.m.Broker.CallTool(agentCtx, reviewer, "read", json.RawMessage(`{"path":"evil.txt"}`)); err == nil {
		t.Fatal("the reviewer sees the second change set (then this test's premise is wrong)")
	}
	// It approves the new hash, never having seen it: refused.
	flowID := f.ID
	if f, err := e.m.Flows.PickEvent(agentCtx, reviewer, "approve", paddock.MenuEventRequest{Head: cs.Hash}); err == nil {
		t.Fatalf("the flow's reviewer approved change set %s it never saw (it reviewed %s): the flow is %s, head %s; a person is told to approve the coder's %s",
			cs.Hash, reviewed, f.State, f.Head, cs.Hash)
	}
	// The flow's review moved to the new change set: a new review run
	// holds it, and it is the one that can approve it.
	f, _ = e.m.Flows.Flow(ctx, flowID)
	if f.State != "reviewing" || f.Head != cs.Hash || f.Runs["reviewing"] == reviewer {
		t.Fatalf("after the operator's resubmission the flow is %s, head %s, reviewer %s", f.State, f.Head, f.Runs["reviewing"])
	}
	if out := sh(t, e.m, f.Runs["reviewing"], "cat evil.txt"); out != "never reviewed\n" {
		t.Fatalf("the moved review holds %q", out)
	}
	if f, err = e.m.Flows.PickEvent(agentCtx, f.Runs["reviewing"], "approve", paddock.MenuEventRequest{Head: cs.Hash}); err != nil || f.State != "awaiting_approval" {
		t.Fatalf("the moved review's approve: %+v %v", f, err)
	}
}

// TestFlowSubmitAfterReviewerApproved: once the reviewer approved
// head H and the flow awaits a person, the coder (whose agent still runs)
// submits again. The flow still says awaiting_approval and shows H as
// what was reviewed, while paddock diff CODER (which flow show tells the
// person to read and approve) is the new, unreviewed change set.
func TestFlowSubmitAfterReviewerApproved(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	e.project(t)
	withSandbox(t, e)
	f, err := e.m.Flows.StartFlow(ctx, paddock.StartFlowRequest{Workflow: paddock.WorkflowTaskWithReview, Project: "my-app", Task: "add a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	coder := f.Runs["coding"]
	if _, err := e.m.Broker.CallTool(agentCtx, coder, "write", json.RawMessage(`{"path":"a.txt","content":"harmless\n"}`)); err != nil {
		t.Fatal(err)
	}
	if f, err = e.m.Flows.PickEvent(agentCtx, coder, "done", paddock.MenuEventRequest{}); err != nil {
		t.Fatal(err)
	}
	reviewed := f.Head
	if f, err = e.m.Flows.PickEvent(agentCtx, f.Runs["reviewing"], "approve", paddock.MenuEventRequest{Head: reviewed}); err != nil || f.State != "awaiting_approval" {
		t.Fatalf("approve: %+v %v", f, err)
	}
	if _, err := e.m.Broker.CallTool(agentCtx, coder, "write", json.RawMessage(`{"path":"evil.txt","content":"never reviewed\n"}`)); err != nil {
		t.Fatal(err)
	}
	cs, err := e.m.Changes.Submit(agentCtx, coder)
	if err != nil {
		// Refusing the coder's submit once its state is over closes this.
		if !isRule(err, paddock.RuleMenu) {
			t.Fatalf("the coder's submit after the approve: %v", err)
		}
		return
	}
	f, _ = e.m.Flows.Flow(ctx, f.ID)
	if f.State == "awaiting_approval" && f.Head != cs.Hash {
		t.Fatalf("the flow awaits a person's approval of reviewed head %s, but the coder's submission (what paddock diff %s shows) is now %s, never reviewed; nothing in the flow says so",
			f.Head, coder, cs.Hash)
	}
}

// TestFlowPickByRejectedRun: a review run an operator rejected
// (or that moveReviews replaced) still picks from its flow's menu.
func TestFlowPickByRejectedRun(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	e.project(t)
	withSandbox(t, e)
	f, err := e.m.Flows.StartFlow(ctx, paddock.StartFlowRequest{Workflow: paddock.WorkflowTaskWithReview, Project: "my-app", Task: "add a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	coder := f.Runs["coding"]
	if _, err := e.m.Broker.CallTool(agentCtx, coder, "write", json.RawMessage(`{"path":"a.txt","content":"x\n"}`)); err != nil {
		t.Fatal(err)
	}
	if f, err = e.m.Flows.PickEvent(agentCtx, coder, "done", paddock.MenuEventRequest{}); err != nil {
		t.Fatal(err)
	}
	reviewer := f.Runs["reviewing"]
	if _, err := e.m.Runs.Reject(ctx, reviewer); err != nil {
		t.Fatal(err)
	}
	if f, err = e.m.Flows.PickEvent(agentCtx, reviewer, "approve", paddock.MenuEventRequest{Head: f.Head}); err == nil {
		t.Fatalf("a rejected review run moved its flow to %s", f.State)
	}
}

// flowFaults fails UpdateFlow on demand: a daemon killed between a
// step's side effects (runs made, rejected, submitted) and the flow's
// save.
type flowFaults struct {
	paddock.Store
	mu   sync.Mutex
	fail bool
}

func (s *flowFaults) Update(ctx context.Context, fn func(paddock.Tx) error) error {
	return s.Store.Update(ctx, func(tx paddock.Tx) error { return fn(&flowFaultTx{Tx: tx, s: s}) })
}

type flowFaultTx struct {
	paddock.Tx
	s *flowFaults
}

func (t *flowFaultTx) CreateFlow(ctx context.Context, f *paddock.Flow) error {
	t.s.mu.Lock()
	fail := t.s.fail
	t.s.mu.Unlock()
	if fail {
		return errors.New("killed before the flow was saved")
	}
	return t.Tx.CreateFlow(ctx, f)
}

func (t *flowFaultTx) UpdateFlow(ctx context.Context, f *paddock.Flow) error {
	t.s.mu.Lock()
	fail := t.s.fail
	t.s.mu.Unlock()
	if fail {
		return errors.New("killed before the flow was saved")
	}
	return t.Tx.UpdateFlow(ctx, f)
}

// TestFlowStartCrash: the daemon dies after StartFlow recorded the
// flow and made its first run, before the flow is saved again. The flow
// is left in no state at all, its run recorded nowhere: no menu, no way
// on, nothing in the flow's log.
func TestFlowStartCrash(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	withSandbox(t, e)
	fs := &flowFaults{Store: e.m.Store, fail: true}
	lifecycle.SettleAll(e.m) // the writes' looks at the files read the store too
	e.m.Store = fs
	if _, err := e.m.Flows.StartFlow(ctx, paddock.StartFlowRequest{Workflow: paddock.WorkflowTaskWithReview, Project: "my-app", Task: "t"}); err == nil {
		t.Fatal("StartFlow with a failing save succeeded")
	}
	lifecycle.SettleAll(e.m)
	e.m.Store = fs.Store
	flows, err := e.m.Flows.Flows(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	runs, _ := e.m.Runs.Runs(ctx, paddock.RunFilter{Project: "my-app"})
	var live []string
	for _, r := range runs {
		if r.Workspace != nil && r.State() == paddock.StateReady {
			live = append(live, r.ID)
		}
	}
	for _, f := range flows {
		if f.State == "" || stateOfName(f) == nil {
			t.Errorf("flow %s is left in no state (%q), runs %v, ended %v; live runs of the project nobody's flow names: %v", f.ID, f.State, f.Runs, !f.Ended.IsZero(), live)
		}
	}
}

func stateOfName(f *paddock.Flow) *paddock.WorkflowState {
	for i := range f.Workflow.States {
		if f.Workflow.States[i].Name == f.State {
			return &f.Workflow.States[i]
		}
	}
	return nil
}

// TestFlowApproveCrash: the daemon dies after the reviewer's
// approve rejected its review run and entered awaiting_approval, before
// the flow was saved. After the restart the flow is still reviewing, its
// review run rejected (its socket closed): the approve is lost and
// nothing live can move the flow on.
func TestFlowApproveCrash(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	e.project(t)
	withSandbox(t, e)
	f, err := e.m.Flows.StartFlow(ctx, paddock.StartFlowRequest{Workflow: paddock.WorkflowTaskWithReview, Project: "my-app", Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	coder := f.Runs["coding"]
	if _, err := e.m.Broker.CallTool(agentCtx, coder, "write", json.RawMessage(`{"path":"a.txt","content":"x\n"}`)); err != nil {
		t.Fatal(err)
	}
	if f, err = e.m.Flows.PickEvent(agentCtx, coder, "done", paddock.MenuEventRequest{}); err != nil {
		t.Fatal(err)
	}
	reviewer, head := f.Runs["reviewing"], f.Head
	fs := &flowFaults{Store: e.m.Store, fail: true}
	lifecycle.SettleAll(e.m) // the writes' looks at the files read the store too
	e.m.Store = fs
	if _, err := e.m.Flows.PickEvent(agentCtx, reviewer, "approve", paddock.MenuEventRequest{Head: head}); err == nil {
		t.Fatal("approve with a failing save succeeded")
	}
	lifecycle.SettleAll(e.m)
	e.m.Store = fs.Store
	e.reopen(t)
	withSandbox(t, e)
	f, _ = e.m.Flows.Flow(ctx, f.ID)
	r, _ := e.m.Run(ctx, reviewer)
	if f.State == "reviewing" && r.State() != paddock.StateReady && r.State() != paddock.StateActive {
		t.Fatalf("after the crash the flow is %s (its log's last event %s) but its review run %s is %s: the approve is lost and no live run can pick",
			f.State, f.Events[len(f.Events)-1].Type, reviewer, r.State())
	}
}

// agentHook runs a function when a stored agent definition is read (the
// flow's enter reads its state's agent before it makes the state's run).
type agentHook struct {
	paddock.Store
	mu   sync.Mutex
	name string
	fn   func()
}

func (s *agentHook) View(ctx context.Context, fn func(paddock.Tx) error) error {
	return s.Store.View(ctx, func(tx paddock.Tx) error { return fn(&agentHookTx{Tx: tx, s: s}) })
}

type agentHookTx struct {
	paddock.Tx
	s *agentHook
}

func (t *agentHookTx) Agent(ctx context.Context, name string) (*paddock.AgentRecord, error) {
	t.s.mu.Lock()
	fn := t.s.fn
	if name == t.s.name {
		t.s.fn = nil
	}
	t.s.mu.Unlock()
	if fn != nil && name == t.s.name {
		fn()
	}
	return t.Tx.Agent(ctx, name)
}

const revOnly = `name = "rev"
workspace = "read"
tools = ["read", "exec", "capabilities"]
`

const twrRev = `name = "twr-rev"
start = "coding"
[[state]]
name = "coding"
agent = "coder"
  [[state.transition]]
  event = "done"
  to = "reviewing"
[[state]]
name = "reviewing"
agent = "rev"
reviews = "coding"
  [[state.transition]]
  event = "approve"
  to = "awaiting_approval"
  guard = "head == context.head"
[[state]]
name = "awaiting_approval"
end = true
`

// TestFlowEmptyReviewHeadIsLive: the coder says done with nothing
// written, so nothing is submitted and reviewForFlow computes the coder's
// change set again, live, for the head. A write of the coder's agent
// landing between the two (here: while the reviewing state's agent is
// read) makes the head the hash of a change set nobody froze: the review
// run stands at the base (empty), its menu says the coder changed
// nothing, and it approves that head. The coder then submits exactly
// those bytes: its submission's hash is the flow's reviewed head, and a
// person approving "what was reviewed" approves a file no reviewer saw.
func TestFlowEmptyReviewHeadIsLive(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	e.project(t)
	withSandbox(t, e)
	if _, err := e.m.Projects.AddAgent(ctx, paddock.AddAgentRequest{File: "rev.toml", Source: revOnly}); err != nil {
		t.Fatal(err)
	}
	f, err := e.m.Flows.StartFlow(ctx, paddock.StartFlowRequest{Source: twrRev, File: "twr.toml", Project: "my-app", Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	coder := f.Runs["coding"]
	hook := &agentHook{Store: e.m.Store, name: "rev", fn: func() {
		if _, err := e.m.Broker.CallTool(agentCtx, coder, "write", json.RawMessage(`{"path":"backdoor.txt","content":"never reviewed\n"}`)); err != nil {
			t.Errorf("the coder's racing write: %v", err)
		}
	}}
	lifecycle.SettleAll(e.m) // the writes' looks at the files read the store too
	e.m.Store = hook
	f, err = e.m.Flows.PickEvent(agentCtx, coder, "done", paddock.MenuEventRequest{})
	lifecycle.SettleAll(e.m)
	e.m.Store = hook.Store
	if err != nil || f.State != "reviewing" {
		t.Fatalf("done: %+v %v", f, err)
	}
	reviewer, head := f.Runs["reviewing"], f.Head
	menu, _ := e.m.Flows.Menu(agentCtx, reviewer)
	if out := sh(t, e.m, reviewer, "ls backdoor.txt 2>&1 || true"); !strings.Contains(out, "No such file") {
		t.Fatalf("the reviewer sees backdoor.txt (%q): then this test's premise is wrong", out)
	}
	if _, err := e.m.Flows.PickEvent(agentCtx, reviewer, "approve", paddock.MenuEventRequest{Head: head}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Changes.Submit(agentCtx, coder); !isRule(err, paddock.RuleMenu) {
		t.Fatalf("the coder's own submit once its state is over: %v", err)
	}
	cs, err := e.m.Changes.Submit(ctx, coder) // the operator's, then
	if err != nil {
		t.Fatal(err)
	}
	if cs.Hash == head && len(cs.Entries) > 0 {
		t.Fatalf("the reviewer saw an empty change set (menu note %q) and approved head %s; the coder's submission %s (%d entries: %s) is that head",
			menu.Inputs["note"], head, cs.Hash, len(cs.Entries), cs.Entries[0].Path)
	}
}

// TestFlowStuckWhenEnterFails: a step whose next state cannot be
// entered (its agent's definition was removed since the flow started)
// still moves the flow's state there, with no run: the coder's menu is
// empty, no run can pick, and the flow never ends.
func TestFlowStuckWhenEnterFails(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	e.project(t)
	withSandbox(t, e)
	if _, err := e.m.Projects.AddAgent(ctx, paddock.AddAgentRequest{File: "rev.toml", Source: revOnly}); err != nil {
		t.Fatal(err)
	}
	f, err := e.m.Flows.StartFlow(ctx, paddock.StartFlowRequest{Source: twrRev, File: "twr.toml", Project: "my-app", Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	coder := f.Runs["coding"]
	if err := e.m.Projects.RemoveAgent(ctx, "rev"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Flows.PickEvent(agentCtx, coder, "done", paddock.MenuEventRequest{}); err == nil {
		t.Fatal("done into a state whose agent is gone went through")
	}
	f, _ = e.m.Flows.Flow(ctx, f.ID)
	menu, _ := e.m.Flows.Menu(agentCtx, coder)
	if f.Ended.IsZero() && f.Runs[f.State] == "" {
		t.Fatalf("the flow is left in %s with no run (runs %v), not ended; the coder's menu: %+v", f.State, f.Runs, menu.Items)
	}
}

// TestFlowReviewRunOfWriteAgent: StartFlow checks that a review
// state's agent reads only, but the definition is read again when the
// state is entered. Replaced meanwhile by one that writes, an empty
// done's review run (reviewForFlow's path with no submission, which skips
// Review's check) is made with write access: a review run offered write.
func TestFlowReviewRunOfWriteAgent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	e.project(t)
	withSandbox(t, e)
	if _, err := e.m.Projects.AddAgent(ctx, paddock.AddAgentRequest{File: "rev.toml", Source: revOnly}); err != nil {
		t.Fatal(err)
	}
	f, err := e.m.Flows.StartFlow(ctx, paddock.StartFlowRequest{Source: twrRev, File: "twr.toml", Project: "my-app", Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.Projects.RemoveAgent(ctx, "rev"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Projects.AddAgent(ctx, paddock.AddAgentRequest{File: "rev.toml", Source: "name = \"rev\"\nworkspace = \"write\"\ntools = [\"read\", \"write\", \"exec\", \"capabilities\"]\n"}); err != nil {
		t.Fatal(err)
	}
	f, err = e.m.Flows.PickEvent(agentCtx, f.Runs["coding"], "done", paddock.MenuEventRequest{})
	if err != nil {
		return // refused: held
	}
	r, _ := e.m.Run(ctx, f.Runs["reviewing"])
	if r.ReviewOf != nil && r.Access != paddock.AccessRead {
		caps, _ := e.m.Broker.Capabilities(agentCtx, r.ID)
		var names []string
		for _, tc := range caps.Tools {
			names = append(names, tc.Name)
		}
		t.Fatalf("review run %s of the flow has access %s; its tools: %v", r.ID, r.Access, names)
	}
}

// TestFlowRefusalsGrowTheFlow: every refused pick is appended to
// the flow's document, which is rewritten whole, with the event name as
// the agent gave it (unbounded, twice: event and reason), also by a run
// whose flow has ended. An agent looping on off-menu picks grows the
// document without bound and each pick costs a rewrite of all of it,
// under the daemon's one flowMu (measured on the real daemon: 350 picks
// of a 60 KB name made a 21 MB flow, the later ones ~0.5 s each).
func TestFlowRefusalsGrowTheFlow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	e.project(t)
	withSandbox(t, e)
	f, err := e.m.Flows.StartFlow(ctx, paddock.StartFlowRequest{Workflow: paddock.WorkflowTaskWithReview, Project: "my-app", Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	coder := f.Runs["coding"]
	size := func() int {
		got, _ := e.m.Flows.Flow(ctx, f.ID)
		b, _ := json.Marshal(got)
		return len(b)
	}
	before := size()
	name := strings.Repeat("x", 60000)
	for range 10 {
		if _, err := e.m.Flows.PickEvent(agentCtx, coder, name, paddock.MenuEventRequest{}); !isRule(err, paddock.RuleMenu) && !paddock.IsCode(err, paddock.CodeBadRequest) {
			t.Fatalf("an off-menu pick: %v", err)
		}
	}
	if grew := size() - before; grew > 64<<10 {
		t.Fatalf("10 refused picks grew the flow's document by %d bytes", grew)
	}
}
