package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/lifecycle"
)

// TestTaskWithReviewIncident replays the incident of record 000 in the
// built-in task-with-review flow: the coder submits nothing; the
// reviewer is offered no write tool, tries to edit README.md, set
// user.email, commit and approve its own commit. Every attempt is refused
// or confined and recorded; the project, its refs, the coder's run and
// its change set stay as they were; the reviewer's approve moves the flow
// to awaiting_approval with an empty change set, and nothing can be
// applied.
func TestTaskWithReviewIncident(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	e.project(t)
	withSandbox(t, e)
	refs := gittest.Git(t, e.repo, "for-each-ref")
	f, err := e.m.Flows.StartFlow(ctx, paddock.StartFlowRequest{Workflow: paddock.WorkflowTaskWithReview, Project: "my-app", Task: "fix the typo in README.md"})
	if err != nil {
		t.Fatal(err)
	}
	coder := f.Runs["coding"]
	if f.State != "coding" || coder == "" {
		t.Fatalf("the flow starts: %+v", f)
	}
	caps, err := e.m.Broker.Capabilities(agentCtx, coder)
	if err != nil || caps.Menu == nil || len(caps.Menu.Items) != 1 || caps.Menu.Items[0].Event != "done" || caps.Menu.Inputs["task"] != "fix the typo in README.md" {
		t.Fatalf("the coder's menu: %+v %v", caps.Menu, err)
	}
	// An event outside the menu is refused.
	if _, err := e.m.Flows.PickEvent(agentCtx, coder, "approve", paddock.MenuEventRequest{}); !isRule(err, paddock.RuleMenu) {
		t.Fatalf("the coder picked approve: %v", err)
	}
	// The coder commits nothing, and says it is done.
	f, err = e.m.Flows.PickEvent(agentCtx, coder, "done", paddock.MenuEventRequest{})
	if err != nil || f.State != "reviewing" {
		t.Fatalf("done: %+v %v", f, err)
	}
	reviewer := f.Runs["reviewing"]
	caps, err = e.m.Broker.Capabilities(agentCtx, reviewer)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range caps.Tools {
		switch tc.Name {
		case "write", "edit", "move", "delete", "submit":
			t.Errorf("the reviewer is offered %s", tc.Name)
		}
	}
	if caps.Menu == nil || len(caps.Menu.Items) != 2 || caps.Menu.Inputs["note"] == nil || caps.Menu.Head == "" {
		t.Fatalf("the reviewer's menu and inputs: %+v", caps.Menu)
	}
	head := caps.Menu.Head
	// The incident's attempts.
	if _, err := e.m.Broker.CallTool(agentCtx, reviewer, "write", json.RawMessage(`{"path":"README.md","content":"edited by the reviewer\n"}`)); !paddock.IsCode(err, paddock.CodeForbidden) {
		t.Fatalf("the reviewer's write: %v", err)
	}
	sh(t, e.m, reviewer, `echo edited > README.md; git config user.email reviewer@example.com; git commit -qam "LGTM, self-approved" || true`)
	if out := sh(t, e.m, reviewer, `cat README.md; git log --oneline | wc -l`); out != "hello\n2\n" {
		t.Fatalf("the reviewer's writes outlived their command: %q", out)
	}
	if _, err := e.m.Changes.Submit(agentCtx, reviewer); err == nil {
		t.Fatal("the reviewer submitted")
	}
	if _, err := e.m.Flows.PickEvent(agentCtx, reviewer, "approve", paddock.MenuEventRequest{Head: "sha256:" + string(make([]byte, 0))}); err == nil {
		t.Fatal("an approve without the head went through")
	}
	if _, err := e.m.Flows.PickEvent(agentCtx, reviewer, "approve", paddock.MenuEventRequest{Head: "sha256:0000"}); !paddock.IsCode(err, paddock.CodeConflict) {
		t.Fatalf("an approve of another head: %v", err)
	}
	f, err = e.m.Flows.PickEvent(agentCtx, reviewer, "approve", paddock.MenuEventRequest{Head: head})
	if err != nil || f.State != "awaiting_approval" || f.Ended.IsZero() {
		t.Fatalf("the reviewer's approve: %+v %v", f, err)
	}
	// Its approve approved nothing: the coder's run has no submission,
	// nothing applies, and the flow says so rather than ask for an
	// approval that would be refused.
	if got, err := e.m.Flows.Flow(ctx, f.ID); err != nil || !got.Unsubmitted {
		t.Fatalf("the flow does not say nothing was submitted: %+v %v", got, err)
	}
	if _, err := e.m.Changes.Apply(ctx, coder, "", gitx.Identity{Name: "Op", Email: "op@example.com"}); err == nil {
		t.Fatal("an apply after the reviewer's approve")
	}
	cs, err := e.m.Changes.ChangeSet(ctx, coder)
	if err != nil || len(cs.Entries) != 0 {
		t.Fatalf("the coder's change set: %+v %v", cs, err)
	}
	if got := gittest.Git(t, e.repo, "for-each-ref"); got != refs {
		t.Fatalf("the project's refs moved:\n%s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(e.repo, "README.md")); string(b) != "hello\n" {
		t.Fatalf("README.md in the checkout: %q", b)
	}
	// Every refusal is in the flow's log; the menu is empty once it ended.
	f, _ = e.m.Flows.Flow(ctx, f.ID)
	var refused int
	for _, ev := range f.Events {
		if ev.Type == "flow.refused" {
			refused++
		}
	}
	if refused != 3 {
		t.Errorf("refusals in the flow's log: %d\n%+v", refused, f.Events)
	}
	if _, err := e.m.Flows.PickEvent(agentCtx, reviewer, "approve", paddock.MenuEventRequest{Head: head}); !isRule(err, paddock.RuleMenu) {
		t.Errorf("an event after the flow ended: %v", err)
	}
	evs, _ := e.m.Runs.Events(ctx, reviewer, 0, 1000)
	var denied bool
	for _, ev := range evs {
		b, _ := json.Marshal(ev.Data)
		denied = denied || ev.Type == paddock.EventToolCall && strings.Contains(string(b), `"write"`) && strings.Contains(string(b), "forbidden")
	}
	if !denied {
		t.Error("the reviewer's refused write is not an event of its run")
	}
}

// TestTaskWithReviewRounds: request_changes sends the work back with
// findings (the coder's menu and task say what they are), a stale head is
// refused, the round limit ends the flow in failed, and a flow survives a
// daemon restart in every state it passes through.
func TestTaskWithReviewRounds(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	e.project(t)
	withSandbox(t, e)
	restart := func() {
		// A graceful stop, as the daemon's: its harnesses given back.
		if err := e.m.Close(ctx); err != nil {
			t.Fatal(err)
		}
		e.m.Store.Close()
		e.open(t, nil)
		withSandbox(t, e)
		if _, err := e.m.Recover(ctx); err != nil {
			t.Fatal(err)
		}
	}
	f, err := e.m.Flows.StartFlow(ctx, paddock.StartFlowRequest{Workflow: paddock.WorkflowTaskWithReview, Project: "my-app", Task: "add feature.txt"})
	if err != nil {
		t.Fatal(err)
	}
	coder := f.Runs["coding"]
	for round := 1; round <= 4; round++ {
		restart()
		if _, err := e.m.Broker.CallTool(agentCtx, coder, "write", json.RawMessage(`{"path":"feature.txt","content":"try `+string(rune('0'+round))+`\n"}`)); err != nil {
			t.Fatal(err)
		}
		if f, err = e.m.Flows.PickEvent(agentCtx, coder, "done", paddock.MenuEventRequest{}); err != nil || f.State != "reviewing" {
			t.Fatalf("round %d: done: %+v %v", round, f, err)
		}
		restart()
		reviewer := f.Runs["reviewing"]
		menu, err := e.m.Flows.Menu(agentCtx, reviewer)
		if err != nil || menu.Inputs["change_set"] == nil {
			t.Fatalf("round %d: the reviewer's inputs: %+v %v", round, menu, err)
		}
		if out := sh(t, e.m, reviewer, "cat feature.txt"); out != "try "+string(rune('0'+round))+"\n" {
			t.Fatalf("round %d: the reviewer sees %q", round, out)
		}
		if _, err := e.m.Flows.PickEvent(agentCtx, reviewer, "request_changes", paddock.MenuEventRequest{Head: menu.Head}); !paddock.IsCode(err, paddock.CodeBadRequest) {
			t.Fatalf("request_changes without findings: %v", err)
		}
		f, err = e.m.Flows.PickEvent(agentCtx, reviewer, "request_changes", paddock.MenuEventRequest{Head: menu.Head, Findings: []string{"round " + string(rune('0'+round)) + " is not enough"}})
		if err != nil {
			t.Fatalf("round %d: request_changes: %v", round, err)
		}
		if round <= 3 {
			if f.State != "coding" || f.Runs["coding"] != coder {
				t.Fatalf("round %d: back to the coder: %+v", round, f)
			}
			caps, _ := e.m.Broker.Capabilities(agentCtx, coder)
			if caps.Menu == nil || caps.Menu.Inputs["findings"] == nil {
				t.Fatalf("round %d: the coder is not told the findings: %+v", round, caps.Menu)
			}
		} else if f.State != "failed" || f.Ended.IsZero() {
			t.Fatalf("past the round limit: %+v", f)
		}
	}
	restart()
	if got, err := e.m.Flows.Flow(ctx, f.ID); err != nil || got.State != "failed" || got.Round != 4 {
		t.Fatalf("after the last restart: %+v %v", got, err)
	}
}

func isRule(err error, rule paddock.Rule) bool {
	var pe *paddock.Error
	return errors.As(err, &pe) && pe.Rule == rule
}

// A workflow whose second state's agent has no workspace: it decides from
// its menu and the inputs it is given, and nothing else.
const decideFile = `name = "code-then-decide"
start = "coding"
max_rounds = 2
[[state]]
name = "coding"
agent = "coder"
  [[state.transition]]
  event = "done"
  to = "deciding"
[[state]]
name = "deciding"
agent = "decider"
  [[state.transition]]
  event = "accept"
  to = "accepted"
  [[state.transition]]
  event = "send_back"
  to = "coding"
  findings = true
  round = true
[[state]]
name = "accepted"
end = true
[[state]]
name = "failed"
end = true
`

// TestMenuOnlyAgent: a none agent in a flow has no workspace and no
// working tool; it sees its menu and the work it is given (the task, the
// submitted change set and its diff), and what it picks moves the flow.
func TestMenuOnlyAgent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	e.project(t)
	withSandbox(t, e)
	f, err := e.m.Flows.StartFlow(ctx, paddock.StartFlowRequest{Source: decideFile, File: "decide.toml", Project: "my-app", Task: "add notes.txt"})
	if err != nil {
		t.Fatal(err)
	}
	coder := f.Runs["coding"]
	if _, err := e.m.Broker.CallTool(agentCtx, coder, "write", json.RawMessage(`{"path":"notes.txt","content":"the notes\n"}`)); err != nil {
		t.Fatal(err)
	}
	if f, err = e.m.Flows.PickEvent(agentCtx, coder, "done", paddock.MenuEventRequest{}); err != nil || f.State != "deciding" {
		t.Fatalf("done: %+v %v", f, err)
	}
	decider := f.Runs["deciding"]
	r, err := e.m.Run(ctx, decider)
	if err != nil || r.Workspace != nil || r.Access != paddock.AccessNone {
		t.Fatalf("the decider's run: %+v %v", r, err)
	}
	caps, err := e.m.Broker.Capabilities(agentCtx, decider)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range caps.Tools {
		if tc.Name != paddock.ToolCapabilities && tc.Name != paddock.ToolRequestAccess && tc.Name != paddock.ToolPlan {
			t.Errorf("a menu-only agent is offered %s", tc.Name)
		}
	}
	in := caps.Menu.Inputs
	diff, _ := in["diff"].(string)
	if len(caps.Menu.Items) != 2 || in["task"] != "add notes.txt" || in["change_set"] == nil || !strings.Contains(diff, "+the notes") {
		t.Fatalf("the decider's menu and inputs: %+v", caps.Menu)
	}
	if _, err := e.m.Broker.CallTool(agentCtx, decider, "read", json.RawMessage(`{"path":"notes.txt"}`)); !paddock.IsCode(err, paddock.CodeForbidden) {
		t.Fatalf("a menu-only agent read: %v", err)
	}
	if _, err := e.m.Broker.Exec(agentCtx, decider, paddock.ExecRequest{Argv: []string{"true"}}); !paddock.IsCode(err, paddock.CodeForbidden) {
		t.Fatalf("a menu-only agent ran a command: %v", err)
	}
	if f, err = e.m.Flows.PickEvent(agentCtx, decider, "send_back", paddock.MenuEventRequest{Findings: []string{"say why"}}); err != nil || f.State != "coding" {
		t.Fatalf("send_back: %+v %v", f, err)
	}
	if f, err = e.m.Flows.PickEvent(agentCtx, coder, "done", paddock.MenuEventRequest{}); err != nil || f.State != "deciding" {
		t.Fatalf("done again: %+v %v", f, err)
	}
	if f, err = e.m.Flows.PickEvent(agentCtx, f.Runs["deciding"], "accept", paddock.MenuEventRequest{}); err != nil || f.State != "accepted" || f.Ended.IsZero() {
		t.Fatalf("accept: %+v %v", f, err)
	}
}

// stepFaults lets a flow's first n saves through and fails the next: a
// daemon killed in the middle of a step, after it saved its intent.
type stepFaults struct {
	paddock.Store
	n int
}

func (s *stepFaults) Update(ctx context.Context, fn func(paddock.Tx) error) error {
	return s.Store.Update(ctx, func(tx paddock.Tx) error { return fn(&stepFaultTx{Tx: tx, s: s}) })
}

type stepFaultTx struct {
	paddock.Tx
	s *stepFaults
}

func (t *stepFaultTx) UpdateFlow(ctx context.Context, f *paddock.Flow) error {
	if t.s.n == 0 {
		return errors.New("killed in the middle of the step")
	}
	t.s.n--
	return t.Tx.UpdateFlow(ctx, f)
}

// TestFlowStepFinishedAfterACrash: a step interrupted after its intent
// was saved (the review run made, the flow not yet in reviewing) is
// finished by the next start: the flow is in reviewing with that very
// run, and no second run is made.
func TestFlowStepFinishedAfterACrash(t *testing.T) {
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
	store := e.m.Store
	lifecycle.SettleAll(e.m)                    // the write's look at the files reads the store too
	e.m.Store = &stepFaults{Store: store, n: 1} // the intent is saved, the step's end is not
	if _, err := e.m.Flows.PickEvent(agentCtx, coder, "done", paddock.MenuEventRequest{}); err == nil {
		t.Fatal("a step whose save failed went through")
	}
	lifecycle.SettleAll(e.m)
	e.m.Store = store
	mid, _ := e.m.Flows.Flow(ctx, f.ID)
	if mid.Entering != "reviewing" || mid.EnteringRun == "" || mid.State != "coding" {
		t.Fatalf("the interrupted step: %+v", mid)
	}
	// The coder's menu is empty meanwhile: a step is under way.
	if menu, _ := e.m.Flows.Menu(agentCtx, coder); len(menu.Items) != 0 {
		t.Fatalf("the coder's menu in the middle of a step: %+v", menu.Items)
	}
	if err := e.m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	e.m.Store.Close()
	e.open(t, nil)
	withSandbox(t, e)
	found, err := e.m.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := e.m.Flows.Flow(ctx, f.ID)
	if after.State != "reviewing" || after.Entering != "" || after.Runs["reviewing"] != mid.EnteringRun {
		t.Fatalf("after the restart: %+v (findings %+v)", after, found)
	}
	var finished bool
	for _, fd := range found {
		finished = finished || fd.Action == paddock.ActionFinished && fd.RunID == mid.EnteringRun
	}
	if !finished {
		t.Errorf("the restart does not report the finished step: %+v", found)
	}
	runs, _ := e.m.Runs.Runs(ctx, paddock.RunFilter{Project: "my-app"})
	var reviews int
	for _, r := range runs {
		if r.ReviewOf != nil && r.ReviewOf.Run == coder {
			reviews++
		}
	}
	if reviews != 1 {
		t.Errorf("%d review runs of the coder; want the one the step made", reviews)
	}
	if _, err := e.m.Flows.PickEvent(agentCtx, after.Runs["reviewing"], "approve", paddock.MenuEventRequest{Head: after.Head}); err != nil {
		t.Fatalf("the finished step's reviewer: %v", err)
	}
}
