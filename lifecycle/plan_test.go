package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/broker"
)

// TestPlanArtifact: seed 004's artifact of kind plan. The agent gives its
// plan with the plan tool; the artifact is the latest, masked, with its
// revision; each plan given is an event; a malformed plan is refused and
// changes nothing; a definition that does not name the tool cannot; a
// none agent (no workspace) can; a rejected run cannot.
func TestPlanArtifact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const secret = "pl4n-s3cr3t-77"
	e.m.Secret = func(name string) (string, bool) { return secret, name == "API_TOKEN" }
	e.project(t)
	ctx := context.Background()
	b, err := e.m.Jobs.Bootstrap(ctx, paddock.BootstrapRequest{Project: "my-app", AgentName: "coder", Task: "fix the bug", Kind: "clone"})
	if err != nil {
		t.Fatal(err)
	}
	id := b.Run.ID
	// The built-in coder's run has no secret; one with API_TOKEN does.
	r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "clone", Secrets: []string{"API_TOKEN"}})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := e.m.Jobs.Artifact(ctx, id, "plan"); !paddock.IsCode(err, paddock.CodeConflict) {
		t.Fatalf("the plan of a run whose agent gave none: %v, want conflict", err)
	}
	give := func(id, args string) (*paddock.Plan, error) {
		res, err := e.m.Broker.CallTool(ctx, id, paddock.ToolPlan, json.RawMessage(args))
		if err != nil {
			return nil, err
		}
		return res.(*paddock.Plan), nil
	}
	p, err := give(id, `{"explanation":"small fix","steps":[{"step":"read the failing test","status":"completed"},{"step":"fix parse()","status":"in_progress"},{"step":"run verify","status":"pending"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if p.Revision != 1 || len(p.Steps) != 3 || p.Steps[1].Status != paddock.StepInProgress || p.UpdatedAt.IsZero() {
		t.Fatalf("the first plan: %+v", p)
	}
	if _, err := give(id, `{"steps":[{"step":"read the failing test","status":"completed"},{"step":"fix parse()","status":"completed"},{"step":"run verify","status":"in_progress"}]}`); err != nil {
		t.Fatal(err)
	}
	a, err := e.m.Jobs.Artifact(ctx, id, "plan")
	if err != nil {
		t.Fatal(err)
	}
	got := a.Content.(*paddock.Plan)
	if got.Revision != 2 || got.Explanation != "" || got.Steps[2].Status != paddock.StepInProgress {
		t.Fatalf("the artifact after two plans: %+v", got)
	}

	for _, bad := range []struct{ name, args, key string }{
		{"no steps", `{"steps":[]}`, "at least one step"},
		{"two in progress", `{"steps":[{"step":"a","status":"in_progress"},{"step":"b","status":"in_progress"}]}`, "at most one"},
		{"an unknown status", `{"steps":[{"step":"a","status":"done"}]}`, `"done"`},
		{"an empty step", `{"steps":[{"step":"","status":"pending"}]}`, "says nothing"},
		{"a long step", `{"steps":[{"step":"` + strings.Repeat("x", paddock.MaxPlanStep+1) + `","status":"pending"}]}`, "more than"},
		{"an unknown field", `{"steps":[{"step":"a","status":"pending"}],"approve":true}`, "approve"},
	} {
		if _, err := give(id, bad.args); !paddock.IsCode(err, paddock.CodeBadRequest) || !strings.Contains(err.Error(), bad.key) {
			t.Errorf("%s: %v, want bad_request saying %q", bad.name, err, bad.key)
		}
	}
	if a, _ := e.m.Jobs.Artifact(ctx, id, "plan"); a.Content.(*paddock.Plan).Revision != 2 {
		t.Fatalf("a refused plan changed the artifact: %+v", a.Content)
	}
	evs, err := e.m.Runs.Events(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	planned := 0
	for _, ev := range evs {
		if ev.Type == paddock.EventPlanned {
			planned++
		}
	}
	if planned != 2 {
		t.Fatalf("%d plan.recorded events, want 2", planned)
	}

	// Masked in the artifact, the event and the answer alike.
	if _, err := give(r.ID, `{"explanation":"use `+secret+`","steps":[{"step":"curl with `+secret+`","status":"pending"}]}`); err != nil {
		t.Fatal(err)
	}
	a, err = e.m.Jobs.Artifact(ctx, r.ID, "plan")
	if err != nil {
		t.Fatal(err)
	}
	all, _ := e.m.Runs.Events(ctx, r.ID, 0, 0)
	for what, v := range map[string]any{"artifact": a, "events": all} {
		raw, _ := json.Marshal(v)
		if strings.Contains(string(raw), secret) || !strings.Contains(string(raw), "[REDACTED:API_TOKEN]") {
			t.Errorf("the %s of a plan naming a secret: %s", what, raw)
		}
	}

	// A definition that names its tools without plan cannot give one.
	nb, err := e.m.Jobs.Bootstrap(ctx, paddock.BootstrapRequest{Project: "my-app", Task: "t", Kind: "clone",
		Agent: paddock.AgentDefinition{Name: "narrow", Workspace: "read", Tools: []string{"read"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := give(nb.Run.ID, `{"steps":[{"step":"a","status":"pending"}]}`); ruleOf(err) != broker.RuleUndeclared {
		t.Fatalf("a plan from a definition without the tool: %v, want %s", err, broker.RuleUndeclared)
	}
	// A none agent plans too: a plan needs no workspace.
	db, err := e.m.Jobs.Bootstrap(ctx, paddock.BootstrapRequest{Project: "my-app", Task: "decide", AgentName: "decider"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := give(db.Run.ID, `{"steps":[{"step":"weigh the two answers","status":"in_progress"}]}`); err != nil {
		t.Fatalf("a none agent's plan: %v", err)
	}
	// A rejected run takes no more plans; its last stays readable.
	if _, err := e.m.Runs.Reject(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := give(id, `{"steps":[{"step":"a","status":"pending"}]}`); !paddock.IsCode(err, paddock.CodeConflict) {
		t.Fatalf("a plan for a rejected run: %v, want conflict", err)
	}
	if a, err := e.m.Jobs.Artifact(ctx, id, "plan"); err != nil || a.Content.(*paddock.Plan).Revision != 2 {
		t.Fatalf("a rejected run's plan: %v %+v", err, a)
	}
}

// TestJobStatus: seed 004's job states, idle included. A run that has
// started no job is idle; then its status is its latest job's state, with
// that job.
func TestJobStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	b, err := e.m.Jobs.Bootstrap(ctx, paddock.BootstrapRequest{Project: "my-app", AgentName: "coder", Task: "t", Kind: "clone"})
	if err != nil {
		t.Fatal(err)
	}
	id := b.Run.ID
	st, err := e.m.Jobs.JobStatus(ctx, id)
	if err != nil || st.State != paddock.JobIdle || st.Job != nil {
		t.Fatalf("a run with no job: %+v %v, want idle", st, err)
	}
	j := quickJob(t, e, id)
	j = waitJob(t, e.m, id, j.ID, 30*1e9)
	st, err = e.m.Jobs.JobStatus(ctx, id)
	if err != nil || st.State != j.State || st.Job == nil || st.Job.ID != j.ID || st.State == paddock.JobIdle || st.State == paddock.JobRunning {
		t.Fatalf("after job %s (%s): %+v %v", j.ID, j.State, st, err)
	}
	if _, err := e.m.Jobs.JobStatus(ctx, "r-nope"); !paddock.IsCode(err, paddock.CodeNotFound) {
		t.Fatalf("the status of no run: %v", err)
	}
}

// ruleOf is the rule an error names, or "".
func ruleOf(err error) paddock.Rule {
	var pe *paddock.Error
	if errors.As(err, &pe) {
		return pe.Rule
	}
	return ""
}
