package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/tools"
)

// fake is the Service the API's tests serve: projects, runs and their
// events in memory, and a record of every call, so a test sees exactly
// what a request asked of the service (or that it asked nothing).
type fake struct {
	mu       sync.Mutex
	calls    []call
	fail     error // when set, every call returns it
	projects map[string]*paddock.Project
	runs     map[string]*paddock.Run
	events   map[string][]*paddock.Event
	appended chan struct{} // closed and replaced at each append
	tokens   map[string]string
	secret   map[string]string // a run's declared secret: name=value
	gone     map[string]bool   // runs whose attached exec saw its client go
	n        int
}

// call is one call to the service, as the test reads it.
type call struct {
	what   string // the method and its arguments
	agent  bool   // made for the run's agent (paddock.WithAgent)
	expect *paddock.Expectation
}

var (
	_ Projects   = (*fake)(nil)
	_ Runs       = (*fake)(nil)
	_ Jobs       = (*fake)(nil)
	_ Broker     = (*fake)(nil)
	_ Changes    = (*fake)(nil)
	_ Provenance = (*fake)(nil)
	_ Verifier   = (*fake)(nil)
	_ Reviews    = (*fake)(nil)
	_ Forks      = (*fake)(nil)
	_ Flows      = (*fake)(nil)
	_ Queue      = (*fake)(nil)
	_ Bundles    = (*fake)(nil)
	_ Collector  = (*fake)(nil)
)

func newFake() *fake {
	return &fake{projects: map[string]*paddock.Project{}, runs: map[string]*paddock.Run{},
		events: map[string][]*paddock.Event{}, appended: make(chan struct{}), tokens: map[string]string{},
		secret: map[string]string{}, gone: map[string]bool{}}
}

// record notes a call and checks what the manager would check first: the
// call's expectation of the run's last seq.
func (f *fake) record(ctx context.Context, method string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	what := method
	for _, a := range args {
		what += " " + fmt.Sprint(a)
	}
	exp := paddock.ExpectedSeq(ctx)
	f.calls = append(f.calls, call{what: what, agent: paddock.AgentCall(ctx), expect: exp})
	if f.fail != nil {
		return f.fail
	}
	if exp != nil {
		if r := f.runs[exp.Run]; r != nil && r.LastSeq != exp.Seq {
			return paddock.Errorf(paddock.CodeConflict, "run %s moved on", exp.Run).WithDetail("last_seq", r.LastSeq)
		}
	}
	return nil
}

// asked returns what the service was asked since the last look.
func (f *fake) asked() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func (f *fake) whats() string {
	var out []string
	for _, c := range f.asked() {
		out = append(out, c.what)
	}
	return strings.Join(out, "; ")
}

func (f *fake) run(id string) (*paddock.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs[id]
	if r == nil {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no run %s", id)
	}
	cp := *r
	ws := *r.Workspace
	cp.Workspace = &ws
	return &cp, nil
}

// transition moves a run to state, with its event.
func (f *fake) transition(id string, to paddock.WorkspaceState, reason string) (*paddock.Run, error) {
	f.mu.Lock()
	r := f.runs[id]
	if r != nil {
		r.Workspace.State, r.Workspace.Reason = to, reason
		f.appendLocked(id, paddock.TransitionEvent)
	}
	f.mu.Unlock()
	return f.run(id)
}

func (f *fake) appendLocked(id, typ string) {
	r := f.runs[id]
	r.LastSeq++
	f.events[id] = append(f.events[id], &paddock.Event{Seq: r.LastSeq, RunID: id, Type: typ, Data: json.RawMessage(`{}`)})
	close(f.appended)
	f.appended = make(chan struct{})
}

func (f *fake) AddProject(ctx context.Context, req paddock.AddProjectRequest) (*paddock.Project, error) {
	if err := f.record(ctx, "AddProject", req.Path, req.Name); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p := &paddock.Project{Name: req.Name, Root: req.Path}
	f.projects[p.Name] = p
	return p, nil
}

func (f *fake) Projects(ctx context.Context) ([]*paddock.Project, error) {
	return nil, f.record(ctx, "Projects")
}

func (f *fake) Project(ctx context.Context, name string) (*paddock.Project, error) {
	if err := f.record(ctx, "Project", name); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.projects[name]; p != nil {
		return p, nil
	}
	return nil, paddock.Errorf(paddock.CodeNotFound, "no project %s", name)
}

func (f *fake) SetProject(ctx context.Context, name, by string, req paddock.SetProjectRequest) (*paddock.Project, error) {
	if err := f.record(ctx, "SetProject", name, by, req.Protect); err != nil {
		return nil, err
	}
	p := &paddock.Project{Name: name, Protected: req.Protect}
	if req.AllowAttribution != nil {
		p.AttributionAllow = *req.AllowAttribution
	}
	return p, nil
}

func (f *fake) RemoveProject(ctx context.Context, name string) error {
	return f.record(ctx, "RemoveProject", name)
}

func (f *fake) Unlock(ctx context.Context, name, by string, force bool) (*paddock.Lock, error) {
	if err := f.record(ctx, "Unlock", name, by, force); err != nil {
		return nil, err
	}
	return &paddock.Lock{Project: name, RunID: "r-held"}, nil
}

func (f *fake) Create(ctx context.Context, req paddock.CreateRunRequest) (*paddock.Run, error) {
	if err := f.record(ctx, "Create", req.Project, req.Secrets); err != nil {
		return nil, err
	}
	return f.newRun(req.Project, req.Secrets), nil
}

func (f *fake) newRun(project string, secrets []string) *paddock.Run {
	f.mu.Lock()
	f.n++
	id := fmt.Sprintf("r-%08d", f.n)
	f.runs[id] = &paddock.Run{ID: id, Project: project, Secrets: secrets,
		Workspace: &paddock.Workspace{RunID: id, State: paddock.StateReady}}
	for range 3 { // requested, preparing, ready
		f.appendLocked(id, paddock.TransitionEvent)
	}
	f.mu.Unlock()
	r, _ := f.run(id)
	return r
}

func (f *fake) Bootstrap(ctx context.Context, req paddock.BootstrapRequest) (*paddock.BootstrapResult, error) {
	if err := f.record(ctx, "Bootstrap", req.Project, req.Agent.Name, req.Task); err != nil {
		return nil, err
	}
	r := f.newRun(req.Project, nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	tok := "pdk_run_" + strings.Repeat("x", f.n)
	f.tokens[tok] = r.ID
	return &paddock.BootstrapResult{Run: r, Token: tok}, nil
}

func (f *fake) Runs(ctx context.Context, filter paddock.RunFilter) ([]*paddock.Run, error) {
	return nil, f.record(ctx, "Runs", filter.Project, filter.Removed)
}

func (f *fake) Run(ctx context.Context, id string) (*paddock.Run, error) {
	if err := f.record(ctx, "Run", id); err != nil {
		return nil, err
	}
	return f.run(id)
}

func (f *fake) StartFlow(ctx context.Context, req paddock.StartFlowRequest) (*paddock.Flow, error) {
	if err := f.record(ctx, "StartFlow", req.Workflow, req.Project, req.Task); err != nil {
		return nil, err
	}
	return &paddock.Flow{ID: "f-1", Project: req.Project, Task: req.Task}, nil
}

func (f *fake) Flows(ctx context.Context, project string) ([]*paddock.Flow, error) {
	return nil, f.record(ctx, "Flows", project)
}

func (f *fake) Flow(ctx context.Context, id string) (*paddock.Flow, error) {
	return &paddock.Flow{ID: id}, f.record(ctx, "Flow", id)
}

func (f *fake) PickEvent(ctx context.Context, id, event string, req paddock.MenuEventRequest) (*paddock.Flow, error) {
	if err := f.record(ctx, "PickEvent", id, event, req.Head); err != nil {
		return nil, err
	}
	return &paddock.Flow{ID: "f-1"}, nil
}

func (f *fake) Review(ctx context.Context, id, agent string) (*paddock.Run, error) {
	if err := f.record(ctx, "Review", id, agent); err != nil {
		return nil, err
	}
	return f.run(id)
}

func (f *fake) Fork(ctx context.Context, id string, req paddock.ForkRequest) (*paddock.ForkResult, error) {
	if err := f.record(ctx, "Fork", id, req.Count); err != nil {
		return nil, err
	}
	r, err := f.run(id)
	if err != nil {
		return nil, err
	}
	return &paddock.ForkResult{Run: r, Layer: "l-1", Runs: []*paddock.Run{r}}, nil
}

func (f *fake) Retain(ctx context.Context, id string) (*paddock.Run, error) {
	if err := f.record(ctx, "Retain", id); err != nil {
		return nil, err
	}
	return f.transition(id, paddock.StateRetained, "")
}

func (f *fake) Reject(ctx context.Context, id string) (*paddock.Run, error) {
	if err := f.record(ctx, "Reject", id); err != nil {
		return nil, err
	}
	return f.transition(id, paddock.StateRejected, "")
}

func (f *fake) Remove(ctx context.Context, id string) (*paddock.Run, error) {
	if err := f.record(ctx, "Remove", id); err != nil {
		return nil, err
	}
	return f.run(id)
}

func (f *fake) Checkpoint(ctx context.Context, id, reason string) (*paddock.Run, error) {
	if err := f.record(ctx, "Checkpoint", id, reason); err != nil {
		return nil, err
	}
	return f.transition(id, paddock.StateCheckpointed, reason)
}

func (f *fake) Resume(ctx context.Context, id string) (*paddock.ResumeResult, error) {
	if err := f.record(ctx, "Resume", id); err != nil {
		return nil, err
	}
	r, err := f.run(id)
	return &paddock.ResumeResult{Run: r}, err
}

func (f *fake) Artifact(ctx context.Context, id, kind string) (*paddock.Artifact, error) {
	if err := f.record(ctx, "Artifact", id, kind); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.tokens {
		if r == id {
			return &paddock.Artifact{Kind: kind, Content: "the task"}, nil
		}
	}
	return nil, paddock.Errorf(paddock.CodeNotBootstrapped, "run %s was not bootstrapped", id)
}

func (f *fake) Events(ctx context.Context, id string, after int64, limit int) ([]*paddock.Event, error) {
	if err := f.record(ctx, "Events", id, after, limit); err != nil {
		return nil, err
	}
	evs, _, err := f.eventsAfter(id, after, limit)
	return evs, err
}

func (f *fake) eventsAfter(id string, after int64, limit int) ([]*paddock.Event, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.runs[id] == nil {
		return nil, nil, paddock.Errorf(paddock.CodeNotFound, "no run %s", id)
	}
	var out []*paddock.Event
	for _, e := range f.events[id] {
		if e.Seq > after && (limit == 0 || len(out) < limit) {
			out = append(out, e)
		}
	}
	return out, f.appended, nil
}

func (f *fake) WaitEvents(ctx context.Context, id string, after int64, limit int) ([]*paddock.Event, error) {
	if err := f.record(ctx, "WaitEvents", id, after, limit); err != nil {
		return nil, err
	}
	for {
		evs, ch, err := f.eventsAfter(id, after, limit)
		if err != nil || len(evs) > 0 {
			return evs, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return evs, nil
		}
	}
}

func (f *fake) Exec(ctx context.Context, id string, req paddock.ExecRequest) (*paddock.ExecResult, error) {
	if err := f.record(ctx, "Exec", id, req.Argv, req.Net); err != nil {
		return nil, err
	}
	return &paddock.ExecResult{Stdout: "out"}, nil
}

func (f *fake) ExecStream(ctx context.Context, id string, req paddock.ExecRequest, stdout, stderr io.Writer) (*paddock.ExecResult, error) {
	if err := f.record(ctx, "ExecStream", id, req.Argv, req.Net); err != nil {
		return nil, err
	}
	io.WriteString(stdout, "out")
	io.WriteString(stderr, "err")
	return &paddock.ExecResult{Stdout: "out", Stderr: "err"}, nil
}

// ExecAttach echoes: each terminal size it is told, then everything its
// stdin brings, until its end; its exit code is the bytes it read.
func (f *fake) ExecAttach(ctx context.Context, id string, req paddock.ExecRequest, streams paddock.ExecIO) (*paddock.ExecResult, error) {
	term := "none"
	if req.Terminal != nil {
		term = fmt.Sprintf("%dx%d", req.Terminal.Rows, req.Terminal.Cols)
	}
	if err := f.record(ctx, "ExecAttach", id, req.Argv, req.Net, term); err != nil {
		return nil, err
	}
	if req.Argv[0] == "noread" { // a command busy elsewhere: it reads nothing
		<-ctx.Done()
		f.mu.Lock()
		f.gone[id] = true
		f.mu.Unlock()
		return nil, paddock.Errorf(paddock.CodeConflict, "the client went away")
	}
	got := make(chan []byte)
	go func() {
		defer close(got)
		buf := make([]byte, 4096)
		for {
			n, err := streams.Stdin.Read(buf)
			if n > 0 {
				got <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	read := 0
	resize := streams.Resize
	for {
		select {
		case <-ctx.Done():
			f.mu.Lock()
			f.gone[id] = true
			f.mu.Unlock()
			return nil, paddock.Errorf(paddock.CodeConflict, "the client went away")
		case sz, ok := <-resize:
			if !ok {
				resize = nil
				continue
			}
			fmt.Fprintf(streams.Stdout, "[size %dx%d]", sz.Rows, sz.Cols)
		case b, ok := <-got:
			if !ok && ctx.Err() != nil { // the client went: both are ready
				f.mu.Lock()
				f.gone[id] = true
				f.mu.Unlock()
				return nil, paddock.Errorf(paddock.CodeConflict, "the client went away")
			}
			if !ok {
				io.WriteString(streams.Stderr, "[eof]")
				return &paddock.ExecResult{ExitCode: read, Stdout: "not streamed again"}, nil
			}
			read += len(b)
			streams.Stdout.Write(b)
		}
	}
}

func (f *fake) wentAway(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gone[id]
}

func (f *fake) StartJob(ctx context.Context, id string, req paddock.StartJobRequest) (*paddock.Job, error) {
	return &paddock.Job{ID: "j-1", RunID: id}, f.record(ctx, "StartJob", id, req.Kind)
}

func (f *fake) Jobs(ctx context.Context, id string) ([]*paddock.Job, error) {
	return []*paddock.Job{}, f.record(ctx, "Jobs", id)
}

func (f *fake) JobStatus(ctx context.Context, id string) (*paddock.JobStatus, error) {
	return &paddock.JobStatus{State: paddock.JobIdle}, f.record(ctx, "JobStatus", id)
}

func (f *fake) Job(ctx context.Context, id, job string) (*paddock.Job, error) {
	return &paddock.Job{ID: job, RunID: id}, f.record(ctx, "Job", id, job)
}

func (f *fake) CancelJob(ctx context.Context, id, job string) (*paddock.Job, error) {
	return &paddock.Job{ID: job, RunID: id}, f.record(ctx, "CancelJob", id, job)
}

func (f *fake) ChangeSet(ctx context.Context, id string) (*paddock.ChangeSet, error) {
	return &paddock.ChangeSet{Hash: "h1"}, f.record(ctx, "ChangeSet", id)
}

func (f *fake) ChangeSetDiff(ctx context.Context, id, hash string) (io.ReadCloser, string, error) {
	if err := f.record(ctx, "ChangeSetDiff", id, hash); err != nil {
		return nil, "", err
	}
	diff := "+line\n"
	if v, ok := f.secret[id]; ok {
		_, value, _ := strings.Cut(v, "=")
		diff = "+token " + value + "\n"
	}
	return io.NopCloser(strings.NewReader(diff)), "h1", nil
}

func (f *fake) Submit(ctx context.Context, id string) (*paddock.ChangeSet, error) {
	return &paddock.ChangeSet{Hash: "h1"}, f.record(ctx, "Submit", id)
}

func (f *fake) SubmitExpecting(ctx context.Context, id, expect string) (*paddock.ChangeSet, error) {
	return &paddock.ChangeSet{Hash: "h1"}, f.record(ctx, "SubmitExpecting", id, expect)
}

func (f *fake) Approve(ctx context.Context, id, hash, by string) (*paddock.Submission, error) {
	return &paddock.Submission{}, f.record(ctx, "Approve", id, hash, by)
}

func (f *fake) Apply(ctx context.Context, id, branch string, who gitx.Identity) (*paddock.Submission, error) {
	return &paddock.Submission{}, f.record(ctx, "Apply", id, branch, who.Name, who.Email)
}

func (f *fake) ApplyToWorktree(ctx context.Context, id string, threeWay bool) (*paddock.Submission, error) {
	return &paddock.Submission{}, f.record(ctx, "ApplyToWorktree", id, threeWay)
}

func (f *fake) Undo(ctx context.Context, id string) (*paddock.Submission, error) {
	return &paddock.Submission{}, f.record(ctx, "Undo", id)
}

func (f *fake) Tools(ctx context.Context, id string) ([]*tools.Tool, error) {
	return nil, f.record(ctx, "Tools", id)
}

func (f *fake) CallTool(ctx context.Context, id, name string, args json.RawMessage) (any, error) {
	if err := f.record(ctx, "CallTool", id, name, string(args)); err != nil {
		return nil, err
	}
	return map[string]string{"tool": name}, nil
}

func (f *fake) Deliver(ctx context.Context, id, name string, body io.Reader, lim tools.InboxLimits) (*paddock.InboxResult, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, paddock.Errorf(paddock.CodeTooLarge, "inbox: %v", err)
	}
	return &paddock.InboxResult{}, f.record(ctx, "Deliver", id, name, string(b), lim.MaxFile)
}

func (f *fake) GC(ctx context.Context, dryRun bool) ([]paddock.Finding, error) {
	return nil, f.record(ctx, "GC", dryRun)
}

func (f *fake) Redactor(ctx context.Context, id string) (*redact.Redactor, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.runs[id] == nil {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no run %s", id)
	}
	secrets := map[string]string{}
	if v, ok := f.secret[id]; ok {
		name, value, _ := strings.Cut(v, "=")
		secrets[name] = value
	}
	return redact.New(secrets), nil
}

func (f *fake) RunForToken(ctx context.Context, token string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.tokens[token]; ok {
		return id, nil
	}
	return "", paddock.Errorf(paddock.CodeNotFound, "unknown token")
}

func (f *fake) AddAgent(ctx context.Context, req paddock.AddAgentRequest) (*paddock.AgentRecord, error) {
	return &paddock.AgentRecord{Definition: paddock.AgentDefinition{Name: req.File}}, f.record(ctx, "AddAgent", req.File)
}

func (f *fake) Agents(ctx context.Context) ([]*paddock.AgentRecord, error) {
	return nil, f.record(ctx, "Agents")
}

func (f *fake) Agent(ctx context.Context, name string) (*paddock.AgentRecord, error) {
	return &paddock.AgentRecord{Definition: paddock.AgentDefinition{Name: name}}, f.record(ctx, "Agent", name)
}

func (f *fake) RemoveAgent(ctx context.Context, name string) error {
	return f.record(ctx, "RemoveAgent", name)
}

func (f *fake) Capabilities(ctx context.Context, id string) (*paddock.Capabilities, error) {
	return &paddock.Capabilities{Run: id}, f.record(ctx, "Capabilities", id)
}

func (f *fake) RequestAccess(ctx context.Context, id string, in paddock.AccessRequestInput) (*paddock.AccessRequest, error) {
	return &paddock.AccessRequest{ID: "q-1", RunID: id, Kind: in.Kind, State: paddock.RequestPending}, f.record(ctx, "RequestAccess", id, in.Kind)
}

func (f *fake) AccessRequests(ctx context.Context, id string) ([]*paddock.AccessRequest, error) {
	return nil, f.record(ctx, "AccessRequests", id)
}

func (f *fake) DecideAccess(ctx context.Context, id, reqID string, grant bool, by, note string) (*paddock.AccessRequest, error) {
	return &paddock.AccessRequest{ID: reqID, RunID: id}, f.record(ctx, "DecideAccess", id, reqID, grant, by)
}

func (f *fake) Verify(ctx context.Context, id string, req paddock.VerifyRequest) (*paddock.VerifyResult, error) {
	return &paddock.VerifyResult{Checks: []paddock.CheckResult{}}, f.record(ctx, "Verify", id, req.Checks)
}

func (f *fake) ProjectManifest(ctx context.Context, name string) (json.RawMessage, error) {
	return json.RawMessage(`{"checks":[]}`), f.record(ctx, "ProjectManifest", name)
}

func (f *fake) ProjectCheckout(ctx context.Context, name string) (*paddock.CheckoutStatus, error) {
	return &paddock.CheckoutStatus{Root: "/src/" + name}, f.record(ctx, "ProjectCheckout", name)
}

func (f *fake) Bundle(ctx context.Context, id string, w io.Writer) error {
	if err := f.record(ctx, "Bundle", id); err != nil {
		return err
	}
	_, err := io.WriteString(w, "a bundle of "+id)
	return err
}

func (f *fake) BundleKey(ctx context.Context) (*paddock.BundleKey, error) {
	return &paddock.BundleKey{PublicKey: "ed25519 AAAA", KeyID: "k"}, f.record(ctx, "BundleKey")
}

func (f *fake) Import(ctx context.Context, req paddock.ImportRequest, body io.Reader) (*paddock.ImportResult, error) {
	b, _ := io.ReadAll(body)
	if err := f.record(ctx, "Import", req.Project, req.Kind, req.Trust, req.Untrusted, string(b)); err != nil {
		return nil, err
	}
	return &paddock.ImportResult{FromRun: "r-x", Hash: "h"}, nil
}

func (f *fake) QueueAdd(ctx context.Context, id string, req paddock.QueueAddRequest, by string) (*paddock.QueueEntry, error) {
	return &paddock.QueueEntry{Run: id, Branch: req.Branch, State: paddock.QueueQueued}, f.record(ctx, "QueueAdd", id, req.Branch, req.Accept, by)
}

func (f *fake) Queue(ctx context.Context, project string, all bool) ([]*paddock.QueueEntry, error) {
	return []*paddock.QueueEntry{}, f.record(ctx, "Queue", project, all)
}

func (f *fake) QueueEntry(ctx context.Context, id string) (*paddock.QueueEntry, error) {
	return &paddock.QueueEntry{Run: id}, f.record(ctx, "QueueEntry", id)
}

func (f *fake) QueueRemove(ctx context.Context, id, by string) (*paddock.QueueEntry, error) {
	return &paddock.QueueEntry{Run: id}, f.record(ctx, "QueueRemove", id, by)
}

func (f *fake) QueueUndo(ctx context.Context, id, by string) (*paddock.QueueEntry, error) {
	return &paddock.QueueEntry{Run: id}, f.record(ctx, "QueueUndo", id, by)
}

func (f *fake) ApproveHunks(ctx context.Context, id, hash string, hunks []int, by string) (*paddock.Submission, error) {
	return &paddock.Submission{RunID: id, Hash: "part", PartOf: hash, Hunks: hunks}, f.record(ctx, "ApproveHunks", id, hash, hunks, by)
}

func (f *fake) Blame(ctx context.Context, id, hash string) (*paddock.Blame, error) {
	return &paddock.Blame{Run: id, Hash: hash, Hunks: []paddock.HunkBlame{}}, f.record(ctx, "Blame", id, hash)
}
