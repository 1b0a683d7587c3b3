package paddock

import "time"

// The status of a plan's step.
const (
	StepPending    = "pending"
	StepInProgress = "in_progress"
	StepCompleted  = "completed"
)

// PlanStep is one step of an agent's plan.
type PlanStep struct {
	Step   string `json:"step"`
	Status string `json:"status"`
}

// PlanInput is what an agent gives the plan tool: the steps it means to
// take, each with its status, and why the plan is what it is. Each call
// replaces the plan whole.
type PlanInput struct {
	Explanation string     `json:"explanation,omitempty"`
	Steps       []PlanStep `json:"steps"`
}

// Plan is the plan a run's agent gave last (the artifact of kind plan):
// masked like every answer, with its revision (1 for the first) and when
// it was given.
type Plan struct {
	PlanInput
	Revision  int       `json:"revision"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Bounds on a plan: an agent's plan is a list a person reads at a glance.
const (
	MaxPlanSteps       = 100
	MaxPlanStep        = 1000
	MaxPlanExplanation = 8 << 10
)
