package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"unicode/utf8"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/internal/durable"
	"github.com/paddock-dev/paddock/redact"
)

// planBook keeps each run's plan: the steps its agent says it will take,
// given with the plan tool and read as the artifact of kind plan (seed
// 004). A plan is the agent's word, not a rule: nothing is allowed or
// refused by it; a reviewer reads it beside the change set.
//
// The latest plan is a file in the run's artifacts (plan.json, replaced
// whole and durably), and each one given is also an event (plan.recorded),
// so the run's history says what was planned when. Both are masked with
// the run's secrets before they are written.
type planBook struct {
	// dir is the directory a run's artifacts are kept in.
	dir func(run string) string
	// record appends the events of a call to the run's log.
	record func(ctx context.Context, run string, evs []callEvent) error

	mu sync.Mutex // one plan given at a time: revisions follow each other
}

const planFile = "plan.json"

// checkPlan says what is wrong with a plan, or nil.
func checkPlan(in paddock.PlanInput) error {
	bad := func(format string, args ...any) error {
		return paddock.Errorf(paddock.CodeBadRequest, "plan: "+format, args...)
	}
	switch {
	case len(in.Steps) == 0:
		return bad("give at least one step")
	case len(in.Steps) > paddock.MaxPlanSteps:
		return bad("%d steps, more than %d", len(in.Steps), paddock.MaxPlanSteps)
	case len(in.Explanation) > paddock.MaxPlanExplanation:
		return bad("the explanation is %d bytes, more than %d", len(in.Explanation), paddock.MaxPlanExplanation)
	case !utf8.ValidString(in.Explanation):
		return bad("the explanation is not UTF-8")
	}
	doing := 0
	for i, s := range in.Steps {
		switch {
		case s.Step == "":
			return bad("step %d says nothing", i+1)
		case len(s.Step) > paddock.MaxPlanStep:
			return bad("step %d is %d bytes, more than %d", i+1, len(s.Step), paddock.MaxPlanStep)
		case !utf8.ValidString(s.Step):
			return bad("step %d is not UTF-8", i+1)
		}
		switch s.Status {
		case paddock.StepPending, paddock.StepCompleted:
		case paddock.StepInProgress:
			doing++
		default:
			return bad("step %d has status %q (pending, in_progress or completed)", i+1, s.Status)
		}
	}
	if doing > 1 {
		return bad("%d steps are in_progress; at most one is", doing)
	}
	return nil
}

// give records in as run's plan, masked with red, and returns it.
func (p *planBook) give(ctx context.Context, run string, in paddock.PlanInput, red *redact.Redactor) (*paddock.Plan, error) {
	if err := checkPlan(in); err != nil {
		return nil, err
	}
	plan := &paddock.Plan{PlanInput: paddock.PlanInput{Explanation: red.String(in.Explanation)}, UpdatedAt: now()}
	for _, s := range in.Steps {
		plan.Steps = append(plan.Steps, paddock.PlanStep{Step: red.String(s.Step), Status: s.Status})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	last, err := p.read(run)
	switch {
	case err == nil:
		plan.Revision = last.Revision + 1
	case paddock.IsCode(err, paddock.CodeConflict): // none yet
		plan.Revision = 1
	default:
		return nil, err
	}
	b, err := json.Marshal(plan)
	if err != nil {
		return nil, internal("encoding a plan failed", err)
	}
	if err := os.MkdirAll(p.dir(run), 0o700); err != nil {
		return nil, internal("keeping the plan failed", err)
	}
	if err := durable.WriteFile(filepath.Join(p.dir(run), planFile), b); err != nil {
		return nil, internal("keeping the plan failed", err)
	}
	if err := p.record(ctx, run, []callEvent{{paddock.EventPlanned, plan}}); err != nil {
		return nil, err
	}
	return plan, nil
}

// read returns run's latest plan; a conflict when it has none.
func (p *planBook) read(run string) (*paddock.Plan, error) {
	b, err := os.ReadFile(filepath.Join(p.dir(run), planFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s has no plan yet: its agent gives one with the plan tool", run)
	}
	if err != nil {
		return nil, internal("reading the plan failed", err)
	}
	var plan paddock.Plan
	if err := json.Unmarshal(b, &plan); err != nil {
		return nil, internal("reading the plan failed", err)
	}
	return &plan, nil
}
