package lifecycle_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/lifecycle"
)

// stageObserver keeps the stages of calls it is told of, in order.
type stageObserver struct {
	mu     sync.Mutex
	stages []observedStage
}

type observedStage struct {
	tool, stage string
	d           time.Duration
}

func (o *stageObserver) CallStage(tool, stage string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stages = append(o.stages, observedStage{tool, stage, d})
}

// take returns the stages observed since the last take.
func (o *stageObserver) take() []observedStage {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.stages
	o.stages = nil
	return out
}

func (*stageObserver) ToolCall(string, paddock.Access, paddock.Decision, string, error, time.Duration) {
}
func (*stageObserver) Exec(paddock.Access, string, bool, bool, time.Duration) {}
func (*stageObserver) ExecFailed(error)                                       {}
func (*stageObserver) WebhookAttempt(string, bool, time.Duration)             {}

// TestCallStages: a call through the broker is timed stage by stage, as
// the daemon's metrics show it (paddock_tool_call_stage_duration_seconds):
// each stage it passes, once, in order, each taking what was done in it.
func TestCallStages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	obs := &stageObserver{}
	e.m.Observer = obs
	r := e.create(t, paddock.KindOverlay, "")
	agent := paddock.WithAgent(context.Background())
	// Long enough that no other stage takes as long on a loaded machine.
	const claimTook = 400 * time.Millisecond
	slowClaim := paddock.WithClaimGate(agent, func(ctx context.Context) error {
		time.Sleep(claimTook)
		return nil
	})
	all := []string{lifecycle.StageQueue, lifecycle.StageRead, lifecycle.StageCall, lifecycle.StageRecord}
	withClaim := []string{lifecycle.StageQueue, lifecycle.StageRead, lifecycle.StageClaim, lifecycle.StageCall, lifecycle.StageRecord}
	for _, c := range []struct {
		name, tool string
		call       func() error
		want       []string
		slow       string        // a stage that takes at least
		least      time.Duration // this long
	}{
		{"a command", paddock.ToolExec, func() error {
			_, err := e.m.Broker.Exec(agent, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "sleep 0.4; echo x > made.txt"}})
			return err
		}, all, lifecycle.StageCall, 400 * time.Millisecond},
		{"a keyed command whose key is claimed slowly", paddock.ToolExec, func() error {
			_, err := e.m.Broker.Exec(slowClaim, r.ID, paddock.ExecRequest{Argv: []string{"true"}})
			return err
		}, withClaim, lifecycle.StageClaim, claimTook},
		{"a write", "write", func() error {
			_, err := e.m.Broker.CallTool(agent, r.ID, "write", json.RawMessage(`{"path":"w.txt","content":"x"}`))
			return err
		}, all, "", 0},
		{"a refused command (the host's network)", paddock.ToolExec, func() error {
			if _, err := e.m.Broker.Exec(agent, r.ID, paddock.ExecRequest{Argv: []string{"true"}, Net: "host"}); err == nil {
				t.Fatal("a command asking for the host's network was run")
			}
			return nil
		}, []string{lifecycle.StageQueue, lifecycle.StageRead}, "", 0},
	} {
		obs.take()
		if err := c.call(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := obs.take()
		var names []string
		for _, s := range got {
			if s.tool != c.tool {
				t.Errorf("%s: a stage of tool %q, want %q", c.name, s.tool, c.tool)
			}
			names = append(names, s.stage)
			if s.stage == c.slow && s.d < c.least {
				t.Errorf("%s: its %s stage took %s, and it took at least %s", c.name, s.stage, s.d, c.least)
			}
			if s.stage != c.slow && c.least > 0 && s.d >= c.least {
				t.Errorf("%s: its %s stage took %s, the time of its %s stage", c.name, s.stage, s.d, c.slow)
			}
		}
		if !slices.Equal(names, c.want) {
			t.Errorf("%s: stages %v, want %v", c.name, names, c.want)
		}
	}
}
