package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock"
)

// The API's tests serve fakes of its services, one per interface
// (fake_*_test.go), over one fakeState: projects, runs and their events in
// memory, and a record of every call to any of them, so a test sees
// exactly what a request asked of the services, in order (or that it
// asked nothing). A test of one concern builds only that concern's fake
// (newFixtureOf); the others are left out of its server.

// fakeState is what the fakes share. Like every service of the Manager,
// it answers Run and Project (the kernel), so each fake that needs them
// has them.
type fakeState struct {
	mu       sync.Mutex
	calls    []call
	fail     error // when set, every call returns it
	projects map[string]*paddock.Project
	runs     map[string]*paddock.Run
	events   map[string][]*paddock.Event
	notices  []*paddock.Notice // the firehose's, across runs
	appended chan struct{}     // closed and replaced at each append
	tokens   map[string]string
	secret   map[string]string // a run's declared secret: name=value
	gone     map[string]bool   // runs whose attached exec saw its client go
	revoked  map[string]bool   // principals whose credential the test revoked
	// afterExec, if set, is left by Exec and ExecStream for after their
	// answer (paddock.AfterAnswer), as the broker leaves its look at what
	// a command changed.
	afterExec func()
	// beforeGate, if set, is called by Exec before it waits for its
	// key's claim (paddock.AwaitClaim), where the broker reads the run.
	beforeGate func()
	n          int
}

// call is one call to a service, as the test reads it.
type call struct {
	what   string // the method and its arguments
	agent  bool   // made for the run's agent (paddock.WithAgent)
	expect *paddock.Expectation
}

func newFakeState() *fakeState {
	return &fakeState{projects: map[string]*paddock.Project{}, runs: map[string]*paddock.Run{},
		events: map[string][]*paddock.Event{}, appended: make(chan struct{}), tokens: map[string]string{},
		secret: map[string]string{}, gone: map[string]bool{}, revoked: map[string]bool{}}
}

// serveAll gives s every service, each a fake over st.
func serveAll(s *Server, st *fakeState) {
	s.Projects, s.Runs, s.Jobs, s.Broker = fakeProjects{st}, fakeRuns{st}, fakeJobs{st}, fakeBroker{st}
	s.Changes, s.Provenance, s.Verifier = fakeChanges{st}, fakeProvenance{st}, fakeVerifier{st}
	s.Reviews, s.Forks, s.Flows = fakeReviews{st}, fakeForks{st}, fakeFlows{st}
	s.Queue, s.Bundles, s.Collector = fakeQueue{st}, fakeBundles{st}, fakeCollector{st}
	s.Notices, s.Principals = fakeNotices{st}, fakePrincipals{st}
}

// record notes a call and checks what the manager would check first: the
// call's expectation of the run's last seq.
func (f *fakeState) record(ctx context.Context, method string, args ...any) error {
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
func (f *fakeState) asked() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func (f *fakeState) whats() string {
	var out []string
	for _, c := range f.asked() {
		out = append(out, c.what)
	}
	return strings.Join(out, "; ")
}

func (f *fakeState) run(id string) (*paddock.Run, error) {
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
func (f *fakeState) transition(id string, to paddock.WorkspaceState, reason string) (*paddock.Run, error) {
	f.mu.Lock()
	r := f.runs[id]
	if r != nil {
		r.Workspace.State, r.Workspace.Reason = to, reason
		f.appendLocked(id, paddock.TransitionEvent)
	}
	f.mu.Unlock()
	return f.run(id)
}

func (f *fakeState) appendLocked(id, typ string) {
	r := f.runs[id]
	r.LastSeq++
	f.events[id] = append(f.events[id], &paddock.Event{Seq: r.LastSeq, RunID: id, Type: typ, Data: json.RawMessage(`{}`)})
	close(f.appended)
	f.appended = make(chan struct{})
}

func (f *fakeState) newRun(project string, secrets []string) *paddock.Run {
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

func (f *fakeState) eventsAfter(id string, after int64, limit int) ([]*paddock.Event, <-chan struct{}, error) {
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

func (f *fakeState) wentAway(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gone[id]
}

// Run and Project are the kernel every service answers.

func (f *fakeState) Run(ctx context.Context, id string) (*paddock.Run, error) {
	if err := f.record(ctx, "Run", id); err != nil {
		return nil, err
	}
	return f.run(id)
}

func (f *fakeState) Project(ctx context.Context, name string) (*paddock.Project, error) {
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
