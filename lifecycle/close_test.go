package lifecycle_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/lifecycle"
)

// TestCloseWaitsForJobs: Close cancels a running job and returns only once
// the job's goroutine has recorded its end, however long that takes; a
// second Close is harmless; jobs and commands asked for afterwards are
// refused with ErrClosed, and nothing of them is recorded.
func TestCloseWaitsForJobs(t *testing.T) {
	lifecycle.SetJobTimings(t, time.Hour, 10*time.Second, 30*time.Second)
	e, f, _ := faultyEnv(t)
	r := e.create(t, paddock.KindClone, "")
	// The job's first read of its run waits for release: a job that is
	// still running when Close is called, and cannot end before release.
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	armed, reached := false, make(chan struct{})
	f.set(func(f *faultStore) {
		f.createJob = func(*paddock.Job) error { armed = true; return nil }
		f.run = func(string) error {
			if armed {
				armed = false
				close(reached)
				<-release
			}
			return nil
		}
	})
	j := quickJob(t, e, r.ID)
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the job never read its run")
	}
	if n := lifecycle.RunningJobs(e.m); n != 1 {
		t.Fatalf("%d jobs running, want 1", n)
	}
	closed := make(chan error, 1)
	go func() { closed <- e.m.Close(context.Background()) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a job's goroutine was still running", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return after the job could end")
	}
	// Nothing waits here: Close returned after the job's end was recorded.
	if n := lifecycle.RunningJobs(e.m); n != 0 {
		t.Fatalf("%d jobs running after Close", n)
	}
	got, err := e.m.Jobs.Job(context.Background(), r.ID, j.ID)
	if err != nil || got.State != paddock.JobFailed || got.Reason != "canceled" || got.EndedAt.IsZero() {
		t.Fatalf("job after Close = %+v, %v; want failed, canceled", got, err)
	}
	if err := e.m.Close(context.Background()); err != nil {
		t.Fatalf("second Close = %v", err)
	}

	jobs, _ := e.m.Jobs.Jobs(context.Background(), r.ID)
	_, err = e.m.Jobs.StartJob(context.Background(), r.ID, paddock.StartJobRequest{Kind: paddock.JobExec,
		Exec: &paddock.ExecRequest{Argv: []string{"true"}}})
	if !errors.Is(err, lifecycle.ErrClosed) || !paddock.IsCode(err, paddock.CodeBusy) {
		t.Fatalf("StartJob after Close = %v, want busy, ErrClosed", err)
	}
	if after, _ := e.m.Jobs.Jobs(context.Background(), r.ID); len(after) != len(jobs) {
		t.Fatalf("a refused job was recorded: %d jobs, then %d", len(jobs), len(after))
	}
	evs, _ := e.m.Runs.Events(context.Background(), r.ID, 0, 0)
	_, err = e.m.Broker.Exec(context.Background(), r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "echo ran > ran.txt"}})
	if !errors.Is(err, lifecycle.ErrClosed) || !paddock.IsCode(err, paddock.CodeBusy) {
		t.Fatalf("Exec after Close = %v, want busy, ErrClosed", err)
	}
	if after, _ := e.m.Runs.Events(context.Background(), r.ID, 0, 0); len(after) != len(evs) {
		t.Fatalf("a refused command changed the run: %d events, then %d", len(evs), len(after))
	}
	if _, err := os.Stat(filepath.Join(r.Workspace.Root, "ran.txt")); err == nil {
		t.Fatal("a command ran after Close")
	}
}

// TestCloseEndsARunningCommand: a job running a long command in the
// sandbox is ended by Close, which returns once the job's goroutine, its
// lease renewal and its command's disk watchdog are gone, and then leaves
// the run checkpointed for the next daemon.
func TestCloseEndsARunningCommand(t *testing.T) {
	lifecycle.SetJobTimings(t, 20*time.Millisecond, 10*time.Second, 30*time.Second)
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	r := e.create(t, paddock.KindOverlay, "")
	before := runtime.NumGoroutine()
	ctx := context.Background()
	j, err := e.m.Jobs.StartJob(ctx, r.ID, paddock.StartJobRequest{Kind: paddock.JobExec,
		Exec: &paddock.ExecRequest{Argv: []string{"sh", "-c", "echo started; exec sleep 60"}}})
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(e.state, "artifacts", r.ID, "jobs", j.ID+".log")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "started") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job's command did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	if err := e.m.Close(ctx); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("Close took %v: it waited for the command rather than ending it", d)
	}
	if n := lifecycle.RunningJobs(e.m); n != 0 {
		t.Fatalf("%d jobs running after Close", n)
	}
	got, err := e.m.Jobs.Job(ctx, r.ID, j.ID)
	if err != nil || got.State != paddock.JobFailed || got.Reason != "canceled" {
		t.Fatalf("job after Close = %+v, %v; want failed, canceled", got, err)
	}
	run, err := e.m.Run(ctx, r.ID)
	if err != nil || run.State() != paddock.StateCheckpointed || run.Workspace.Checkpoint.Reason != "daemon shutdown" {
		t.Fatalf("run after Close = %+v, %v; want checkpointed at shutdown", run, err)
	}
	// What is left of the job's goroutines is nothing: allow one that the
	// runtime or the pool's janitor may still be ending.
	deadline = time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, %d before the job", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
