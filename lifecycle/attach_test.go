package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// terminalScreen collects what a command's terminal shows.
type terminalScreen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *terminalScreen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *terminalScreen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *terminalScreen) waitFor(t *testing.T, want string) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !strings.Contains(s.String(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the terminal never showed %q: %q", want, s.String())
		}
	}
}

// TestExecAttach: an attached command on a terminal, through the broker:
// it has a terminal of the size asked (TERM says so), a resize reaches it,
// what is typed reaches it, its output comes masked, and it is recorded as
// any exec is (with its terminal and the bytes typed, never their
// content). The broker refuses what the definition does not allow, and a
// caller that goes ends the command.
func TestExecAttach(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const v = "s3cr3t-attach-42"
	e.m.Secret = func(name string) (string, bool) { return v, name == "API_TOKEN" }
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "overlay", Secrets: []string{"API_TOKEN"}})
	if err != nil {
		t.Fatal(err)
	}
	scr := &terminalScreen{}
	inR, inW := io.Pipe()
	defer inW.Close()
	resize := make(chan paddock.TerminalSize, 1)
	script := `test -t 0 && test -t 1 && echo TTY; echo "TERM=$TERM SIZE=$(stty size </dev/tty)"; echo "secret $API_TOKEN"
trap 'w=1' WINCH
echo READY
i=0; while [ -z "$w" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
echo "RESIZED $w $(stty size)"
printf 'name? '; IFS= read -r l; echo "GOT $l"; echo "$l" > typed.txt`
	type outcome struct {
		res *paddock.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := e.m.Broker.ExecAttach(ctx, r.ID, paddock.ExecRequest{Argv: []string{"bash", "-c", script}, Terminal: &paddock.TerminalSize{Rows: 24, Cols: 80}},
			paddock.ExecIO{Stdin: inR, Resize: resize, Stdout: scr, Stderr: scr})
		done <- outcome{res, err}
	}()
	scr.waitFor(t, "READY")
	resize <- paddock.TerminalSize{Rows: 40, Cols: 120}
	scr.waitFor(t, "RESIZED")
	scr.waitFor(t, "name? ") // a prompt shows before its line ends
	io.WriteString(inW, "hello there\n")
	inW.Close()
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	out := scr.String()
	for _, want := range []string{"TTY\r\n", "TERM=xterm-256color SIZE=24 80\r\n", "secret [REDACTED:API_TOKEN]\r\n", "RESIZED 1 40 120\r\n", "GOT hello there\r\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal does not show %q: %q", want, out)
		}
	}
	if strings.Contains(out, v) || o.res.ExitCode != 0 || o.res.Enforcement.Mode != "resident" {
		t.Fatalf("result: %+v, output %q", o.res, out)
	}
	cs, err := e.m.Changes.ChangeSet(ctx, r.ID)
	if err != nil || len(cs.Entries) != 1 || cs.Entries[0].Path != "typed.txt" {
		t.Fatalf("change set: %+v %v", cs, err)
	}
	evs, _ := e.m.Runs.Events(ctx, r.ID, 0, 0)
	var exec map[string]any
	enforced := false
	for _, ev := range evs {
		switch ev.Type {
		case paddock.EventExec:
			exec = nil
			json.Unmarshal(ev.Data, &exec)
		case paddock.EventSandboxEnforced:
			enforced = exec != nil
		}
	}
	b, _ := json.Marshal(exec)
	if !enforced || !strings.Contains(string(b), `"terminal":{"cols":80,"rows":24}`) || exec["stdin_bytes"] != float64(len("hello there\n")) ||
		exec["stdin_streamed"] != true || strings.Contains(string(b), "hello") {
		t.Fatalf("the exec event: %s (enforcement recorded: %v)", b, enforced)
	}

	// The caller goes: the command ends.
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	res, err := e.m.Broker.ExecAttach(cctx, r.ID, paddock.ExecRequest{Argv: []string{"sleep", "30"}, Terminal: &paddock.TerminalSize{Rows: 24, Cols: 80}},
		paddock.ExecIO{Stdout: io.Discard})
	if time.Since(start) > 10*time.Second || err == nil && res.Signal == "" {
		t.Fatalf("a command whose caller went: %+v %v after %v", res, err, time.Since(start))
	}

	// A terminal of no size is refused.
	if _, err := e.m.Broker.ExecAttach(ctx, r.ID, paddock.ExecRequest{Argv: []string{"true"}, Terminal: &paddock.TerminalSize{}}, paddock.ExecIO{}); !paddock.IsCode(err, paddock.CodeBadRequest) {
		t.Fatalf("a terminal of no size: %v", err)
	}
	// A job has no one at a terminal.
	if _, err := e.m.Jobs.StartJob(ctx, r.ID, paddock.StartJobRequest{Kind: paddock.JobExec,
		Exec: &paddock.ExecRequest{Argv: []string{"true"}, Terminal: &paddock.TerminalSize{Rows: 24, Cols: 80}}}); !paddock.IsCode(err, paddock.CodeBadRequest) {
		t.Fatalf("a job on a terminal: %v", err)
	}
}

// TestExecAttachThroughTheBroker: what the run's definition does not allow
// is refused before any terminal is opened, and recorded.
func TestExecAttachThroughTheBroker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	if _, err := e.m.Projects.AddAgent(ctx, paddock.AddAgentRequest{File: "asker.toml", Source: askingAgent}); err != nil {
		t.Fatal(err)
	}
	r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "clone", Agent: "asker"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.m.Broker.ExecAttach(ctx, r.ID, paddock.ExecRequest{Argv: []string{"bash"}, Terminal: &paddock.TerminalSize{Rows: 24, Cols: 80}},
		paddock.ExecIO{Stdin: strings.NewReader("rm -rf /\n"), Stdout: io.Discard})
	if !paddock.IsCode(err, paddock.CodeForbidden) {
		t.Fatalf("bash for an agent that may run echo and sleep: %v", err)
	}
	evs, _ := e.m.Runs.Events(ctx, r.ID, 0, 0)
	last := evs[len(evs)-1]
	if last.Type != paddock.EventToolCall || !strings.Contains(string(last.Data), `"deny"`) {
		t.Fatalf("the refusal's record: %s %s", last.Type, last.Data)
	}
}
