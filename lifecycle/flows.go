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

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/agent"
	"github.com/paddock-dev/paddock/internal/durable"
)

// Flows: a workflow's state machine over runs (see paddock.Workflow). The
// menu an agent sees is the events of its flow's current state, if its run
// is that state's; any other event is refused, and recorded. A reviewer's
// approve is a finding: nothing here approves a change set.

// StartFlow starts a flow of a workflow (built in by name, or from a
// file's TOML) on a project, for a task: its start state's run is made
// (and its agent's command started, if its definition has one).
func (m *Manager) StartFlow(ctx context.Context, req paddock.StartFlowRequest) (*paddock.Flow, error) {
	if err := m.checkOpen(); err != nil {
		return nil, err
	}
	w, err := workflowOf(req)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Task) == "" {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "a flow needs the task")
	}
	if _, err := m.Project(ctx, req.Project); err != nil {
		return nil, err
	}
	for _, s := range w.States {
		if s.Agent == "" {
			continue
		}
		def, err := m.agentForCreate(ctx, paddock.CreateRunRequest{Agent: s.Agent})
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
	m.flowMu.Lock()
	defer m.flowMu.Unlock()
	if err := m.update(ctx, func(tx paddock.Tx) error { return tx.CreateFlow(ctx, f) }); err != nil {
		return nil, err
	}
	notes, err := m.enter(ctx, f, w.Start, "")
	if err != nil {
		flowEvent(f, "flow.refused", map[string]any{"state": w.Start, "reason": paddock.ErrorMessage(err)})
		m.saveFlow(ctx, f)
		return nil, err
	}
	if err := m.saveFlow(ctx, f); err != nil {
		return nil, err
	}
	return f, m.started(ctx, f, notes)
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
func (m *Manager) Flows(ctx context.Context, project string) (out []*paddock.Flow, err error) {
	err = m.Store.View(ctx, func(tx paddock.Tx) error {
		out, err = tx.Flows(ctx, project)
		return err
	})
	if out == nil {
		out = []*paddock.Flow{}
	}
	return out, err
}

// Flow returns a flow.
func (m *Manager) Flow(ctx context.Context, id string) (f *paddock.Flow, err error) {
	err = m.Store.View(ctx, func(tx paddock.Tx) error {
		f, err = tx.Flow(ctx, id)
		return err
	})
	return f, err
}

// flowOf finds the flow run id works in now (its current state's run),
// or, if none, why its menu is empty.
func (m *Manager) flowOf(ctx context.Context, id string) (*paddock.Flow, *paddock.WorkflowState, error) {
	r, err := m.Run(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	flows, err := m.Flows(ctx, r.Project)
	if err != nil {
		return nil, nil, err
	}
	var was *paddock.Flow
	for _, f := range flows {
		for state, run := range f.Runs {
			if run != id {
				continue
			}
			if state == f.State && f.Ended.IsZero() {
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
func (m *Manager) Menu(ctx context.Context, id string) (*paddock.Menu, error) {
	f, s, err := m.flowOf(ctx, id)
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
	if r, err := m.Run(ctx, id); err == nil && r.Access == paddock.AccessNone {
		// A menu-only agent has no workspace: what it decides on is given
		// to it, the work's submitted change set and its diff (masked as
		// every diff is), and the findings above.
		m.workInputs(ctx, f, menu.Inputs)
	}
	if s.Reviews != "" {
		coder := f.Runs[s.Reviews]
		menu.Inputs["reviews_run"] = coder
		menu.Inputs["head"] = f.Head
		if cs, err := m.reviewedChangeSet(ctx, id); err == nil {
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

// reviewedChangeSet is the change set review run id holds (empty if the
// coder submitted nothing).
func (m *Manager) reviewedChangeSet(ctx context.Context, id string) (*paddock.ChangeSet, error) {
	r, err := m.Run(ctx, id)
	if err != nil || r.ReviewOf == nil {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s reviews nothing", id)
	}
	if s, err := m.submission(r.ReviewOf.Run); err == nil && s.Hash == r.ReviewOf.Hash {
		return m.frozen(r.ReviewOf.Run, s.Hash)
	}
	return &paddock.ChangeSet{Hash: r.ReviewOf.Hash, Entries: []paddock.ChangeEntry{}}, nil
}

// PickEvent takes event from run id's menu: the run must be its flow's
// current state's, the event on that state's menu, a guarded event's head
// the change set still under review, a findings event's findings given.
// Anything else is refused, and the refusal is in the flow's log.
func (m *Manager) PickEvent(ctx context.Context, id, event string, req paddock.MenuEventRequest) (*paddock.Flow, error) {
	m.flowMu.Lock()
	defer m.flowMu.Unlock()
	f, s, err := m.flowOf(ctx, id)
	if err != nil {
		if f != nil {
			m.refuseEvent(ctx, f, id, event, err)
		}
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
		err := paddock.Errorf(paddock.CodeForbidden, "%q is not on run %s's menu in state %s of flow %s (its menu: %s)", event, id, f.State, f.ID, strings.Join(menu, ", ")).WithRule(paddock.RuleMenu)
		m.refuseEvent(ctx, f, id, event, err)
		return nil, err
	}
	if t.Guard == paddock.GuardHead {
		head, herr := m.headOf(ctx, f, s)
		switch {
		case herr != nil:
			err = herr
		case req.Head == "":
			err = paddock.Errorf(paddock.CodeBadRequest, "%s is guarded by the head: give the hash of the change set you reviewed (head)", event)
		case req.Head != head:
			err = paddock.Errorf(paddock.CodeConflict, "the change set under review is no longer %s: it moved since you looked; review it again", req.Head).WithDetail("head", head)
		}
		if err != nil {
			m.refuseEvent(ctx, f, id, event, err)
			return nil, err
		}
	}
	if t.Findings && len(req.Findings) == 0 {
		err := paddock.Errorf(paddock.CodeBadRequest, "%s carries findings: say what must change (findings)", event)
		m.refuseEvent(ctx, f, id, event, err)
		return nil, err
	}
	if r, err := m.Run(ctx, id); err == nil && r.Access == paddock.AccessWrite && r.ReviewOf == nil {
		// Leaving a working state: its change set is submitted, unless it
		// is empty or already is (a reviewer must see exactly it).
		if err := m.submitForFlow(ctx, id); err != nil {
			m.refuseEvent(ctx, f, id, event, err)
			return nil, err
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
	if s.Reviews != "" {
		// The review is over: its run is given back (its findings are in the log).
		if _, err := m.Reject(context.WithoutCancel(ctx), id); err != nil {
			// Its agent's command may still be running (it picked the
			// event): the run is off the flow all the same, its menu empty.
			m.log().Info("a finished review run stays until its command ends", "run", id, "err", err)
		}
	}
	notes, err := m.enter(ctx, f, to, id)
	if err != nil {
		flowEvent(f, "flow.refused", map[string]any{"state": to, "reason": paddock.ErrorMessage(err)})
		m.saveFlow(ctx, f)
		return nil, err
	}
	if err := m.saveFlow(ctx, f); err != nil {
		return nil, err
	}
	return f, m.started(ctx, f, notes)
}

// headOf is the change set a review state's guarded events must name: the
// review run's, as long as the coder has not submitted anew since.
func (m *Manager) headOf(ctx context.Context, f *paddock.Flow, s *paddock.WorkflowState) (string, error) {
	coder := f.Runs[s.Reviews]
	if sub, err := m.submission(coder); err == nil && sub.Hash != f.Head {
		return sub.Hash, nil // moved: the coder submitted again
	}
	return f.Head, nil
}

// submitForFlow submits run id's change set unless it is empty or
// submitted already.
func (m *Manager) submitForFlow(ctx context.Context, id string) error {
	cs, err := m.ChangeSet(ctx, id)
	if err != nil {
		return err
	}
	if len(cs.Entries) == 0 {
		return nil
	}
	if s, err := m.submission(id); err == nil && s.Hash == cs.Hash {
		return nil
	}
	_, err = m.SubmitExpecting(context.WithoutCancel(ctx), id, cs.Hash)
	return err
}

// enter moves flow f into state to: its run is made (a review run of the
// coder's submitted change set for a review state, the working state's
// own run again if it is still live) and told its task. It returns the
// runs to tell once f is saved (started), which also starts the agent's
// command if its definition has one.
func (m *Manager) enter(ctx context.Context, f *paddock.Flow, to, from string) (notes []string, err error) {
	s := stateOf(&f.Workflow, to)
	if s == nil {
		return nil, paddock.Errorf(paddock.CodeConflict, "flow %s: no state %s", f.ID, to)
	}
	f.State, f.UpdatedAt = to, now()
	flowEvent(f, "flow.state", map[string]any{"state": to, "round": f.Round})
	if s.End {
		f.Ended = f.UpdatedAt
		flowEvent(f, "flow.ended", map[string]any{"state": to})
		return []string{from}, nil
	}
	ctx = context.WithoutCancel(ctx) // the flow's runs are made whoever asked
	def, err := m.agentForCreate(ctx, paddock.CreateRunRequest{Agent: s.Agent})
	if err != nil {
		return nil, err
	}
	var run *paddock.Run
	task := f.Task
	if s.Reviews != "" {
		coder := f.Runs[s.Reviews]
		if run, err = m.reviewForFlow(ctx, coder, def); err != nil {
			return nil, err
		}
		f.Head = run.ReviewOf.Hash
		task = fmt.Sprintf("Review the change set %s of run %s (the task was: %s). Pick approve or request_changes from your menu, with that hash as head.", f.Head, coder, f.Task)
	} else {
		f.Head = ""
		if id := f.Runs[to]; id != "" {
			if r, err := m.Run(ctx, id); err == nil && r.Workspace != nil && slices.Contains([]paddock.WorkspaceState{paddock.StateReady, paddock.StateActive, paddock.StateCheckpointed}, r.State()) {
				run = r
			}
		}
		if run == nil {
			if run, err = m.createRun(ctx, paddock.CreateRunRequest{Project: f.Project}, def, nil); err != nil {
				return nil, err
			}
		}
		if len(f.Findings) > 0 {
			task += "\n\nThe reviewer sent it back: " + strings.Join(f.Findings, "; ")
		}
	}
	f.Runs[to] = run.ID
	if err := m.saveTask(run.ID, def, task); err != nil {
		return nil, err
	}
	return []string{from, run.ID}, nil
}

// started is what follows a step once the flow is saved: the runs it
// touched are told (their menus changed: an MCP server lists again, and
// it reads the saved flow), and the new state's agent command started.
func (m *Manager) started(ctx context.Context, f *paddock.Flow, notes []string) error {
	ctx = context.WithoutCancel(ctx)
	m.noteFlow(ctx, f, notes...)
	s := stateOf(&f.Workflow, f.State)
	if s == nil || s.End || s.Agent == "" {
		return nil
	}
	def, err := m.agentForCreate(ctx, paddock.CreateRunRequest{Agent: s.Agent})
	if err != nil {
		return err
	}
	if len(def.Command) > 0 {
		if _, err := m.StartJob(ctx, f.Runs[f.State], paddock.StartJobRequest{Kind: paddock.JobAgent}); err != nil {
			return err
		}
	}
	return nil
}

// reviewForFlow is the review run of coder's change set: its submission,
// or, if it submitted nothing, its base (an empty change set to review).
func (m *Manager) reviewForFlow(ctx context.Context, coder string, def *paddock.AgentDefinition) (*paddock.Run, error) {
	if _, err := m.submission(coder); err == nil {
		return m.Review(ctx, coder, def.Name)
	}
	r, p, err := m.runAndProject(ctx, coder)
	if err != nil {
		return nil, err
	}
	cs, err := m.ChangeSet(ctx, coder)
	if err != nil {
		return nil, err
	}
	review := &paddock.ReviewOf{Run: coder, Hash: cs.Hash, Commit: r.Workspace.BaseRevision}
	rv, err := m.createReviewRun(ctx, p, r, def, review)
	if err != nil {
		return nil, err
	}
	return rv, m.record(ctx, coder, paddock.EventReviewStarted, map[string]any{"review": rv.ID, "hash": cs.Hash, "agent": def.Name, "empty": true})
}

// saveTask keeps what a run's agent is asked, as a bootstrap does: the
// task artifact, and what a job of kind agent starts.
func (m *Manager) saveTask(id string, def *paddock.AgentDefinition, task string) error {
	b, _ := json.MarshalIndent(bootstrapRecord{Agent: *def, Task: task}, "", "  ")
	if err := durable.WriteFile(filepath.Join(m.runDir(id), "bootstrap.json"), b); err != nil {
		return internal("saving the run's task failed", err)
	}
	return nil
}

// noteFlow records, on the runs a step touched, that their flow moved:
// their menus changed (an MCP server lists its tools again).
func (m *Manager) noteFlow(ctx context.Context, f *paddock.Flow, runs ...string) {
	for _, id := range runs {
		if id == "" {
			continue
		}
		if err := m.record(ctx, id, paddock.EventFlowState, map[string]any{"flow": f.ID, "state": f.State}); err != nil {
			m.log().Warn("recording a flow's step on a run failed", "run", id, "flow", f.ID, "err", err)
		}
	}
}

// refuseEvent records a refused pick in the flow's log.
func (m *Manager) refuseEvent(ctx context.Context, f *paddock.Flow, run, event string, why error) {
	flowEvent(f, "flow.refused", map[string]any{"event": event, "run": run, "state": f.State, "code": paddock.ErrorCode(why), "reason": paddock.ErrorMessage(why)})
	if err := m.saveFlow(ctx, f); err != nil {
		m.log().Warn("recording a refused event failed", "flow", f.ID, "err", err)
	}
}

func flowEvent(f *paddock.Flow, typ string, data map[string]any) {
	f.Events = append(f.Events, paddock.FlowEvent{Seq: int64(len(f.Events)) + 1, At: now(), Type: typ, Data: data})
}

// saveFlow writes f over the version it was read at.
func (m *Manager) saveFlow(ctx context.Context, f *paddock.Flow) error {
	f.Version++
	f.UpdatedAt = now()
	return m.update(context.WithoutCancel(ctx), func(tx paddock.Tx) error { return tx.UpdateFlow(ctx, f) })
}

// maxMenuDiff bounds the diff a menu-only agent is given in its inputs.
const maxMenuDiff = 64 << 10

// workInputs adds the flow's work (its start state's run's submitted
// change set: its summary and its diff, up to maxMenuDiff) to inputs.
func (m *Manager) workInputs(ctx context.Context, f *paddock.Flow, inputs map[string]any) {
	work := f.Runs[f.Workflow.Start]
	if work == "" {
		return
	}
	inputs["work_run"] = work
	s, err := m.submission(work)
	if err != nil {
		inputs["note"] = "the work has no submitted change set"
		return
	}
	cs, err := m.frozen(work, s.Hash)
	if err != nil {
		return
	}
	var paths []string
	for _, e := range cs.Entries {
		paths = append(paths, string(e.Op)+" "+e.Path)
	}
	inputs["change_set"] = map[string]any{"hash": cs.Hash, "entries": len(cs.Entries), "paths": paths}
	d, _, err := m.ChangeSetDiff(ctx, work, s.Hash)
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
