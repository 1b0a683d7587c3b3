package lifecycle_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/lifecycle"
	"github.com/paddock-dev/paddock/sandbox"
)

// TestAgentSessionLimits: an agent's session (paddock run's CMD, an agent
// job) is not one command (#30 item 4). It may run past the commands'
// ceiling, up to the session's (none at a terminal, session_limits
// otherwise), with no CPU limit; an agent cannot make its own commands
// sessions; a timeout says so in words.
func TestAgentSessionLimits(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	e.m.ExecLimits = paddock.CommandLimits{Wall: 10 * time.Minute}
	e.m.SessionLimits = lifecycle.SessionLimits{Wall: time.Hour}
	ctx := context.Background()
	r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "clone"})
	if err != nil {
		t.Fatal(err)
	}
	exec := func(ctx context.Context, req paddock.ExecRequest) (*paddock.ExecResult, error) {
		if req.Argv == nil {
			req.Argv = []string{"true"}
		}
		return e.m.Broker.ExecStream(ctx, r.ID, req, &strings.Builder{}, &strings.Builder{})
	}
	// A command may not ask past exec_limits; a session may, up to its own.
	if _, err := exec(ctx, paddock.ExecRequest{Timeout: "30m"}); !paddock.IsCode(err, paddock.CodeForbidden) {
		t.Fatalf("a command asking for 30m under a 10m ceiling: %v", err)
	}
	res, err := exec(ctx, paddock.ExecRequest{Timeout: "30m", Session: true})
	if err != nil || res.Enforcement.Limits.Wall != 30*time.Minute || res.Enforcement.Limits.CPU != sandbox.NoLimit {
		t.Fatalf("a session asking for 30m: %v %+v", err, res)
	}
	if _, err := exec(ctx, paddock.ExecRequest{Timeout: "2h", Session: true}); !paddock.IsCode(err, paddock.CodeForbidden) || !strings.Contains(err.Error(), "session_limits") {
		t.Fatalf("a session asking past session_limits.wall: %v", err)
	}
	// Unattended, a session gets session_limits.wall; at a terminal, none.
	if res, err := exec(ctx, paddock.ExecRequest{Session: true}); err != nil || res.Enforcement.Limits.Wall != time.Hour {
		t.Fatalf("an unattended session: %v %+v", err, res)
	}
	res, err = exec(ctx, paddock.ExecRequest{Session: true, Terminal: &paddock.TerminalSize{Rows: 24, Cols: 80}})
	if err != nil || res.Enforcement.Limits.Wall != sandbox.NoLimit {
		t.Fatalf("a session at a terminal: %v %+v", err, res)
	}
	// An agent's own exec is a command of its session, never a session.
	if _, err := exec(paddock.WithAgent(ctx), paddock.ExecRequest{Session: true}); !paddock.IsCode(err, paddock.CodeForbidden) {
		t.Fatalf("an agent asking for a session: %v", err)
	}
	// A timeout is said in words, in the answer and the event.
	res, err = exec(ctx, paddock.ExecRequest{Argv: []string{"sleep", "30"}, Timeout: "300ms", Session: true})
	if err != nil || !res.TimedOut || !strings.Contains(res.Killed, "its session's time limit of 300ms") {
		t.Fatalf("a session past its timeout: %v %+v", err, res)
	}
	evs, _ := e.m.Runs.Events(ctx, r.ID, 0, 0)
	found := false
	for _, ev := range evs {
		if ev.Type == paddock.EventExec && strings.Contains(string(ev.Data), "its session's time limit") {
			found = true
		}
	}
	if !found {
		t.Fatal("no exec event says the session reached its time limit")
	}
}
