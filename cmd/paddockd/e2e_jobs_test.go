package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestJobs: an orchestrator bootstraps a run, starts its agent as a job with
// the run's own token, reads its logs and result; a second job while one
// runs is busy; a job can be canceled; a job left running by a killed daemon
// is interrupted on restart.
func TestJobs(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 1)
	d := startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	ctx := context.Background()
	op := client.Unix(filepath.Join(home, "paddock.sock"))
	b, err := op.Bootstrap(ctx, paddock.BootstrapRequest{Project: "app", Task: "say hello",
		Agent: paddock.AgentDefinition{Name: "greeter", Command: []string{"sh", "-c", "echo agent-ran; cat README.md; sleep 0.3"}}})
	if err != nil {
		t.Fatal(err)
	}
	agent := op.WithToken(b.Token)
	id := b.Run.ID
	wait := func(job string) *paddock.Job {
		t.Helper()
		for i := 0; i < 500; i++ {
			j, err := agent.Job(ctx, id, job)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != paddock.JobRunning {
				return j
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("the job did not end")
		return nil
	}
	j, err := agent.StartJob(ctx, id, paddock.StartJobRequest{Kind: paddock.JobAgent})
	if err != nil || j.State != paddock.JobRunning {
		t.Fatalf("start: %+v %v", j, err)
	}
	if _, err := agent.StartJob(ctx, id, paddock.StartJobRequest{Kind: paddock.JobExec, Exec: &paddock.ExecRequest{Argv: []string{"true"}}}); !paddock.IsCode(err, paddock.CodeBusy) {
		t.Fatalf("a second job: %v, want busy", err)
	}
	if j = wait(j.ID); j.State != paddock.JobSucceeded || j.ExitCode == nil || *j.ExitCode != 0 {
		t.Fatalf("job: %+v", j)
	}
	logs, err := agent.Artifact(ctx, id, "logs")
	if err != nil || !strings.Contains(logs.Content.(string), "agent-ran\nhello") {
		t.Fatalf("logs: %+v %v", logs, err)
	}
	res, _ := agent.Artifact(ctx, id, "result")
	if raw, _ := json.Marshal(res.Content); !strings.Contains(string(raw), `"exit_code":0`) {
		t.Fatalf("result: %s", raw)
	}

	// Cancel.
	j, err = agent.StartJob(ctx, id, paddock.StartJobRequest{Kind: paddock.JobExec, Exec: &paddock.ExecRequest{Argv: []string{"sleep", "60"}}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := op.Reject(ctx, id); !paddock.IsCode(err, paddock.CodeBusy) {
		t.Fatalf("reject under a running job: %v, want busy", err)
	}
	if j, err = agent.CancelJob(ctx, id, j.ID); err != nil || j.State != paddock.JobFailed || j.Reason != "canceled" {
		t.Fatalf("cancel: %+v %v", j, err)
	}

	// A daemon killed under a running job: the job is interrupted on restart.
	j, err = agent.StartJob(ctx, id, paddock.StartJobRequest{Kind: paddock.JobExec, Exec: &paddock.ExecRequest{Argv: []string{"sleep", "60"}}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	d.kill9()
	startDaemon(t, home)
	if j, err = agent.Job(ctx, id, j.ID); err != nil || j.State != paddock.JobInterrupted {
		t.Fatalf("after kill -9: %+v %v", j, err)
	}
	if evs := cli(t, home, "events", id).must(t).out; !strings.Contains(evs, "job.interrupted") {
		t.Fatalf("events: %s", evs)
	}
	// And the run takes a new job.
	j, err = agent.StartJob(ctx, id, paddock.StartJobRequest{Kind: paddock.JobExec, Exec: &paddock.ExecRequest{Argv: []string{"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	if j = wait(j.ID); j.State != paddock.JobSucceeded {
		t.Fatalf("after restart: %+v", j)
	}
}

// TestVerifyUsesTheBaseRecipe: a verify job runs the manifest's commands with
// the recipes of the base revision; an agent that rewrites the Makefile to
// pass does not change what verifies its work.
func TestVerifyUsesTheBaseRecipe(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 1)
	gittest.Commit(t, repo, "verification", map[string]string{"Makefile": "test:\n\ttest -f README.md\n"})
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	ctx := context.Background()
	op := client.Unix(filepath.Join(home, "paddock.sock"))
	b, err := op.Bootstrap(ctx, paddock.BootstrapRequest{Project: "app", Task: "t", Agent: paddock.AgentDefinition{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	verify := func() *paddock.Job {
		j, err := op.StartJob(ctx, b.Run.ID, paddock.StartJobRequest{Kind: paddock.JobVerify})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 500 && j.State == paddock.JobRunning; i++ {
			time.Sleep(20 * time.Millisecond)
			j, _ = op.Job(ctx, b.Run.ID, j.ID)
		}
		return j
	}
	if j := verify(); j.State != paddock.JobSucceeded {
		t.Fatalf("verify of an untouched workspace: %+v", j)
	}
	// The agent breaks the work and rewrites the recipe to hide it.
	if _, err := op.Exec(ctx, b.Run.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "rm README.md && printf 'test:\\n\\ttrue\\n' > Makefile"}}); err != nil {
		t.Fatal(err)
	}
	if j := verify(); j.State != paddock.JobFailed {
		t.Fatalf("verify after the agent rewrote the Makefile: %+v", j)
	}
	// Nor can it rewrite the staged recipe.
	res, _ := op.Exec(ctx, b.Run.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "echo x >> .paddock/manifest/Makefile"}})
	if res == nil || res.ExitCode == 0 {
		t.Fatal("the staged recipe was writable")
	}
}
