package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
)

// TestRestartDoesNotStrandAgents: a graceful stop checkpoints every active
// run, whatever its kind; after the restart an agent's next call (with its
// run token, or through an MCP session) resumes its run, with an event
// that says so; a person still resumes by hand.
func TestRestartDoesNotStrandAgents(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	d := startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	ctx := context.Background()
	op := client.Unix(filepath.Join(home, "paddock.sock"))
	type started struct {
		id    string
		agent *client.Client
	}
	var runs []started
	for _, kind := range []string{"auto", "clone", "worktree"} {
		b, err := op.Bootstrap(ctx, paddock.BootstrapRequest{Project: "app", Task: "t", Kind: kind, Agent: paddock.AgentDefinition{Name: "a"}})
		if err != nil {
			t.Fatal(err)
		}
		agent := op.WithToken(b.Token)
		if res, err := agent.Exec(ctx, b.Run.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "echo kept > notes.txt"}}); err != nil || res.ExitCode != 0 {
			if err != nil && strings.Contains(err.Error(), "unsupported") && os.Getenv("CI") != "true" {
				t.Skipf("the sandbox cannot run here: %v", err)
			}
			t.Fatalf("%s: %+v %v", kind, res, err)
		}
		runs = append(runs, started{b.Run.ID, agent})
	}
	mcpRun := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "tool", mcpRun, "write", "--arg", "path=a.txt", "--arg", "content=x").must(t)
	human := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "tool", human, "write", "--arg", "path=a.txt", "--arg", "content=x").must(t)

	d.stop()
	if logb, _ := os.ReadFile(filepath.Join(home, "test-daemon.log")); strings.Contains(string(logb), "shutting down") && strings.Contains(string(logb), "level=ERROR") {
		t.Fatalf("the graceful stop failed to checkpoint:\n%s", logb)
	}
	startDaemon(t, home)
	for _, id := range []string{runs[0].id, runs[1].id, runs[2].id, mcpRun, human} {
		evs, err := op.Events(ctx, id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if !hasCheckpoint(evs, "daemon shutdown") {
			t.Fatalf("%s: the graceful stop did not checkpoint it", id)
		}
	}
	for _, r := range runs {
		res, err := r.agent.Exec(ctx, r.id, paddock.ExecRequest{Argv: []string{"cat", "notes.txt"}})
		if err != nil || res.Stdout != "kept\n" {
			t.Fatalf("the agent's first call after the restart: %+v %v", res, err)
		}
		evs, err := r.agent.Events(ctx, r.id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if !resumedBy(evs, "agent") {
			t.Fatalf("%s: no event says the agent's call resumed the run", r.id)
		}
	}
	// paddock mcp calls for the agent with the operator's client.
	if _, err := op.ForAgent().CallTool(ctx, mcpRun, "read", json.RawMessage(`{"path":"a.txt"}`)); err != nil {
		t.Fatalf("an MCP session's call after the restart: %v", err)
	}
	// A person's call does not resume behind their back: it says how.
	cli(t, home, "tool", human, "read", "--arg", "path=a.txt").wantCode(t, exitConflict, "paddock resume "+human)
	cli(t, home, "resume", human).must(t)
	cli(t, home, "tool", human, "read", "--arg", "path=a.txt").must(t)
}

func hasCheckpoint(evs []*paddock.Event, reason string) bool {
	for _, e := range evs {
		var cp paddock.Checkpoint
		if e.Type == paddock.EventCheckpoint && json.Unmarshal(e.Data, &cp) == nil && cp.Reason == reason {
			return true
		}
	}
	return false
}

func resumedBy(evs []*paddock.Event, by string) bool {
	for _, e := range evs {
		if e.Type != paddock.EventResumed {
			continue
		}
		var d struct {
			By string `json:"by"`
		}
		if json.Unmarshal(e.Data, &d) == nil && d.By == by {
			return true
		}
	}
	return false
}
