package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/paddock-dev/paddock"
)

// TestPrincipalOnEveryPath: a run made by a principal names it in its
// run.created, on every path that makes a run (create, and so `paddock
// run` and `paddock pick`; bootstrap by name and inline; a flow's first
// run; a review run; a fork; an import): an approval policy keeps that
// principal from approving the run's work, whichever way it was made.
func TestPrincipalOnEveryPath(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	e.m.BundleKeyFile = e.state + "/bundle.key"
	bot := paddock.WithCaller(context.Background(), &paddock.Caller{Principal: "ci-bot", Role: paddock.RoleOrchestrator, Name: "ci-bot"})
	ada := paddock.WithCaller(context.Background(), &paddock.Caller{Principal: "ada", Role: paddock.RoleAdmin, Name: "ada"})
	bootstrap := func(t *testing.T, req paddock.BootstrapRequest) string {
		req.Project, req.Task = "my-app", "t"
		b, err := e.m.Jobs.Bootstrap(bot, req)
		if err != nil {
			t.Fatal(err)
		}
		return b.Run.ID
	}
	write := func(t *testing.T, id, path string) {
		if _, err := e.m.Broker.CallTool(context.Background(), id, "write", json.RawMessage(`{"path":"`+path+`","content":"x\n"}`)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, who string
		make      func(t *testing.T) string
	}{
		{"create", "ci-bot", func(t *testing.T) string {
			r, err := e.m.Runs.Create(bot, paddock.CreateRunRequest{Project: "my-app", Kind: "clone"})
			if err != nil {
				t.Fatal(err)
			}
			return r.ID
		}},
		{"bootstrap by name", "ci-bot", func(t *testing.T) string { return bootstrap(t, paddock.BootstrapRequest{AgentName: "coder"}) }},
		{"bootstrap inline", "ci-bot", func(t *testing.T) string {
			return bootstrap(t, paddock.BootstrapRequest{Agent: paddock.AgentDefinition{Name: "mine", Workspace: "write"}})
		}},
		{"flow", "ci-bot", func(t *testing.T) string {
			f, err := e.m.Flows.StartFlow(bot, paddock.StartFlowRequest{Workflow: paddock.WorkflowTaskWithReview, Project: "my-app", Task: "t"})
			if err != nil {
				t.Fatal(err)
			}
			return f.Runs["coding"]
		}},
		{"review run", "ci-bot", func(t *testing.T) string {
			id := bootstrap(t, paddock.BootstrapRequest{AgentName: "coder"})
			write(t, id, "a.txt")
			if _, err := e.m.Changes.Submit(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			rv, err := e.m.Reviews.Review(bot, id, "")
			if err != nil {
				t.Fatal(err)
			}
			return rv.ID
		}},
		{"fork", "ci-bot", func(t *testing.T) string {
			id := bootstrap(t, paddock.BootstrapRequest{AgentName: "coder"})
			res, err := e.m.Forks.Fork(bot, id, paddock.ForkRequest{Count: 1})
			if err != nil {
				t.Fatal(err)
			}
			return res.Runs[0].ID
		}},
		{"import", "ada", func(t *testing.T) string {
			id := bootstrap(t, paddock.BootstrapRequest{AgentName: "coder"})
			write(t, id, "b.txt")
			if _, err := e.m.Changes.Submit(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := e.m.Bundles.Bundle(context.Background(), id, &buf); err != nil {
				t.Fatal(err)
			}
			res, err := e.m.Bundles.Import(ada, paddock.ImportRequest{Project: "my-app"}, &buf)
			if err != nil {
				t.Fatal(err)
			}
			return res.Run.ID
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.make(t)
			created := eventsOf(t, e.m, id, paddock.EventRunCreated)
			if len(created) != 1 || created[0]["principal"] != tc.who {
				t.Fatalf("run.created: %v, want principal %s", created, tc.who)
			}
		})
	}
}
