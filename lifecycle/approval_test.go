package lifecycle_test

import (
	"context"
	"testing"

	"github.com/paddock-dev/paddock"
)

const askingAgent = `name = "asker"
workspace = "write"
tools = ["read", "exec", "capabilities", "request_access"]

[tool.exec]
allow = ["echo", "sleep"]
ask = ["touch"]

[limits]
timeout = "1s"
`

// A command an ask rule names waits for a person: the call is refused with
// a pending request; once an operator grants it (an agent never can) the
// same command runs. The definition's limits are the command's ceiling.
func TestNeedsApprovalAndLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	withSandbox(t, e)
	if _, err := e.m.Projects.AddAgent(ctx, paddock.AddAgentRequest{File: "asker.toml", Source: askingAgent}); err != nil {
		t.Fatal(err)
	}
	r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "clone", Agent: "asker"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"touch", "made"}})
	pe, _ := err.(*paddock.Error)
	if pe == nil || pe.Code != paddock.CodeForbidden || pe.Rule != "needs_approval" || pe.Details["request"] == nil {
		t.Fatalf("an ask rule's command: %v", err)
	}
	reqs, err := e.m.Broker.AccessRequests(ctx, r.ID)
	if err != nil || len(reqs) != 1 || reqs[0].State != paddock.RequestPending || reqs[0].Kind != paddock.AccessCommand || reqs[0].Command[0] != "touch" {
		t.Fatalf("requests: %+v %v", reqs, err)
	}
	if _, err := e.m.Broker.DecideAccess(paddock.WithAgent(ctx), r.ID, reqs[0].ID, true, "agent", ""); !paddock.IsCode(err, paddock.CodeForbidden) {
		t.Fatalf("an agent granted itself: %v", err)
	}
	if _, err := e.m.Broker.DecideAccess(ctx, r.ID, reqs[0].ID, true, "op", "fine"); err != nil {
		t.Fatal(err)
	}
	if res, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"touch", "made"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("after the grant: %+v %v", res, err)
	}
	evs, _ := e.m.Runs.Events(ctx, r.ID, 0, 1000)
	var granted bool
	for _, ev := range evs {
		granted = granted || ev.Type == paddock.EventAccessGranted
	}
	if !granted {
		t.Fatal("the grant is not an event")
	}
	// The definition's timeout is the command's: one asked for above it is
	// refused, and a command that asks for nothing gets it.
	if _, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"sleep", "5"}, Timeout: "10s"}); !paddock.IsCode(err, paddock.CodeForbidden) {
		t.Fatalf("a timeout above the agent's: %v", err)
	}
	res, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"sleep", "5"}})
	if err != nil || !res.TimedOut || res.DurationMS > 4000 {
		t.Fatalf("the agent's timeout: %+v %v", res, err)
	}
}
