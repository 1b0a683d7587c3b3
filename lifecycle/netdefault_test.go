package lifecycle_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/lifecycle"
)

// TestNetworkByDefaultOnEveryPath holds invariant 15 for the network on
// every path that makes a run: create (and so `paddock run` and `paddock
// pick`, which make theirs with create), bootstrap by name and inline,
// both runs of the built-in flow, a review run, a fork, an adopted run and
// an imported one. On each, an agent's command that asks for nothing gets
// no network (a listener on the host's loopback is out of reach, and the
// recorded enforcement says none), capabilities say so to the agent and
// to the operator, and asking for the host's network is refused: no
// built-in or inline definition carries one.
func TestNetworkByDefaultOnEveryPath(t *testing.T) {
	lifecycle.SetCheckpointDelay(t, time.Millisecond)
	e := newEnv(t)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	e.project(t)
	withSandbox(t, e)
	e.shareCheckpoints()
	// Closed first: its delayed checkpoints stop before the delay is put back.
	t.Cleanup(func() { e.m.Close(context.Background()) })
	e.m.BundleKeyFile = filepath.Join(e.state, "bundle.key")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	paths := []struct {
		name string
		make func(t *testing.T) string
	}{
		{"create", func(t *testing.T) string { return e.create(t, paddock.KindOverlay, "").ID }},
		{"create clone", func(t *testing.T) string { return e.create(t, paddock.KindClone, "").ID }},
		{"bootstrap by name", func(t *testing.T) string {
			b, err := e.m.Jobs.Bootstrap(ctx, paddock.BootstrapRequest{Project: "my-app", AgentName: "coder", Task: "t"})
			if err != nil {
				t.Fatal(err)
			}
			return b.Run.ID
		}},
		{"bootstrap by name, reviewer", func(t *testing.T) string {
			b, err := e.m.Jobs.Bootstrap(ctx, paddock.BootstrapRequest{Project: "my-app", AgentName: "reviewer", Task: "t"})
			if err != nil {
				t.Fatal(err)
			}
			return b.Run.ID
		}},
		{"bootstrap inline", func(t *testing.T) string {
			b, err := e.m.Jobs.Bootstrap(ctx, paddock.BootstrapRequest{Project: "my-app", Agent: paddock.AgentDefinition{Name: "mine", Workspace: "write"}, Task: "t"})
			if err != nil {
				t.Fatal(err)
			}
			return b.Run.ID
		}},
		{"flow, coding", func(t *testing.T) string {
			f, err := e.m.Flows.StartFlow(ctx, paddock.StartFlowRequest{Workflow: paddock.WorkflowTaskWithReview, Project: "my-app", Task: "t"})
			if err != nil {
				t.Fatal(err)
			}
			return f.Runs["coding"]
		}},
		{"flow, reviewing", func(t *testing.T) string {
			f, err := e.m.Flows.StartFlow(ctx, paddock.StartFlowRequest{Workflow: paddock.WorkflowTaskWithReview, Project: "my-app", Task: "t"})
			if err != nil {
				t.Fatal(err)
			}
			if f, err = e.m.Flows.PickEvent(agentCtx, f.Runs["coding"], "done", paddock.MenuEventRequest{}); err != nil {
				t.Fatal(err)
			}
			return f.Runs["reviewing"]
		}},
		{"review run", func(t *testing.T) string {
			r := e.create(t, paddock.KindOverlay, "")
			writeAndSubmit(t, e.m, r.ID, "net.txt")
			rv, err := e.m.Reviews.Review(ctx, r.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			return rv.ID
		}},
		{"fork", func(t *testing.T) string {
			b, err := e.m.Jobs.Bootstrap(ctx, paddock.BootstrapRequest{Project: "my-app", AgentName: "coder", Task: "t"})
			if err != nil {
				t.Fatal(err)
			}
			return fork(t, e.m, b.Run.ID, 1).Runs[0].ID
		}},
		{"adoption", func(t *testing.T) string {
			b, err := e.m.Jobs.Bootstrap(ctx, paddock.BootstrapRequest{Project: "my-app", AgentName: "coder", Task: "t", Kind: "clone"})
			if err != nil {
				t.Fatal(err)
			}
			lifecycle.StoreCheckpoint(ctx, e.m, b.Run.ID, "test")
			os.RemoveAll(b.Run.Workspace.Root) // its node is lost, and its disk with it
			if _, err := e.m.Nodes.Adopt(ctx, b.Run.ID, "test"); err != nil {
				t.Fatal(err)
			}
			return b.Run.ID
		}},
		{"import", func(t *testing.T) string {
			b, err := e.m.Jobs.Bootstrap(ctx, paddock.BootstrapRequest{Project: "my-app", AgentName: "coder", Task: "t"})
			if err != nil {
				t.Fatal(err)
			}
			writeAndSubmit(t, e.m, b.Run.ID, "net.txt")
			var buf bytes.Buffer
			if err := e.m.Bundles.Bundle(ctx, b.Run.ID, &buf); err != nil {
				t.Fatal(err)
			}
			res, err := e.m.Bundles.Import(ctx, paddock.ImportRequest{Project: "my-app"}, &buf)
			if err != nil {
				t.Fatal(err)
			}
			return res.Run.ID
		}},
	}
	probe := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo REACHED", port)
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			id := p.make(t)
			for who, c := range map[string]context.Context{"agent": agentCtx, "operator": ctx} {
				caps, err := e.m.Broker.Capabilities(c, id)
				if err != nil {
					t.Fatal(err)
				}
				if caps.Net != "none" || caps.NetCeiling != "none" {
					t.Errorf("the %s is told network %q, ceiling %q; want none and none", who, caps.Net, caps.NetCeiling)
				}
			}
			res, err := e.m.Broker.Exec(agentCtx, id, paddock.ExecRequest{Argv: []string{"bash", "-c", probe}})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode == 0 || bytes.Contains([]byte(res.Stdout), []byte("REACHED")) || res.Enforcement.Net != "none" {
				t.Errorf("an agent's command that asked for no network reached the host's loopback (exit %d, enforced %q):\n%s%s",
					res.ExitCode, res.Enforcement.Net, res.Stdout, res.Stderr)
			}
			// The agent, and an orchestrator driving it, are held to the
			// definition's ceiling; only the operator or an admin chooses.
			orchestrator := paddock.WithCaller(ctx, &paddock.Caller{Principal: "ci-bot", Role: paddock.RoleOrchestrator, Name: "ci-bot"})
			for _, asked := range []string{"host", "allow=example.com"} {
				if _, err := e.m.Broker.Exec(agentCtx, id, paddock.ExecRequest{Argv: []string{"true"}, Net: asked}); !paddock.IsCode(err, paddock.CodeForbidden) {
					t.Errorf("the agent asked for network %s: %v, want forbidden", asked, err)
				}
				if _, err := e.m.Broker.Exec(orchestrator, id, paddock.ExecRequest{Argv: []string{"true"}, Net: asked}); !paddock.IsCode(err, paddock.CodeForbidden) {
					t.Errorf("an orchestrator asked for network %s: %v, want forbidden", asked, err)
				}
			}
			if _, err := e.m.Broker.Exec(orchestrator, id, paddock.ExecRequest{Argv: []string{"true"}, AllowDegraded: true}); !paddock.IsCode(err, paddock.CodeForbidden) {
				t.Errorf("an orchestrator asked for less confinement: %v, want forbidden", err)
			}
		})
	}
	// The operator still chooses: its explicit host network is given and
	// recorded.
	r := e.create(t, paddock.KindOverlay, "")
	res, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"bash", "-c", probe}, Net: "host"})
	if err != nil || res.ExitCode != 0 || res.Enforcement.Net != "host" {
		t.Fatalf("the operator's --net host: %+v %v", res, err)
	}
}
