package lifecycle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// TestAgentAndItsCommandsShareAnOverlayRun: the everyday path of `paddock
// run --net … -- claude` (#30 item 1). An overlay run's agent, whose
// definition has a network, runs as the run's agent job and holds the
// run's one harness with that network; meanwhile the commands it asks for
// (exec with no network, as through MCP) run in the same harness, each in
// a network namespace of its own, and see the agent's writes. Before, each
// was refused as busy for as long as the agent ran.
func TestAgentAndItsCommandsShareAnOverlayRun(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	b, err := e.m.Jobs.Bootstrap(ctx, paddock.BootstrapRequest{Project: "my-app", Task: "work", Kind: "overlay",
		Agent: paddock.AgentDefinition{Name: "netted", Workspace: "write", Net: "host",
			Command: []string{"sh", "-c", "echo from-the-agent > agent.txt; sleep 4"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := b.Run.ID
	j, err := e.m.Jobs.StartJob(ctx, id, paddock.StartJobRequest{Kind: paddock.JobAgent})
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the agent's own write: its process holds the harness.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := e.m.Broker.CallTool(ctx, id, "read", []byte(`{"path":"agent.txt"}`))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			st, serr := e.m.Jobs.JobStatus(ctx, id)
			if serr == nil && st.Job != nil {
				code := "none"
				if st.Job.ExitCode != nil {
					code = fmt.Sprint(*st.Job.ExitCode)
				}
				t.Fatalf("the agent never wrote agent.txt: last read %v; job %s, exit code %s, reason %q", err, st.Job.State, code, st.Job.Reason)
			}
			t.Fatalf("the agent never wrote agent.txt: last read %v; job %+v %v", err, st, serr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	res, err := e.m.Broker.Exec(agentCtx, id, paddock.ExecRequest{Argv: []string{"cat", "agent.txt"}})
	if err != nil {
		t.Fatalf("the agent's command while the agent runs: %v", err)
	}
	enf := res.Enforcement
	if res.Stdout != "from-the-agent\n" || !enf.OwnNet || enf.Net != "none" || enf.Mode != "resident" {
		t.Fatalf("the agent's command: %q %+v", res.Stdout, enf)
	}
	if st, err := e.m.Jobs.JobStatus(ctx, id); err != nil || st.State != paddock.JobRunning || st.Job.ID != j.ID {
		t.Fatalf("the agent's job while its command ran: %+v %v", st, err)
	}
	if j := waitJob(t, e.m, id, j.ID, 30*time.Second); j.State != paddock.JobSucceeded {
		t.Fatalf("the agent's job: %+v", j)
	}
}

// TestExecWithNoCommandIsBadRequest: an exec with an empty argv is a
// malformed request (bad_request, naming argv), from the agent and the
// operator alike, as MCP's exec answers it; nothing is recorded as a
// refused command.
func TestExecWithNoCommandIsBadRequest(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	r := e.create(t, paddock.KindClone, "")
	for _, c := range []context.Context{ctx, paddock.WithAgent(ctx)} {
		for _, argv := range [][]string{nil, {}, {""}} {
			if _, err := e.m.Broker.Exec(c, r.ID, paddock.ExecRequest{Argv: argv}); !paddock.IsCode(err, paddock.CodeBadRequest) {
				t.Errorf("exec %q: %v, want bad_request", argv, err)
			}
		}
	}
}
