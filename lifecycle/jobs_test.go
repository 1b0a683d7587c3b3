package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/lifecycle"
	"github.com/paddock-dev/paddock/tools"
)

// lockedBuffer is a log destination a job's goroutine and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// faultyEnv is an env whose manager's store fails on demand and whose log
// the test reads.
func faultyEnv(t *testing.T) (*env, *faultStore, *lockedBuffer) {
	t.Helper()
	e := newEnv(t)
	f := &faultStore{Store: e.m.Store}
	e.m.Store = f
	logs := &lockedBuffer{}
	e.m.Logger = slog.New(slog.NewTextHandler(logs, nil))
	e.project(t)
	t.Cleanup(func() { e.m.Close(context.Background()) })
	return e, f, logs
}

var errInjected = errors.New("disk I/O error (injected)")

// quickJob starts a job that ends at once without a sandbox: its request
// is refused when the command is about to run.
func quickJob(t *testing.T, e *env, id string) *paddock.Job {
	t.Helper()
	j, err := e.m.Jobs.StartJob(context.Background(), id, paddock.StartJobRequest{Kind: paddock.JobExec,
		Exec: &paddock.ExecRequest{Argv: []string{"true"}, Env: []string{"LD_PRELOAD=/x.so"}}})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func waitJob(t *testing.T, m *lifecycle.Manager, id, jobID string, within time.Duration) *paddock.Job {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		j, err := m.Jobs.Job(context.Background(), id, jobID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != paddock.JobRunning {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is still %s after %v", jobID, j.State, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func countEvents(t *testing.T, m *lifecycle.Manager, id, typ string) int {
	t.Helper()
	evs, err := m.Runs.Events(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// TestJobWithoutALogDoesNotRun: a job whose log file cannot be made ends
// failed, saying so, and its command never runs (its output would have
// gone nowhere).
func TestJobWithoutALogDoesNotRun(t *testing.T) {
	t.Parallel()
	e, _, logs := faultyEnv(t)
	if os.Getuid() == 0 {
		e.m.SandboxUID = 65534 // so that, but for the log, the command could run
	}
	r := e.create(t, paddock.KindClone, "")
	dir := filepath.Join(e.state, "artifacts", r.ID)
	os.MkdirAll(dir, 0o700)
	if err := os.WriteFile(filepath.Join(dir, "jobs"), []byte("a file where the logs' directory goes"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := e.m.Jobs.StartJob(context.Background(), r.ID, paddock.StartJobRequest{Kind: paddock.JobExec,
		Exec: &paddock.ExecRequest{Argv: []string{"sh", "-c", "echo ran > ran.txt"}}})
	if err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, e.m, r.ID, j.ID, time.Minute)
	if j.State != paddock.JobFailed || !strings.Contains(j.Reason, "log") {
		t.Fatalf("job = %s (%q), want failed for want of its log", j.State, j.Reason)
	}
	if _, err := os.Stat(filepath.Join(r.Workspace.Root, "ran.txt")); err == nil {
		t.Fatal("the command ran with no log to write to")
	}
	if !strings.Contains(logs.String(), "cannot create a job's log") {
		t.Fatalf("the daemon's log does not say why:\n%s", logs)
	}
}

// TestJobEndIsRecordedDespiteStoreErrors: a failed write of a job's end is
// retried, so the job does not stay "running"; past the retries' deadline
// it is logged, and the next start marks the job interrupted.
func TestJobEndIsRecordedDespiteStoreErrors(t *testing.T) {
	lifecycle.SetJobTimings(t, time.Hour, 10*time.Second, 30*time.Second)
	e, f, logs := faultyEnv(t)
	r := e.create(t, paddock.KindClone, "")
	failures := 0
	f.set(func(f *faultStore) {
		f.updateJob = func(j *paddock.Job) error {
			if j.State != paddock.JobRunning && failures < 3 {
				failures++
				return errInjected
			}
			return nil
		}
	})
	j := waitJob(t, e.m, r.ID, quickJob(t, e, r.ID).ID, 10*time.Second)
	if j.State != paddock.JobFailed || !strings.Contains(j.Reason, "LD_") || j.EndedAt.IsZero() {
		t.Fatalf("job = %+v", j)
	}
	if n := countEvents(t, e.m, r.ID, paddock.EventJobFinished); n != 1 {
		t.Fatalf("%d job.finished events, want 1", n)
	}
	if n := strings.Count(logs.String(), "cannot record a job's end; retrying"); n != 3 {
		t.Fatalf("%d retries logged, want 3:\n%s", n, logs)
	}

	// A store that stays broken: the job is given up on, loudly, and the
	// next daemon finds it.
	lifecycle.SetJobTimings(t, time.Hour, 50*time.Millisecond, 30*time.Second)
	f.set(func(f *faultStore) {
		f.updateJob = func(j *paddock.Job) error {
			if j.State != paddock.JobRunning {
				return errInjected
			}
			return nil
		}
	})
	j = quickJob(t, e, r.ID)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "it stays running until the next start") {
		if time.Now().After(deadline) {
			t.Fatalf("no error logged for a job end never recorded:\n%s", logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.m.Close(context.Background())
	e.reopen(t)
	if j, err := e.m.Jobs.Job(context.Background(), r.ID, j.ID); err != nil || j.State != paddock.JobInterrupted {
		t.Fatalf("after a restart the job is %+v, %v; want interrupted", j, err)
	}
}

// blockJobRead makes the next job's first read of its run hang until the
// test ends: a job that stays running for as long as the test needs,
// without a sandbox.
func blockJobRead(t *testing.T, f *faultStore) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	armed := false
	f.set(func(f *faultStore) {
		f.createJob = func(*paddock.Job) error { armed = true; return nil }
		f.run = func(string) error {
			if armed {
				armed = false
				<-release
			}
			return nil
		}
	})
}

// TestLeaseRenewalErrorsAreLogged: a lease that cannot be renewed is not
// a silent matter.
func TestLeaseRenewalErrorsAreLogged(t *testing.T) {
	lifecycle.SetJobTimings(t, 5*time.Millisecond, 10*time.Second, 30*time.Second)
	e, f, logs := faultyEnv(t)
	r := e.create(t, paddock.KindClone, "")
	blockJobRead(t, f)
	f.set(func(f *faultStore) {
		f.updateJob = func(j *paddock.Job) error {
			if j.State == paddock.JobRunning {
				return errInjected
			}
			return nil
		}
	})
	quickJob(t, e, r.ID)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "cannot renew a job's lease") {
		if time.Now().After(deadline) {
			t.Fatalf("a failed lease renewal was not logged:\n%s", logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCancelJobHonoursItsContext: a caller of CancelJob that stops waiting
// gets its answer then, even from a store that never looks at contexts.
func TestCancelJobHonoursItsContext(t *testing.T) {
	lifecycle.SetJobTimings(t, time.Hour, 10*time.Second, 30*time.Second)
	e, f, _ := faultyEnv(t)
	r := e.create(t, paddock.KindClone, "")
	blockJobRead(t, f)
	j := quickJob(t, e, r.ID)
	f.set(func(f *faultStore) { f.deaf = true })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { _, err := e.m.Jobs.CancelJob(ctx, r.ID, j.ID); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("CancelJob = %v, want its context's error", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("CancelJob answered %v after its context ended", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("CancelJob kept waiting after its caller's context ended")
	}
}

// TestRefuseWhileJobRunsFailsClosed: when the running jobs cannot be read,
// an action that would pull the workspace from under one is refused.
func TestRefuseWhileJobRunsFailsClosed(t *testing.T) {
	t.Parallel()
	e, f, _ := faultyEnv(t)
	r := e.create(t, paddock.KindClone, "")
	f.set(func(f *faultStore) { f.jobs = func() error { return errInjected } })
	ctx := context.Background()
	if _, err := e.m.Runs.Reject(ctx, r.ID); err == nil {
		t.Fatal("reject went ahead without knowing whether a job runs")
	}
	if _, err := e.m.Runs.Remove(ctx, r.ID); err == nil {
		t.Fatal("rm went ahead without knowing whether a job runs")
	}
	f.set(func(f *faultStore) { f.jobs = nil })
	got, err := e.m.Run(ctx, r.ID)
	if err != nil || got.State() != paddock.StateReady {
		t.Fatalf("run = %v, %v; want it still ready", got.State(), err)
	}
	if _, err := os.Stat(filepath.Join(r.Workspace.Root, "README.md")); err != nil {
		t.Fatalf("workspace: %v", err)
	}
}

// TestRecordsSurviveADisconnect: a client that disconnects just as an action
// records what it did leaves the record written: the effect happened.
func TestRecordsSurviveADisconnect(t *testing.T) {
	t.Parallel()
	e, f, _ := faultyEnv(t)
	e.m.Identity = gitx.Identity{Name: "Ada Reviewer", Email: "ada@example.com"}
	// A client that leaves as the made workspace is recorded ready.
	ctx, cancel := context.WithCancel(context.Background())
	transitions := 0
	f.set(func(f *faultStore) {
		f.appendEvent = func(_, typ string) error {
			if typ == paddock.TransitionEvent {
				if transitions++; transitions == 2 { // preparing → ready
					cancel()
				}
			}
			return nil
		}
	})
	r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: string(paddock.KindClone)})
	f.set(func(f *faultStore) { f.appendEvent = nil })
	if err != nil || r.State() != paddock.StateReady {
		t.Fatalf("create whose client left: %v, %v; want it ready", r, err)
	}
	// disconnect runs action with a context the client drops as the event
	// of type typ is being appended.
	disconnect := func(typ string, action func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f.set(func(f *faultStore) {
			f.appendEvent = func(_, got string) error {
				if got == typ {
					cancel()
				}
				return nil
			}
		})
		defer f.set(func(f *faultStore) { f.appendEvent = nil })
		if err := action(ctx); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if n := countEvents(t, e.m, r.ID, typ); n != 1 {
			t.Fatalf("%d %s events after the client left, want 1", n, typ)
		}
	}
	disconnect(paddock.EventToolCall, func(ctx context.Context) error {
		args, _ := json.Marshal(map[string]string{"path": "NOTES.md", "content": "hello\n"})
		_, err := e.m.Broker.CallTool(ctx, r.ID, "write", args)
		return err
	})
	disconnect(paddock.EventInbox, func(ctx context.Context) error {
		_, err := e.m.Broker.Deliver(ctx, r.ID, "spec.txt", strings.NewReader("the spec\n"), tools.DefaultInboxLimits)
		return err
	})
	var hash string
	disconnect(paddock.EventSubmitted, func(ctx context.Context) error {
		cs, err := e.m.Changes.Submit(ctx, r.ID)
		if err == nil {
			hash = cs.Hash
		}
		return err
	})
	disconnect(paddock.EventApproved, func(ctx context.Context) error {
		_, err := e.m.Changes.Approve(ctx, r.ID, hash, "ada")
		return err
	})
	disconnect(paddock.EventApplied, func(ctx context.Context) error {
		_, err := e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{})
		return err
	})
}

// TestNoneAgentRunsOnAnInstance: a none run's agent command runs (it
// answered "no workspace to run a job in": issue #29 item 10), on an
// instance sandbox: an empty directory of its own, its home and its API,
// nothing of the project's, no network; its directory goes with the job.
// Exec and verify jobs stay refused: the run has no workspace.
func TestNoneAgentRunsOnAnInstance(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	script := `pwd; ls -A | wc -l; test -d /home/paddock && echo home; ls "$OLDPWD" >/dev/null 2>&1; (exec 3<>/dev/tcp/127.0.0.1/1) 2>/dev/null || echo no-network; echo decided`
	b, err := e.m.Jobs.Bootstrap(ctx, paddock.BootstrapRequest{Project: "my-app", Task: "decide", Agent: paddock.AgentDefinition{
		Name: "judge", Workspace: "none", Tools: []string{"capabilities", "request_access"}, Command: []string{"sh", "-c", script}}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := e.m.Jobs.StartJob(ctx, b.Run.ID, paddock.StartJobRequest{Kind: paddock.JobAgent})
	if err != nil {
		t.Fatal(err)
	}
	if j = waitJob(t, e.m, b.Run.ID, j.ID, 30*time.Second); j.State != paddock.JobSucceeded {
		t.Fatalf("the none agent's command: %+v", j)
	}
	a, err := e.m.Jobs.Artifact(ctx, b.Run.ID, "logs")
	if err != nil {
		t.Fatal(err)
	}
	log, _ := a.Content.(string)
	dir := filepath.Join(e.state, "workspaces", b.Run.ID+".aux", "instance")
	if !strings.Contains(log, dir+"\n0\nhome\nno-network\ndecided\n") {
		t.Fatalf("the none agent's command saw:\n%s", log)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the instance directory outlived its job: %v", err)
	}
	for _, kind := range []paddock.JobKind{paddock.JobExec, paddock.JobVerify} {
		req := paddock.StartJobRequest{Kind: kind}
		if kind == paddock.JobExec {
			req.Exec = &paddock.ExecRequest{Argv: []string{"true"}}
		}
		if _, err := e.m.Jobs.StartJob(ctx, b.Run.ID, req); !paddock.IsCode(err, paddock.CodeForbidden) {
			t.Errorf("a none run's %s job: %v", kind, err)
		}
	}
}
