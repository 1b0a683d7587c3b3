package lifecycle

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/agent"
	"github.com/paddock-dev/paddock/internal/durable"
)

// Flows moves a flow's steps: its tasks, its review runs and its menu.
type Flows struct {
	*kernel
	// the services it calls
	changes *Changes
	jobs    *Jobs
	reviews *Reviews
	runs    *Runs

	flowMu sync.Mutex // one flow step at a time (the store's versions guard other daemons)
}

// Flows: a workflow's state machine over runs (see paddock.Workflow). The
// menu an agent sees is the events of its flow's current state, if its run
// is that state's; any other event is refused, and recorded. A reviewer's
// approve is a finding: nothing here approves a change set.

// StartFlow starts a flow of a workflow (built in by name, or from a
// file's TOML) on a project, for a task: its start state's run is made
// (and its agent's command started, if its definition has one).
func (fl *Flows) StartFlow(ctx context.Context, req paddock.StartFlowRequest) (*paddock.Flow, error) {
	if err := fl.checkOpen(); err != nil {
		return nil, err
	}
	w, err := workflowOf(req)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Task) == "" {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "a flow needs the task")
	}
	if _, err := fl.Project(ctx, req.Project); err != nil {
		return nil, err
	}
	for _, s := range w.States {
		if s.Agent == "" {
			continue
		}
		def, err := fl.runs.agentForCreate(ctx, paddock.CreateRunRequest{Agent: s.Agent})
		if err != nil {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "workflow %s: state %s: %s", w.Name, s.Name, paddock.ErrorMessage(err))
		}
		if s.Reviews != "" && def.Workspace != string(paddock.AccessRead) {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "workflow %s: state %s reviews, so its agent %s must be read only (workspace = \"read\")", w.Name, s.Name, def.Name)
		}
	}
	t := now()
	f := &paddock.Flow{ID: "f-" + newID()[2:], Project: req.Project, Task: req.Task, Workflow: *w, Runs: map[string]string{}, CreatedAt: t, UpdatedAt: t}
	flowEvent(f, "flow.started", map[string]any{"workflow": w.Name, "task": req.Task})
	fl.flowMu.Lock()
	defer fl.flowMu.Unlock()
	// The first state's run is made before the flow is recorded: a crash
	// between them leaves a run no flow names, never a flow in no state.
	f.Entering, f.EnteringRun, f.EnteringNode = w.Start, newID(), fl.selfNode()
	notes, err := fl.enter(ctx, f)
	if err != nil {
		return nil, err
	}
	f.Version = 1
	if err := fl.update(ctx, func(tx paddock.Tx) error { return tx.CreateFlow(ctx, f) }); err != nil {
		return nil, err
	}
	return f, fl.started(ctx, f, notes, "")
}

// workflowOf is the workflow a request names or gives.
func workflowOf(req paddock.StartFlowRequest) (*paddock.Workflow, error) {
	switch {
	case req.Source != "" && req.Workflow != "":
		return nil, paddock.Errorf(paddock.CodeBadRequest, "a flow names its workflow or gives its file, not both")
	case req.Source != "":
		w, err := agent.ParseWorkflow(cmp.Or(req.File, "workflow.toml"), []byte(req.Source))
		if err != nil {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "%v", err)
		}
		return w, nil
	}
	w, ok := agent.Workflows()[req.Workflow]
	if !ok {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no built-in workflow %q (built in: %s); or give a workflow file", req.Workflow, paddock.WorkflowTaskWithReview)
	}
	return w, nil
}

// Flows lists a project's flows (all, if project is empty).
func (fl *Flows) Flows(ctx context.Context, project string) (out []*paddock.Flow, err error) {
	err = fl.Store.View(ctx, func(tx paddock.Tx) error {
		out, err = tx.Flows(ctx, project)
		return err
	})
	if out == nil {
		out = []*paddock.Flow{}
	}
	for _, f := range out {
		fl.describeFlow(f)
	}
	return out, err
}

// describeFlow says what a flow's record cannot: whether its first run
// submitted anything at all.
func (fl *Flows) describeFlow(f *paddock.Flow) {
	if start := f.Runs[f.Workflow.Start]; start != "" {
		_, err := fl.submission(start)
		f.Unsubmitted = err != nil
	}
}

// Flow returns a flow.
func (fl *Flows) Flow(ctx context.Context, id string) (f *paddock.Flow, err error) {
	err = fl.Store.View(ctx, func(tx paddock.Tx) error {
		f, err = tx.Flow(ctx, id)
		return err
	})
	if err == nil {
		fl.describeFlow(f)
	}
	return f, err
}

// flowOf finds the flow run id works in now (its current state's run),
// or, if none, why its menu is empty.
func (fl *Flows) flowOf(ctx context.Context, id string) (*paddock.Flow, *paddock.WorkflowState, error) {
	r, err := fl.Run(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if !takesWork(r) {
		return nil, nil, paddock.Errorf(paddock.CodeForbidden, "run %s is %s: it picks nothing", id, r.State()).WithRule(paddock.RuleMenu)
	}
	flows, err := fl.Flows(ctx, r.Project)
	if err != nil {
		return nil, nil, err
	}
	var was *paddock.Flow
	for _, f := range flows {
		for state, run := range f.Runs {
			if run != id {
				continue
			}
			if state == f.State && f.Ended.IsZero() && f.Entering == "" {
				return f, stateOf(&f.Workflow, state), nil
			}
			was = f
		}
	}
	if was != nil {
		return was, nil, paddock.Errorf(paddock.CodeForbidden, "run %s no longer works in flow %s, which is %s: nothing is on its menu", id, was.ID, was.State).WithRule(paddock.RuleMenu)
	}
	return nil, nil, paddock.Errorf(paddock.CodeForbidden, "run %s works in no flow: it has no menu", id).WithRule(paddock.RuleMenu)
}

func stateOf(w *paddock.Workflow, name string) *paddock.WorkflowState {
	for i := range w.States {
		if w.States[i].Name == name {
			return &w.States[i]
		}
	}
	return nil
}

// Menu is what run id's agent may pick now, and what it is given.
func (fl *Flows) Menu(ctx context.Context, id string) (*paddock.Menu, error) {
	f, s, err := fl.flowOf(ctx, id)
	if paddock.IsCode(err, paddock.CodeForbidden) {
		menu := &paddock.Menu{Items: []paddock.MenuItem{}}
		if f != nil {
			menu.Flow, menu.State = f.ID, f.State
		}
		return menu, nil
	}
	if err != nil {
		return nil, err
	}
	menu := &paddock.Menu{Flow: f.ID, State: f.State, Head: f.Head, Items: []paddock.MenuItem{},
		Inputs: map[string]any{"task": f.Task, "round": f.Round}}
	for _, t := range s.Transitions {
		menu.Items = append(menu.Items, paddock.MenuItem{Event: t.Event, Description: t.Description, Guarded: t.Guard != "", Findings: t.Findings})
	}
	if len(f.Findings) > 0 {
		menu.Inputs["findings"] = f.Findings
	}
	if r, err := fl.Run(ctx, id); err == nil && r.Access == paddock.AccessNone {
		// A menu-only agent has no workspace: what it decides on is given
		// to it, the work's submitted change set and its diff (masked as
		// every diff is), and the findings above.
		fl.workInputs(ctx, f, menu.Inputs)
	}
	if s.Reviews != "" {
		coder := f.Runs[s.Reviews]
		menu.Inputs["reviews_run"] = coder
		menu.Inputs["head"] = f.Head
		if cs, err := fl.reviewedChangeSet(ctx, id); err == nil {
			var paths []string
			for _, e := range cs.Entries {
				paths = append(paths, string(e.Op)+" "+e.Path)
			}
			menu.Inputs["change_set"] = map[string]any{"hash": cs.Hash, "entries": len(cs.Entries), "paths": paths}
			if len(cs.Entries) == 0 {
				menu.Inputs["note"] = "the coder changed nothing: the change set under review is empty"
			}
		}
	}
	return menu, nil
}

// reviewedChangeSet is the change set review run id holds: the one frozen
// under its hash, or an empty one when it stands at its coder's base (the
// coder submitted nothing).
func (fl *Flows) reviewedChangeSet(ctx context.Context, id string) (*paddock.ChangeSet, error) {
	r, err := fl.Run(ctx, id)
	if err != nil || r.ReviewOf == nil {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s reviews nothing", id)
	}
	if cs, err := fl.frozen(r.ReviewOf.Run, r.ReviewOf.Hash); err == nil {
		return cs, nil
	}
	if r.Workspace != nil && r.ReviewOf.Commit == r.Workspace.BaseRevision {
		if coder, err := fl.Run(ctx, r.ReviewOf.Run); err == nil && coder.Workspace != nil && coder.Workspace.BaseRevision == r.ReviewOf.Commit {
			return &paddock.ChangeSet{Hash: r.ReviewOf.Hash, Entries: []paddock.ChangeEntry{}}, nil
		}
	}
	return nil, paddock.Errorf(paddock.CodeConflict, "the change set run %s reviews is not kept", id)
}

// maxRefusals bounds the refusals a flow's log keeps (an agent picking
// off its menu in a loop grows nothing past it).
const maxRefusals = 100

// PickEvent takes event from run id's menu: the run must be live and its
// flow's current state's, the event on that state's menu, a guarded
// event's head the change set the picking run holds (and still the
// flow's), a findings event's findings given. A refusal of the current
// run is in the flow's log (up to maxRefusals).
//
// A step is crash-safe: the event, where it leads and the id of the run
// it makes are saved first (Entering); then the run is made; then the
// flow is saved in its new state. A restart finishes a step it finds
// entering (FinishFlows): the run's id finds the run if it was made.
func (fl *Flows) PickEvent(ctx context.Context, id, event string, req paddock.MenuEventRequest) (*paddock.Flow, error) {
	if err := paddock.ValidateName(event); err != nil {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "event: %s", paddock.ErrorMessage(err))
	}
	fl.flowMu.Lock()
	defer fl.flowMu.Unlock()
	f, s, err := fl.flowOf(ctx, id)
	if err != nil {
		return nil, err
	}
	refuse := func(err error) (*paddock.Flow, error) {
		fl.refuseEvent(ctx, f, id, event, err)
		return nil, err
	}
	var t *paddock.FlowTransition
	var menu []string
	for i := range s.Transitions {
		menu = append(menu, s.Transitions[i].Event)
		if s.Transitions[i].Event == event {
			t = &s.Transitions[i]
		}
	}
	if t == nil {
		return refuse(paddock.Errorf(paddock.CodeForbidden, "%q is not on run %s's menu in state %s of flow %s (its menu: %s)", event, id, f.State, f.ID, strings.Join(menu, ", ")).WithRule(paddock.RuleMenu))
	}
	r, err := fl.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.Guard == paddock.GuardHead {
		switch {
		case req.Head == "":
			return refuse(paddock.Errorf(paddock.CodeBadRequest, "%s is guarded by the head: give the hash of the change set you reviewed (head)", event))
		case r.ReviewOf == nil || req.Head != r.ReviewOf.Hash || req.Head != f.Head:
			// Only what this run holds can be named; what else there is
			// is not told.
			return refuse(paddock.Errorf(paddock.CodeConflict, "%s is not the change set this run reviews; review what it holds (capabilities: menu.head)", req.Head))
		}
		if sub, err := fl.submission(r.ReviewOf.Run); err == nil && sub.Hash != f.Head {
			return refuse(paddock.Errorf(paddock.CodeConflict, "the change set under review was submitted anew since this review began; the flow's review moves to it"))
		}
	}
	if t.Findings && len(req.Findings) == 0 {
		return refuse(paddock.Errorf(paddock.CodeBadRequest, "%s carries findings: say what must change (findings)", event))
	}
	head := f.Head
	if r.Access == paddock.AccessWrite && r.ReviewOf == nil {
		// Leaving a working state: its change set is submitted, unless it
		// is empty or already is; what is reviewed next is that hash,
		// fixed now (a write landing later is in no review).
		if head, err = fl.submitForFlow(ctx, id); err != nil {
			return refuse(err)
		}
	}
	to := t.To
	if t.Round {
		f.Round++
		if f.Workflow.MaxRounds > 0 && f.Round > f.Workflow.MaxRounds {
			to = agent.FailedState
		}
	}
	if t.Findings {
		f.Findings = req.Findings
	}
	flowEvent(f, "flow.event", map[string]any{"event": event, "from": f.State, "to": to, "run": id, "agent": paddock.AgentCall(ctx),
		"head": req.Head, "findings": req.Findings, "note": req.Note})
	f.Entering, f.EnteringRun, f.EnteringNode, f.Head = to, newID(), fl.selfNode(), head
	if err := fl.saveFlow(ctx, f); err != nil {
		return nil, err
	}
	return fl.finishStep(ctx, f, id)
}

// finishStep makes the run of the state f is entering and saves f in it;
// then started tells the runs and starts the agent. A state that cannot
// be entered (its agent's definition is gone, say) leaves f where it was,
// and says why in its log.
func (fl *Flows) finishStep(ctx context.Context, f *paddock.Flow, from string) (*paddock.Flow, error) {
	to := f.Entering
	notes, err := fl.enter(ctx, f)
	if err != nil {
		f.Entering, f.EnteringRun, f.EnteringNode = "", "", ""
		flowEvent(f, "flow.refused", map[string]any{"state": to, "reason": paddock.ErrorMessage(err)})
		if serr := fl.saveFlow(ctx, f); serr != nil {
			fl.log().Warn("recording a step that could not be taken failed", "flow", f.ID, "err", serr)
		}
		return nil, err
	}
	if err := fl.saveFlow(ctx, f); err != nil {
		return nil, err
	}
	return f, fl.started(ctx, f, append(notes, from), from)
}

// finishFlows finishes, after a restart, the steps a crash left entering.
func (fl *Flows) finishFlows(ctx context.Context) []paddock.Finding {
	fl.flowMu.Lock()
	defer fl.flowMu.Unlock()
	flows, err := fl.Flows(ctx, "")
	if err != nil {
		fl.log().Warn("listing flows failed", "err", err)
		return nil
	}
	var out []paddock.Finding
	for _, f := range flows {
		if f.Entering == "" || f.EnteringNode != fl.selfNode() {
			continue // another node's step is its own to finish
		}
		finding := paddock.Finding{RunID: f.EnteringRun, Issue: "flow " + f.ID + " was interrupted entering " + f.Entering, Action: paddock.ActionFinished}
		if _, err := fl.finishStep(ctx, f, f.Runs[f.State]); err != nil {
			finding.Action = paddock.ActionFailed
			fl.log().Error("a flow's step could not be finished", "flow", f.ID, "err", err)
		}
		out = append(out, finding)
	}
	return out
}

// submitForFlow submits run id's change set unless it is empty or
// submitted already, and returns its hash: what a review of it holds.
func (fl *Flows) submitForFlow(ctx context.Context, id string) (string, error) {
	cs, err := fl.changes.ChangeSet(ctx, id)
	if err != nil {
		return "", err
	}
	if len(cs.Entries) == 0 {
		return cs.Hash, nil
	}
	if s, err := fl.submission(id); err == nil && s.Hash == cs.Hash {
		return cs.Hash, nil
	}
	// As the flow: the agent's own submit is refused once its state is
	// left (refuseOffFlow), this one is the step's.
	if _, err = fl.changes.SubmitExpecting(context.WithValue(context.WithoutCancel(paddock.WithoutAgent(ctx)), flowStepKey{}, true), id, cs.Hash); err != nil {
		return "", err
	}
	return cs.Hash, nil
}

// enter makes the run of the state f is entering (f.Entering), with the
// id f.EnteringRun (found, not made again, if it exists): a review run of
// the change set f.Head for a review state, the working state's own run
// again if it is still live, or a new run; it tells it its task, and
// moves f into the state. It returns the runs to tell once f is saved.
func (fl *Flows) enter(ctx context.Context, f *paddock.Flow) (notes []string, err error) {
	to := f.Entering
	s := stateOf(&f.Workflow, to)
	if s == nil {
		return nil, paddock.Errorf(paddock.CodeConflict, "flow %s: no state %s", f.ID, to)
	}
	if s.End {
		f.State, f.Entering, f.EnteringRun, f.EnteringNode = to, "", "", ""
		f.Ended = now()
		flowEvent(f, "flow.state", map[string]any{"state": to, "round": f.Round})
		flowEvent(f, "flow.ended", map[string]any{"state": to})
		return nil, nil
	}
	ctx = context.WithoutCancel(ctx) // the flow's runs are made whoever asked
	def, err := fl.runs.agentForCreate(ctx, paddock.CreateRunRequest{Agent: s.Agent})
	if err != nil {
		return nil, err
	}
	var run *paddock.Run
	task := f.Task
	if s.Reviews != "" {
		coder, err := fl.Run(ctx, f.Runs[s.Reviews])
		if err != nil {
			return nil, err
		}
		if def.Workspace != string(paddock.AccessRead) {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "state %s reviews, but agent %s does not read only", to, def.Name)
		}
		if run, err = fl.reviews.makeReview(ctx, coder, def, f.Head, f.EnteringRun, f.ID); err != nil {
			return nil, err
		}
		task = fmt.Sprintf("Review the change set %s of run %s (the task was: %s). Pick approve or request_changes from your menu, with that hash as head.", f.Head, coder.ID, f.Task)
	} else {
		if id := f.Runs[to]; id != "" {
			if r, err := fl.Run(ctx, id); err == nil && takesWork(r) {
				run = r
			}
		}
		if run == nil {
			if r, err := fl.Run(ctx, f.EnteringRun); err == nil {
				run = r
			} else if run, err = fl.runs.create(ctx, newRun{id: f.EnteringRun, req: paddock.CreateRunRequest{Project: f.Project}, def: def}); err != nil {
				return nil, err
			}
		}
		if len(f.Findings) > 0 {
			task += "\n\nThe reviewer sent it back: " + strings.Join(f.Findings, "; ")
		}
	}
	if err := fl.saveTask(run.ID, def, task); err != nil {
		return nil, err
	}
	f.State, f.Entering, f.EnteringRun, f.EnteringNode = to, "", "", ""
	f.Runs[to] = run.ID
	f.UpdatedAt = now()
	flowEvent(f, "flow.state", map[string]any{"state": to, "round": f.Round, "run": run.ID})
	return []string{run.ID}, nil
}

// takesWork says whether run r takes work: its workspace ready, active or
// checkpointed; one with none, not removed.
func takesWork(r *paddock.Run) bool {
	if r.Workspace == nil {
		return r.RemovedAt.IsZero()
	}
	return slices.Contains([]paddock.WorkspaceState{paddock.StateReady, paddock.StateActive, paddock.StateCheckpointed}, r.State())
}

// started is what follows a step once the flow is saved: the runs it
// touched are told (their menus changed: an MCP server lists again, and
// reads the saved flow), a finished review run is given back (now, or
// when its agent's command ends: afterJob), and the new state's agent
// command is started.
func (fl *Flows) started(ctx context.Context, f *paddock.Flow, notes []string, from string) error {
	// The state's agent is the flow's, not whoever picked the event that
	// led here (a reviewer asking for changes does not drive the coder).
	ctx = paddock.WithCaller(context.WithoutCancel(ctx), nil)
	fl.noteFlow(ctx, f, notes...)
	if from != "" {
		fl.giveBackReview(ctx, from)
	}
	s := stateOf(&f.Workflow, f.State)
	if s == nil || s.End || s.Agent == "" {
		return nil
	}
	def, err := fl.runs.agentForCreate(ctx, paddock.CreateRunRequest{Agent: s.Agent})
	if err != nil {
		return err
	}
	if len(def.Command) > 0 {
		if _, err := fl.jobs.StartJob(ctx, f.Runs[f.State], paddock.StartJobRequest{Kind: paddock.JobAgent}); err != nil && !paddock.IsCode(err, paddock.CodeBusy) {
			return err
		}
	}
	return nil
}

// giveBackReview rejects review run id of a flow once its review is over,
// unless its agent's command still runs (afterJob does it then).
func (fl *Flows) giveBackReview(ctx context.Context, id string) {
	r, err := fl.Run(ctx, id)
	if err != nil || r.ReviewOf == nil || r.ReviewOf.Flow == "" || !takesWork(r) {
		return
	}
	if f, err := fl.Flow(ctx, r.ReviewOf.Flow); err == nil && f.Runs[f.State] == id && f.Ended.IsZero() {
		return // still its flow's current run
	}
	if err := fl.jobs.refuseWhileJobRuns(ctx, id); err != nil {
		return // its command ends first
	}
	if _, err := fl.runs.Reject(ctx, id); err != nil {
		fl.log().Warn("a finished review run could not be given back", "run", id, "err", err)
	}
}

// refuseOffFlow refuses an agent's own submit once its run's state in its
// flow is over: what is reviewed, and what a person approves, is what the
// flow submitted when the agent said it was done.
func (fl *Flows) refuseOffFlow(ctx context.Context, id string) error {
	if !paddock.AgentCall(ctx) {
		return nil
	}
	// flowOf names the flow of a run that worked in one but no longer
	// does (its state left, or the flow ended).
	if f, _, err := fl.flowOf(ctx, id); f != nil && err != nil {
		return paddock.Errorf(paddock.CodeForbidden, "run %s's state in flow %s is over (the flow is %s): its change set was submitted when it picked its event; nothing is submitted now",
			id, f.ID, f.State).WithRule(paddock.RuleMenu)
	}
	return nil
}

// saveTask keeps what a run's agent is asked, as a bootstrap does: the
// task artifact, and what a job of kind agent starts.
func (fl *Flows) saveTask(id string, def *paddock.AgentDefinition, task string) error {
	b, _ := json.MarshalIndent(bootstrapRecord{Agent: *def, Task: task}, "", "  ")
	if err := durable.WriteFile(filepath.Join(fl.runDir(id), "bootstrap.json"), b); err != nil {
		return internal("saving the run's task failed", err)
	}
	return nil
}

// noteFlow records, on the runs a step touched, that their flow moved:
// their menus changed (an MCP server lists its tools again).
func (fl *Flows) noteFlow(ctx context.Context, f *paddock.Flow, runs ...string) {
	for _, id := range runs {
		if id == "" {
			continue
		}
		if err := fl.record(ctx, id, paddock.EventFlowState, map[string]any{"flow": f.ID, "state": f.State}); err != nil {
			fl.log().Warn("recording a flow's step on a run failed", "run", id, "flow", f.ID, "err", err)
		}
	}
}

// refuseEvent records a refused pick in the flow's log, up to maxRefusals.
func (fl *Flows) refuseEvent(ctx context.Context, f *paddock.Flow, run, event string, why error) {
	n := 0
	for _, e := range f.Events {
		if e.Type == "flow.refused" {
			n++
		}
	}
	if n >= maxRefusals {
		fl.log().Info("a refused pick is not written in the flow's log: it holds enough", "flow", f.ID, "run", run, "event", event)
		return
	}
	flowEvent(f, "flow.refused", map[string]any{"event": event, "run": run, "state": f.State, "code": paddock.ErrorCode(why), "reason": paddock.ErrorMessage(why)})
	if err := fl.saveFlow(ctx, f); err != nil {
		fl.log().Warn("recording a refused event failed", "flow", f.ID, "err", err)
	}
}

func flowEvent(f *paddock.Flow, typ string, data map[string]any) {
	f.Events = append(f.Events, paddock.FlowEvent{Seq: int64(len(f.Events)) + 1, At: now(), Type: typ, Data: data})
}

// saveFlow writes f over the version it was read at.
func (fl *Flows) saveFlow(ctx context.Context, f *paddock.Flow) error {
	f.Version++
	f.UpdatedAt = now()
	ctx = context.WithoutCancel(ctx)
	return fl.update(ctx, func(tx paddock.Tx) error { return tx.UpdateFlow(ctx, f) })
}

// maxMenuDiff bounds the diff a menu-only agent is given in its inputs.
const maxMenuDiff = 64 << 10

// workInputs adds the flow's work (its start state's run's submitted
// change set: its summary and its diff, up to maxMenuDiff) to inputs.
func (fl *Flows) workInputs(ctx context.Context, f *paddock.Flow, inputs map[string]any) {
	work := f.Runs[f.Workflow.Start]
	if work == "" {
		return
	}
	inputs["work_run"] = work
	s, err := fl.submission(work)
	if err != nil {
		inputs["note"] = "the work has no submitted change set"
		return
	}
	cs, err := fl.frozen(work, s.Hash)
	if err != nil {
		return
	}
	var paths []string
	for _, e := range cs.Entries {
		paths = append(paths, string(e.Op)+" "+e.Path)
	}
	inputs["change_set"] = map[string]any{"hash": cs.Hash, "entries": len(cs.Entries), "paths": paths}
	d, _, err := fl.changes.ChangeSetDiff(ctx, work, s.Hash)
	if err != nil {
		return
	}
	defer d.Close()
	b, _ := io.ReadAll(io.LimitReader(d, maxMenuDiff+1))
	if len(b) > maxMenuDiff {
		b = append(b[:maxMenuDiff], []byte("\n[… the diff goes on: it is longer than a menu carries]\n")...)
	}
	inputs["diff"] = string(b)
}

// flowStepKey marks a submit a flow's step makes itself (it holds flowMu).
type flowStepKey struct{}

// moveFlowReviews follows a submission of run coder made outside its
// flow's steps (the operator's): each flow reviewing coder's change set
// moves its review to the new hash, with a new review run; the older one
// can no longer pick (its head is not the flow's) and is given back.
func (fl *Flows) moveFlowReviews(ctx context.Context, coder, hash string) {
	if ctx.Value(flowStepKey{}) != nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	fl.flowMu.Lock()
	defer fl.flowMu.Unlock()
	r, err := fl.Run(ctx, coder)
	if err != nil {
		return
	}
	flows, err := fl.Flows(ctx, r.Project)
	if err != nil {
		fl.log().Warn("listing flows failed", "err", err)
		return
	}
	for _, f := range flows {
		s := stateOf(&f.Workflow, f.State)
		if s == nil || s.Reviews == "" || f.Runs[s.Reviews] != coder || f.Head == hash || !f.Ended.IsZero() || f.Entering != "" {
			continue
		}
		old := f.Runs[f.State]
		flowEvent(f, "flow.moved", map[string]any{"state": f.State, "from_head": f.Head, "head": hash, "review": old})
		f.Entering, f.EnteringRun, f.EnteringNode, f.Head = f.State, newID(), fl.selfNode(), hash
		if err := fl.saveFlow(ctx, f); err != nil {
			fl.log().Warn("moving a flow's review failed", "flow", f.ID, "err", err)
			continue
		}
		if _, err := fl.finishStep(ctx, f, old); err != nil {
			fl.log().Warn("moving a flow's review failed", "flow", f.ID, "err", err)
		}
	}
}
