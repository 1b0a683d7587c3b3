package paddock

import "time"

// A workflow is a state machine over runs: each state names the agent
// definition whose run works in it, and its transitions are the events
// that agent may pick from (its menu). A flow is one workflow's run on a
// project, for a task.

// Workflow is a workflow's definition (a TOML file, or built in).
type Workflow struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Start is the state a flow begins in.
	Start string `json:"start"`
	// MaxRounds bounds the transitions marked round (a reviewer sending
	// the work back): the one past it ends the flow in failed.
	MaxRounds int             `json:"max_rounds,omitempty"`
	States    []WorkflowState `json:"states"`
}

// WorkflowState is one state of a workflow.
type WorkflowState struct {
	Name string `json:"name"`
	// Agent names the definition of the run that works in this state;
	// empty for a person's state (awaiting_approval) or an end.
	Agent string `json:"agent,omitempty"`
	// Review makes the state's run a review run of the change set the
	// flow's coder (the run of the state named by Reviews) submitted.
	Reviews string `json:"reviews,omitempty"`
	// End marks a state no event leaves: the flow is over.
	End         bool             `json:"end,omitempty"`
	Transitions []FlowTransition `json:"transitions,omitempty"`
}

// FlowTransition is one event of a state's menu and where it leads.
type FlowTransition struct {
	Event       string `json:"event"`
	To          string `json:"to"`
	Description string `json:"description,omitempty"`
	// Guard "head == context.head" makes the event carry the change-set
	// hash its agent looked at; it is refused if the hash moved since.
	Guard string `json:"guard,omitempty"`
	// Round counts the event against the workflow's MaxRounds.
	Round bool `json:"round,omitempty"`
	// Findings says the event carries the agent's findings (required).
	Findings bool `json:"findings,omitempty"`
}

// GuardHead is the one guard a transition may have.
const GuardHead = "head == context.head"

// The built-in workflow's name.
const WorkflowTaskWithReview = "task-with-review"

// Flow is one run of a workflow on a project, for a task: where it is,
// its runs, and its log.
type Flow struct {
	ID       string   `json:"id"`
	Project  string   `json:"project"`
	Task     string   `json:"task"`
	Workflow Workflow `json:"workflow"`
	State    string   `json:"state"`
	// Round counts the round transitions taken.
	Round int `json:"round"`
	// Runs maps each state that has had a run to its latest run.
	Runs map[string]string `json:"runs,omitempty"`
	// Head is the context's head: the change-set hash the current state's
	// agent works on (a review run's), which a guarded event must carry.
	Head string `json:"head,omitempty"`
	// Findings are the latest findings an event carried (a reviewer's).
	Findings []string `json:"findings,omitempty"`
	// Unsubmitted says the flow's first run has no submitted change set
	// (its agent changed nothing): nothing waits for approval, whatever
	// the reviewer picked. Said when the flow is read, never stored.
	Unsubmitted bool `json:"unsubmitted,omitempty"`
	// Entering names the state whose run is being made: written before
	// the run is, so that a restart finishes the step (the run's id is
	// derived from the flow and the step, so it is found, never made twice).
	Entering    string `json:"entering,omitempty"`
	EnteringRun string `json:"entering_run,omitempty"`
	// EnteringNode, with nodes that share a store, is the node making the
	// run Entering names: only it finishes the step after a crash (the
	// run is made on it).
	EnteringNode string `json:"entering_node,omitempty"`
	// Ended is when the flow reached an end state.
	Ended     time.Time   `json:"ended,omitzero"`
	CreatedAt time.Time   `json:"created_at"`
	UpdatedAt time.Time   `json:"updated_at"`
	Events    []FlowEvent `json:"events,omitempty"`
	// Version counts the flow's writes; an update must name the one it read.
	Version int64 `json:"version"`
}

// FlowEvent is one step of a flow's log, gap-free from 1.
type FlowEvent struct {
	Seq  int64          `json:"seq"`
	At   time.Time      `json:"at"`
	Type string         `json:"type"` // flow.started, flow.event, flow.refused, flow.state, flow.ended
	Data map[string]any `json:"data,omitempty"`
}

// StartFlowRequest starts a flow.
type StartFlowRequest struct {
	// Workflow is a built-in workflow's name; or give Source.
	Workflow string `json:"workflow,omitempty"`
	// Source is a workflow file's TOML, File its name (for errors).
	Source  string `json:"source,omitempty"`
	File    string `json:"file,omitempty"`
	Project string `json:"project"`
	Task    string `json:"task"`
}

// MenuEventRequest picks an event from a run's menu.
type MenuEventRequest struct {
	// Head is the change-set hash the agent looked at (a guarded event's).
	Head     string   `json:"head,omitempty"`
	Findings []string `json:"findings,omitempty"`
	Note     string   `json:"note,omitempty"`
}

// MenuItem is one event a run's agent may pick now.
type MenuItem struct {
	Event       string `json:"event"`
	Description string `json:"description,omitempty"`
	Guarded     bool   `json:"guarded,omitempty"`
	Findings    bool   `json:"findings,omitempty"`
}

// Menu is what a run's agent may pick from now: its flow's current state's
// events, if the run is that state's.
type Menu struct {
	Flow  string     `json:"flow,omitempty"`
	State string     `json:"state,omitempty"`
	Head  string     `json:"head,omitempty"`
	Items []MenuItem `json:"items"`
	// Inputs is what the state's agent is given: the task, the change
	// set under review and its summary, the findings of the last round.
	Inputs map[string]any `json:"inputs,omitempty"`
}
