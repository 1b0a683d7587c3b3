package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/sandbox"
)

// The manager's side of what the API passes on: httpapi's tests serve a
// fake, and these hold the Manager to what the fake stands for.

// TestExpectSeq: an action that says which seq it saw is refused if the run
// moved on, and changes nothing.
func TestExpectSeq(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	r := e.create(t, paddock.KindClone, "")
	stale := func() context.Context { return paddock.WithExpectSeq(context.Background(), r.ID, r.LastSeq-1) }
	for name, act := range map[string]func(context.Context) error{
		"retain":     func(ctx context.Context) error { _, err := e.m.Runs.Retain(ctx, r.ID); return err },
		"reject":     func(ctx context.Context) error { _, err := e.m.Runs.Reject(ctx, r.ID); return err },
		"checkpoint": func(ctx context.Context) error { _, err := e.m.Runs.Checkpoint(ctx, r.ID, "x"); return err },
		"write": func(ctx context.Context) error {
			_, err := e.m.Broker.CallTool(ctx, r.ID, "write", json.RawMessage(`{"path":"x.txt","content":"x"}`))
			return err
		},
	} {
		err := act(stale())
		var pe *paddock.Error
		if !paddock.IsCode(err, paddock.CodeConflict) || !errors.As(err, &pe) || pe.Details["last_seq"] == nil {
			t.Fatalf("%s with a stale seq: %v", name, err)
		}
	}
	now, err := e.m.Run(context.Background(), r.ID)
	if err != nil || now.LastSeq != r.LastSeq || now.State() != paddock.StateReady {
		t.Fatalf("a refused action changed the run: %+v %v", now, err)
	}
	if _, err := os.Stat(filepath.Join(r.Workspace.Root, "x.txt")); err == nil {
		t.Fatal("a refused tool call wrote")
	}
	if _, err := e.m.Runs.Retain(paddock.WithExpectSeq(context.Background(), r.ID, r.LastSeq), r.ID); err != nil {
		t.Fatalf("with the right seq: %v", err)
	}
}

// TestExpectSeqExactlyOne: of concurrent calls that act before they are
// recorded (tool calls, commands) and expect the same seq, exactly one
// acts; 3 to 9 of 10 did when the seq was checked before the call acted
// and not with its record (issue #29 item 10).
func TestExpectSeqExactlyOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	r := e.create(t, paddock.KindClone, "")
	for round := range 3 {
		now, err := e.m.Run(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		const n = 10
		errs := make(chan error, n)
		for i := range n {
			go func() {
				ctx := paddock.WithExpectSeq(context.Background(), r.ID, now.LastSeq)
				_, err := e.m.Broker.CallTool(ctx, r.ID, "write", json.RawMessage(fmt.Sprintf(`{"path":"f%d-%d.txt","content":"x"}`, round, i)))
				errs <- err
			}()
		}
		ok := 0
		for range n {
			err := <-errs
			switch {
			case err == nil:
				ok++
			case !paddock.IsCode(err, paddock.CodeConflict):
				t.Fatalf("a call refused otherwise: %v", err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d of %d calls expecting seq %d acted, want exactly 1", round, ok, n, now.LastSeq)
		}
		written, _ := filepath.Glob(filepath.Join(r.Workspace.Root, fmt.Sprintf("f%d-*.txt", round)))
		if len(written) != 1 {
			t.Fatalf("round %d: %d files written, want 1", round, len(written))
		}
	}
}

// TestDeclaredSecretsRecordedMasked: what a caller sends about a run with
// declared secrets is recorded masked.
func TestDeclaredSecretsRecordedMasked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const v = "s3cr3t-value-42"
	e.m.Secret = func(name string) (string, bool) { return v, name == "API_TOKEN" }
	e.project(t)
	ctx := context.Background()
	r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "clone", Secrets: []string{"API_TOKEN"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Runs.Checkpoint(ctx, r.ID, "saving "+v); err != nil {
		t.Fatal(err)
	}
	recorded, _ := e.m.Runs.Events(ctx, r.ID, 0, 0)
	evs, _ := json.Marshal(recorded)
	if strings.Contains(string(evs), v) || !strings.Contains(string(evs), "saving [REDACTED:API_TOKEN]") {
		t.Fatalf("recorded: %s", evs)
	}
}

// TestSecretChangedKeepsItsOldValueMasked: a command writes its run's
// declared secret, from its environment, into a file; the operator then
// changes the secret. The change set's diff, the entry's own file read
// back by a command, and the command's events show neither value: the
// old one is masked as the secret too.
func TestSecretChangedKeepsItsOldValueMasked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	value := "first-token-value-1234"
	e.m.Secret = func(name string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		return value, name == "API_TOKEN"
	}
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	for _, kind := range []paddock.WorkspaceKind{paddock.KindOverlay, paddock.KindClone} {
		t.Run(string(kind), func(t *testing.T) {
			mu.Lock()
			old := value
			mu.Unlock()
			r := secretRun(t, e, kind)
			defer e.m.Runs.Reject(ctx, r.ID)
			res, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", `printf 'token=%s\n' "$API_TOKEN" > token.txt`}})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("writing the token: %v %+v", err, res)
			}
			mu.Lock()
			value = "second-token-value-5678-" + string(kind)
			mu.Unlock()

			cs, err := e.m.Changes.ChangeSet(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(cs.Diff, old) || !strings.Contains(cs.Diff, "token=[REDACTED:API_TOKEN]") {
				t.Fatalf("the diff after the secret changed:\n%s", cs.Diff)
			}
			res, err = e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", `cat token.txt; echo "now=$API_TOKEN"`}})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(res.Stdout, old) || strings.Contains(res.Stdout, "second-token") ||
				res.Stdout != "token=[REDACTED:API_TOKEN]\nnow=[REDACTED:API_TOKEN]\n" {
				t.Fatalf("the command's output: %q", res.Stdout)
			}
			recorded, _ := e.m.Runs.Events(ctx, r.ID, 0, 0)
			evs, _ := json.Marshal(recorded)
			if strings.Contains(string(evs), old) || strings.Contains(string(evs), "second-token") {
				t.Fatalf("the events hold a value of the secret: %s", evs)
			}
		})
	}
}

// TestSecretChangedDuringACall: the secret changes after the call's
// redactor was made, as the command's environment is read; the command
// gets the new value, and its output is masked with it.
func TestSecretChangedDuringACall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	value, flipped := "first-token-value-1234", false
	e.m.Secret = func(name string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		// Read for a command's environment: the secret changes now.
		pc := make([]uintptr, 16)
		frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
		for {
			f, more := frames.Next()
			if strings.HasSuffix(f.Function, ".commandEnv") && !flipped {
				value, flipped = "second-token-value-5678", true
			}
			if !more {
				break
			}
		}
		return value, name == "API_TOKEN"
	}
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	r := secretRun(t, e, paddock.KindOverlay)
	defer e.m.Runs.Reject(ctx, r.ID)
	res, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", `echo "now=$API_TOKEN"`}})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	changed := flipped
	mu.Unlock()
	if !changed {
		t.Fatal("the secret was never read for the command's environment (commandEnv): the test changes nothing")
	}
	if res.Stdout != "now=[REDACTED:API_TOKEN]\n" {
		t.Fatalf("the value the command was given, in its output: %q", res.Stdout)
	}
	// Its output kept to a limit that cuts the value: none of it shows,
	// in the answer or as it streamed.
	var streamed strings.Builder
	res, err = e.m.Broker.ExecStream(ctx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", `echo "abcdefgh$API_TOKEN"`}, Limits: paddock.ExecLimits{Output: 16}},
		&streamed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || res.Stdout != "abcdefgh[REDACTED:API_TOKEN]"+sandbox.TruncatedMarker || streamed.String() != "abcdefgh[REDACTED:API_TOKEN]" {
		t.Fatalf("cut inside the value: truncated %v, answer %q, streamed %q", res.Truncated, res.Stdout, streamed.String())
	}
}

// TestReviewRunsMaskTheReviewedSecrets: a run's command writes its
// declared secret into a file and the run submits; the review run made of
// that change set holds the real bytes, is never given the secret, and
// masks it in what its commands print, what its tools read, and its events.
func TestReviewRunsMaskTheReviewedSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const v = "reviewed-secret-value-91"
	e.m.Secret = func(name string) (string, bool) { return v, name == "API_TOKEN" }
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	r := secretRun(t, e, paddock.KindOverlay)
	sh(t, e.m, r.ID, `printf 'x=%s\n' "$API_TOKEN" > leak.txt`)
	if _, err := e.m.Changes.Submit(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	rv, err := e.m.Reviews.Review(ctx, r.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rv.Secrets) != 0 {
		t.Fatalf("the review run is given the reviewed run's secrets: %v", rv.Secrets)
	}
	res, err := e.m.Broker.Exec(ctx, rv.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", `cat leak.txt; echo "env=[$API_TOKEN]"`}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "x=[REDACTED:API_TOKEN]\nenv=[]\n" {
		t.Fatalf("the review run's command printed %q", res.Stdout)
	}
	read, err := e.m.Broker.CallTool(ctx, rv.ID, "read", []byte(`{"path":"leak.txt"}`))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(read); strings.Contains(string(b), v) || !strings.Contains(string(b), "[REDACTED:API_TOKEN]") {
		t.Fatalf("the review run's read tool: %s", b)
	}
	recorded, _ := e.m.Runs.Events(ctx, rv.ID, 0, 0)
	if evs, _ := json.Marshal(recorded); strings.Contains(string(evs), v) {
		t.Fatalf("the review run's events hold the value: %s", evs)
	}
}

// secretRun makes a run of kind that declares the secret API_TOKEN.
func secretRun(t *testing.T, e *env, kind paddock.WorkspaceKind) *paddock.Run {
	t.Helper()
	r, err := e.m.Runs.Create(context.Background(), paddock.CreateRunRequest{Project: "my-app", Kind: string(kind), Secrets: []string{"API_TOKEN"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBootstrapTokens: each bootstrap makes a run with its own token; a
// run's artifacts are there only as its bootstrap made them.
func TestBootstrapTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	boot := func() *paddock.BootstrapResult {
		b, err := e.m.Jobs.Bootstrap(ctx, paddock.BootstrapRequest{Project: "my-app", Agent: paddock.AgentDefinition{Name: "coder", Workspace: "write"},
			Task: "fix the bug", Inputs: []string{"README.md"}, Kind: "clone"})
		if err != nil {
			t.Fatalf("bootstrap: %v", err)
		}
		return b
	}
	b1, b2 := boot(), boot()
	if !strings.HasPrefix(b1.Token, "pdk_run_") || b1.Run.ID == b2.Run.ID || b1.Token == b2.Token {
		t.Fatalf("bootstrap results: %+v %+v", b1, b2)
	}
	if id, err := e.m.Jobs.RunForToken(ctx, b1.Token); err != nil || id != b1.Run.ID {
		t.Fatalf("token of run 1: %q %v", id, err)
	}
	if _, err := e.m.Jobs.RunForToken(ctx, "pdk_run_forged"); err == nil {
		t.Fatal("a forged token names a run")
	}
	if _, err := e.m.Jobs.Artifact(ctx, b1.Run.ID, "task"); err != nil {
		t.Fatalf("task: %v", err)
	}
	_, err := e.m.Jobs.Artifact(ctx, b1.Run.ID, "logs")
	mustCode(t, err, paddock.CodeConflict)
	plain := e.create(t, paddock.KindClone, "")
	_, err = e.m.Jobs.Artifact(ctx, plain.ID, "task")
	mustCode(t, err, paddock.CodeNotBootstrapped)
	for _, bad := range []paddock.BootstrapRequest{
		{Project: "my-app", Agent: paddock.AgentDefinition{Name: "Bad Name"}, Task: "x"},
		{Project: "my-app", Agent: paddock.AgentDefinition{Name: "a"}, Task: ""},
		{Project: "my-app", Agent: paddock.AgentDefinition{Name: "a"}, Task: "x", Inputs: []string{"../etc"}},
		{Project: "my-app", Agent: paddock.AgentDefinition{Name: "a", Workspace: "admin"}, Task: "x"},
	} {
		_, err := e.m.Jobs.Bootstrap(ctx, bad)
		if !paddock.IsCode(err, paddock.CodeBadRequest) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// TestProjectSettings: a project's settings change as asked; a request
// that asks nothing, or an unlock without force, is refused.
func TestProjectSettings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	_, err := e.m.Projects.Unlock(ctx, "my-app", "op", false)
	mustCode(t, err, paddock.CodeBadRequest)
	_, err = e.m.Projects.SetProject(ctx, "my-app", "op", paddock.SetProjectRequest{})
	mustCode(t, err, paddock.CodeBadRequest)
	_, err = e.m.Projects.SetProject(ctx, "nope", "op", paddock.SetProjectRequest{DefaultProtect: true})
	mustCode(t, err, paddock.CodeNotFound)
	allow := []string{"credit-trailer"}
	p, err := e.m.Projects.SetProject(ctx, "my-app", "op", paddock.SetProjectRequest{Protect: []string{"secrets/**"}, AllowAttribution: &allow})
	if err != nil || len(p.AttributionAllow) != 1 || p.AttributionAllow[0] != "credit-trailer" || p.Protected[len(p.Protected)-1] != "secrets/**" {
		t.Fatalf("set project: %+v %v", p, err)
	}
}

// TestBrokerWaitsForTheClaim: a call whose idempotency key is claimed
// beside it (paddock.WithClaimGate, httpapi's gated routes) does nothing
// and records nothing, not a refusal, until the claim is made, and
// nothing at all when the key is not its own.
func TestBrokerWaitsForTheClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	r := e.create(t, paddock.KindOverlay, "")
	made := func() bool {
		_, err := e.m.Broker.CallTool(context.Background(), r.ID, "read", json.RawMessage(`{"path":"made.txt"}`))
		return err == nil
	}
	agent := paddock.WithAgent(context.Background())
	notOurs := errors.New("another attempt's key")
	refused := paddock.WithClaimGate(agent, func(context.Context) error { return notOurs })
	for name, call := range map[string]func(context.Context) error{
		"exec": func(ctx context.Context) error {
			_, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "echo x > made.txt"}})
			return err
		},
		"write": func(ctx context.Context) error {
			_, err := e.m.Broker.CallTool(ctx, r.ID, "write", json.RawMessage(`{"path":"made.txt","content":"x"}`))
			return err
		},
		"no such tool": func(ctx context.Context) error { // refused, with an event
			_, err := e.m.Broker.CallTool(ctx, r.ID, "no_such_tool", json.RawMessage(`{}`))
			return err
		},
		"refused": func(ctx context.Context) error { // the host's network: refused, with an event
			_, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"true"}, Net: "host"})
			return err
		},
	} {
		if err := call(refused); !errors.Is(err, notOurs) {
			t.Fatalf("%s with the key another attempt's: %v", name, err)
		}
	}
	now, err := e.m.Run(context.Background(), r.ID)
	if err != nil || now.LastSeq != r.LastSeq {
		t.Fatalf("calls stopped at the gate recorded events: seq %d, was %d (%v)", now.LastSeq, r.LastSeq, err)
	}
	if made() {
		t.Fatal("a call stopped at the gate wrote")
	}
	// Claimed later: the command runs only once the claim is made.
	claimed := make(chan struct{})
	var waited sync.WaitGroup
	waited.Add(1)
	gated := paddock.WithClaimGate(agent, func(context.Context) error { waited.Done(); <-claimed; return nil })
	done := make(chan error)
	go func() {
		_, err := e.m.Broker.Exec(gated, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "echo x > made.txt"}})
		done <- err
	}()
	waited.Wait()
	if made() {
		t.Fatal("the command ran before its key was claimed")
	}
	close(claimed)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !made() {
		t.Fatal("the command, once claimed, wrote nothing")
	}
}

// TestClaimGateBeforeTheExpectStripe: a call that carries expect_seq and
// waits for its key's claim holds no run's stripe meanwhile: a call on
// the run expecting the same seq is not held up by it (the claim may be
// waiting for that very call, another attempt of the same key).
func TestClaimGateBeforeTheExpectStripe(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	r := e.create(t, paddock.KindOverlay, "")
	agent := paddock.WithAgent(context.Background())
	waiting, release := make(chan struct{}), make(chan struct{})
	gated := paddock.WithClaimGate(paddock.WithExpectSeq(agent, r.ID, r.LastSeq), func(context.Context) error {
		close(waiting)
		<-release
		return errors.New("another attempt's key")
	})
	stopped := make(chan error, 1)
	go func() {
		_, err := e.m.Broker.CallTool(gated, r.ID, "write", json.RawMessage(`{"path":"gated.txt","content":"x"}`))
		stopped <- err
	}()
	<-waiting
	done := make(chan error, 1)
	go func() {
		_, err := e.m.Broker.CallTool(paddock.WithExpectSeq(agent, r.ID, r.LastSeq), r.ID, "write", json.RawMessage(`{"path":"other.txt","content":"x"}`))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("a call expecting the run's seq waited for another call's claim")
	}
	close(release)
	if err := <-stopped; err == nil {
		t.Fatal("the call whose key was not its own was made")
	}
}
