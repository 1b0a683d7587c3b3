package agent

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/BurntSushi/toml"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/broker"
)

// workflowFile is a workflow as TOML spells it.
type workflowFile struct {
	Name        string      `toml:"name"`
	Description string      `toml:"description"`
	Start       string      `toml:"start"`
	MaxRounds   int         `toml:"max_rounds"`
	State       []stateFile `toml:"state"`
}

type stateFile struct {
	Name       string           `toml:"name"`
	Agent      string           `toml:"agent"`
	Reviews    string           `toml:"reviews"`
	End        bool             `toml:"end"`
	Transition []transitionFile `toml:"transition"`
}

type transitionFile struct {
	Event       string `toml:"event"`
	To          string `toml:"to"`
	Description string `toml:"description"`
	Guard       string `toml:"guard"`
	Round       bool   `toml:"round"`
	Findings    bool   `toml:"findings"`
}

// FailedState is where a flow ends when a round transition would exceed
// the workflow's max_rounds.
const FailedState = "failed"

// ParseWorkflow reads a workflow from TOML; name is the file's name, for
// errors. Every key must be known, and the workflow valid (Validate).
func ParseWorkflow(name string, src []byte) (*paddock.Workflow, error) {
	var f workflowFile
	md, err := toml.NewDecoder(bytes.NewReader(src)).Decode(&f)
	if err != nil {
		if pe, ok := err.(toml.ParseError); ok {
			return nil, &Error{File: name, Line: pe.Position.Line, Msg: pe.Message}
		}
		return nil, &Error{File: name, Msg: err.Error()}
	}
	if un := md.Undecoded(); len(un) > 0 {
		return nil, &Error{File: name, Line: lineOf(src, un[0]), Msg: fmt.Sprintf("unknown key %q", un[0].String())}
	}
	w := &paddock.Workflow{Name: f.Name, Description: f.Description, Start: f.Start, MaxRounds: f.MaxRounds}
	for _, s := range f.State {
		st := paddock.WorkflowState{Name: s.Name, Agent: s.Agent, Reviews: s.Reviews, End: s.End}
		for _, t := range s.Transition {
			st.Transitions = append(st.Transitions, paddock.FlowTransition{Event: t.Event, To: t.To, Description: t.Description,
				Guard: t.Guard, Round: t.Round, Findings: t.Findings})
		}
		w.States = append(w.States, st)
	}
	if err := ValidateWorkflow(w); err != nil {
		return nil, &Error{File: name, Msg: paddock.ErrorMessage(err)}
	}
	return w, nil
}

// ValidateWorkflow checks a workflow: names, a start that exists,
// transitions to states that exist, events that are not a tool's name
// (the menu and the tools share an agent's tool list), guards only where
// there is a head (a review state), a failed state for a round limit.
func ValidateWorkflow(w *paddock.Workflow) error {
	bad := func(format string, args ...any) error { return paddock.Errorf(paddock.CodeBadRequest, format, args...) }
	if err := paddock.ValidateName(w.Name); err != nil {
		return bad("workflow name: %s", paddock.ErrorMessage(err))
	}
	states := map[string]*paddock.WorkflowState{}
	for i := range w.States {
		s := &w.States[i]
		if err := paddock.ValidateName(s.Name); err != nil {
			return bad("state name: %s", paddock.ErrorMessage(err))
		}
		if states[s.Name] != nil {
			return bad("state %s is defined twice", s.Name)
		}
		states[s.Name] = s
	}
	if states[w.Start] == nil {
		return bad("start %q is not a state", w.Start)
	}
	if states[w.Start].Reviews != "" {
		return bad("start %q reviews a state no run has worked in yet; start where the work is done", w.Start)
	}
	if w.MaxRounds < 0 {
		return bad("max_rounds must not be negative")
	}
	for _, s := range w.States {
		switch {
		case s.End && (len(s.Transitions) > 0 || s.Agent != ""):
			return bad("state %s ends the flow: it has no agent and no transitions", s.Name)
		case !s.End && s.Agent == "":
			return bad("state %s names no agent and does not end the flow", s.Name)
		case !s.End && len(s.Transitions) == 0:
			return bad("state %s has no transitions and does not end the flow (end = true)", s.Name)
		}
		if s.Agent != "" {
			if err := paddock.ValidateName(s.Agent); err != nil {
				return bad("state %s: agent: %s", s.Name, paddock.ErrorMessage(err))
			}
		}
		if s.Reviews != "" {
			r := states[s.Reviews]
			if r == nil || r.End || r.Reviews != "" {
				return bad("state %s reviews %q, which is not a working state of this workflow", s.Name, s.Reviews)
			}
		}
		var events []string
		for _, t := range s.Transitions {
			if err := paddock.ValidateName(t.Event); err != nil {
				return bad("state %s: event: %s", s.Name, paddock.ErrorMessage(err))
			}
			if broker.Known(t.Event) {
				return bad("state %s: event %q is the name of a tool; name it otherwise", s.Name, t.Event)
			}
			if slices.Contains(events, t.Event) {
				return bad("state %s: event %s is there twice", s.Name, t.Event)
			}
			events = append(events, t.Event)
			if states[t.To] == nil {
				return bad("state %s: event %s leads to %q, which is not a state", s.Name, t.Event, t.To)
			}
			if t.Guard != "" && t.Guard != paddock.GuardHead {
				return bad("state %s: event %s: the only guard is %q", s.Name, t.Event, paddock.GuardHead)
			}
			if t.Guard != "" && s.Reviews == "" {
				return bad("state %s: event %s is guarded by the head, but the state reviews nothing (reviews = STATE)", s.Name, t.Event)
			}
			if t.Round && w.MaxRounds == 0 {
				return bad("state %s: event %s is a round, and max_rounds bounds none: set max_rounds", s.Name, t.Event)
			}
			if t.Round && (states[FailedState] == nil || !states[FailedState].End) {
				return bad("max_rounds needs an end state named %q", FailedState)
			}
		}
	}
	// Every way back to a state must pass a round transition, or a flow
	// could go round forever: without them, the states form no cycle.
	if cycle := cycleWithoutRounds(w); cycle != "" {
		return bad("state %s can be entered again and again without a round transition (round = true, bounded by max_rounds)", cycle)
	}
	return nil
}

// cycleWithoutRounds names a state on a cycle of non-round transitions,
// or "".
func cycleWithoutRounds(w *paddock.Workflow) string {
	next := map[string][]string{}
	for _, s := range w.States {
		for _, t := range s.Transitions {
			if !t.Round {
				next[s.Name] = append(next[s.Name], t.To)
			}
		}
	}
	const (
		unseen = iota
		open
		done
	)
	mark := map[string]int{}
	var visit func(string) string
	visit = func(s string) string {
		switch mark[s] {
		case open:
			return s
		case done:
			return ""
		}
		mark[s] = open
		for _, n := range next[s] {
			if c := visit(n); c != "" {
				return c
			}
		}
		mark[s] = done
		return ""
	}
	for _, s := range w.States {
		if c := visit(s.Name); c != "" {
			return c
		}
	}
	return ""
}

// TaskWithReview is the built-in workflow: a coder works on the task;
// when it is done a reviewer reads exactly what it submitted, in a review
// run, and either approves it (a finding: the flow then waits for a
// person to approve the change set) or sends it back with findings, at
// most max_rounds times.
func TaskWithReview() *paddock.Workflow {
	return &paddock.Workflow{
		Name:        paddock.WorkflowTaskWithReview,
		Description: "a coder works; a reviewer reads exactly what it submitted and approves it or sends it back; a person approves what lands",
		Start:       "coding",
		MaxRounds:   3,
		States: []paddock.WorkflowState{
			{Name: "coding", Agent: "coder", Transitions: []paddock.FlowTransition{
				{Event: "done", To: "reviewing", Description: "the task is done: submit the change set (paddock submits it if it is not) for review"},
			}},
			{Name: "reviewing", Agent: "reviewer", Reviews: "coding", Transitions: []paddock.FlowTransition{
				{Event: "approve", To: "awaiting_approval", Guard: paddock.GuardHead,
					Description: "the change set under review (its hash as head) is right; a person approves what lands"},
				{Event: "request_changes", To: "coding", Guard: paddock.GuardHead, Round: true, Findings: true,
					Description: "send the change set (its hash as head) back to the coder, with findings"},
			}},
			{Name: "awaiting_approval", End: true},
			{Name: FailedState, End: true},
		},
	}
}

// Workflows are the built-in workflows, by name.
func Workflows() map[string]*paddock.Workflow {
	w := TaskWithReview()
	return map[string]*paddock.Workflow{w.Name: w}
}
