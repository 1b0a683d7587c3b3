package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// fakeCalls keeps keys in memory, as lifecycle.Calls keeps them in the
// store (storetest's CallKeys holds the store's part).
type fakeCalls struct {
	mu   sync.Mutex
	recs map[string]*paddock.CallRecord
}

func (c *fakeCalls) Begin(_ context.Context, key, request string) (*paddock.CallRecord, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.recs[key]; r != nil {
		cp := *r
		return &cp, nil
	}
	c.recs[key] = &paddock.CallRecord{Key: key, Request: request, Owner: "me"}
	return nil, nil
}

func (c *fakeCalls) Finish(_ context.Context, key string, status int, answer []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.recs[key]
	r.Done, r.Status, r.Answer = true, status, append([]byte(nil), answer...)
}

func (c *fakeCalls) Forget(_ context.Context, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.recs, key)
}

func (c *fakeCalls) Lookup(_ context.Context, key string) (*paddock.CallRecord, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.recs[key]; r != nil {
		cp := *r
		return &cp, nil
	}
	return nil, nil
}

func (c *fakeCalls) Abandon(string) {}

func (c *fakeCalls) Running(rec *paddock.CallRecord) bool { return false }
func (c *fakeCalls) Mine(rec *paddock.CallRecord) bool    { return rec.Owner == "me" }
func (c *fakeCalls) Wait(context.Context, *paddock.CallRecord, time.Duration) bool {
	return false
}

// keyedDo makes a call with key on h and returns the recorder.
func keyedDo(h http.Handler, ctx context.Context, method, path, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://paddock"+path, strings.NewReader(body)).WithContext(ctx)
	if key != "" {
		req.Header.Set(paddock.IdempotencyHeader, key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestKeyedCalls: a keyed write reaches its service once and is answered
// again from its record (marked replayed); a key on another call is
// refused before any service is asked; a call whose error says it did
// nothing gives its key back and is made when asked again; one whose
// caller has gone is made to its end, its answer kept; an answer too
// large to keep, or holding a secret shown once, is not given again but
// said to be done; a streamed call takes no key; a read ignores one.
func TestKeyedCalls(t *testing.T) {
	f := newFixture(t)
	calls := &fakeCalls{recs: map[string]*paddock.CallRecord{}}
	f.srv.Calls = calls
	h := f.srv.Handler()
	ctx := context.Background()
	add := `{"path":"/src/app","name":"app"}`

	first := keyedDo(h, ctx, "POST", "/v1/projects", "k1", add)
	again := keyedDo(h, ctx, "POST", "/v1/projects", "k1", add)
	if first.Code != 201 || again.Code != 201 || again.Body.String() != first.Body.String() ||
		again.Header().Get(paddock.ReplayedHeader) != "true" || first.Header().Get(paddock.ReplayedHeader) != "" {
		t.Fatalf("made again: %d %q / %d %q %v", first.Code, first.Body, again.Code, again.Body, again.Header())
	}
	if w := f.svc.whats(); w != "AddProject /src/app app" {
		t.Fatalf("the service was asked %q", w)
	}
	if other := keyedDo(h, ctx, "POST", "/v1/projects", "k1", `{"path":"/src/other","name":"other"}`); other.Code != 409 || f.svc.whats() != "" {
		t.Fatalf("the key on another call: %d %q, asked %q", other.Code, other.Body, f.svc.whats())
	}

	// Did nothing (done: false): the key is given back.
	f.svc.fail = paddock.MarkUndone(paddock.Errorf(paddock.CodeBusy, "not now"))
	if a := keyedDo(h, ctx, "POST", "/v1/projects", "k2", add); a.Code != http.StatusLocked {
		t.Fatalf("an undone call: %d %q", a.Code, a.Body)
	}
	f.svc.fail = nil
	if a := keyedDo(h, ctx, "POST", "/v1/projects", "k2", add); a.Code != 201 || a.Header().Get(paddock.ReplayedHeader) != "" {
		t.Fatalf("an undone call made again: %d %q", a.Code, a.Body)
	}

	// A keyed call is made to its end though its caller has gone: the
	// service sees a context that is not cancelled, and its answer is kept.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if a := keyedDo(h, gone, "POST", "/v1/projects", "k3", add); a.Code != 201 {
		t.Fatalf("a call whose caller had gone: %d %q", a.Code, a.Body)
	}
	if a := keyedDo(h, ctx, "POST", "/v1/projects", "k3", add); a.Code != 201 || a.Header().Get(paddock.ReplayedHeader) != "true" {
		t.Fatalf("a call whose caller had gone, made again: %d %q", a.Code, a.Body)
	}
	// An error with its caller there is kept, as any answer.
	f.svc.fail = paddock.Errorf(paddock.CodeConflict, "taken")
	keyedDo(h, ctx, "POST", "/v1/projects", "k4", add)
	f.svc.fail = nil
	if a := keyedDo(h, ctx, "POST", "/v1/projects", "k4", add); a.Code != 409 || a.Header().Get(paddock.ReplayedHeader) != "true" {
		t.Fatalf("a refused call made again: %d %q", a.Code, a.Body)
	}

	// Too large to keep: done, and said so.
	defer func(n int) { maxKeptAnswer = n }(maxKeptAnswer)
	maxKeptAnswer = 8
	keyedDo(h, ctx, "POST", "/v1/projects", "k5", add)
	f.svc.asked()
	if a := keyedDo(h, ctx, "POST", "/v1/projects", "k5", add); a.Code != 409 || !strings.Contains(a.Body.String(), "too large") || f.svc.whats() != "" {
		t.Fatalf("a call whose answer was too large, made again: %d %q", a.Code, a.Body)
	}

	// An answer that holds a secret shown once is never kept.
	maxKeptAnswer = 256 << 10
	if a := keyedDo(h, ctx, "POST", "/v1/ui/login", "k7", `{}`); a.Code != 201 {
		t.Fatalf("a login: %d %q", a.Code, a.Body)
	}
	if a := keyedDo(h, ctx, "POST", "/v1/ui/login", "k7", `{}`); a.Code != 409 || !strings.Contains(a.Body.String(), "secret") {
		t.Fatalf("a login made again: %d %q", a.Code, a.Body)
	}
	calls.mu.Lock()
	for k, r := range calls.recs {
		if len(r.Answer) > 0 && (strings.Contains(string(r.Answer), "login") || strings.Contains(string(r.Answer), "pdk_")) {
			t.Errorf("key %s kept a secret: %q", k, r.Answer)
		}
	}
	calls.mu.Unlock()
	// A caller's kept answers are bounded in all: past the bound, its
	// answers are not kept.
	defer func(n int) { keptPerCaller = n }(keptPerCaller)
	keptPerCaller = 0
	f.srv.kept = keptBudget{}
	keyedDo(h, ctx, "POST", "/v1/projects", "k8", add)
	if a := keyedDo(h, ctx, "POST", "/v1/projects", "k8", add); a.Code != 409 || !strings.Contains(a.Body.String(), "not kept") {
		t.Fatalf("an answer past its caller's bound, asked again: %d %q", a.Code, a.Body)
	}
	keptPerCaller = 1 << 20
	if a := keyedDo(h, ctx, "POST", "/v1/runs/r-1/exec/stream", "k6", `{"argv":["true"]}`); a.Code != 400 || !strings.Contains(a.Body.String(), "streams") {
		t.Fatalf("a streamed call with a key: %d %q", a.Code, a.Body)
	}
	if a := keyedDo(h, ctx, "POST", "/v1/projects", strings.Repeat("k", paddock.MaxIdempotencyKey+1), add); a.Code != 400 {
		t.Fatalf("a key too long: %d %q", a.Code, a.Body)
	}
	if a := keyedDo(h, ctx, "GET", "/v1/projects", "k1", ""); a.Code != 200 || a.Header().Get(paddock.ReplayedHeader) != "" {
		t.Fatalf("a read with a write's key: %d %q", a.Code, a.Body)
	}
}

// TestKeyReadOnceAdmitted: a keyed call from a caller its route does not
// admit is refused as it would be without a key, and nothing of it is
// claimed or kept (its body is not read whole for the key); an admitted
// caller's key is claimed.
func TestKeyReadOnceAdmitted(t *testing.T) {
	f := newFixture(t)
	calls := &fakeCalls{recs: map[string]*paddock.CallRecord{}}
	f.srv.Calls = calls
	tcp := f.srv.TCPHandler()
	add := `{"path":"/src/app","name":"app"}`
	a := doTCP(tcp, "POST", "/v1/projects", add, "Authorization", "Bearer "+fakeToken("viewer"), paddock.IdempotencyHeader, "k-viewer")
	if a.status != 403 || a.Error == nil || a.Error.Rule != "role" {
		t.Fatalf("a viewer's keyed call: %d %+v", a.status, a.Error)
	}
	calls.mu.Lock()
	n := len(calls.recs)
	calls.mu.Unlock()
	if n != 0 || f.svc.whats() != "" {
		t.Fatalf("a refused caller's key: %d claimed, the service asked %q", n, f.svc.whats())
	}
	if a := doTCP(tcp, "POST", "/v1/projects", add, "Authorization", "Bearer "+fakeToken("admin"), paddock.IdempotencyHeader, "k-admin"); a.status != 201 {
		t.Fatalf("an admin's keyed call: %d %+v", a.status, a.Error)
	}
	calls.mu.Lock()
	n = len(calls.recs)
	calls.mu.Unlock()
	if n != 1 {
		t.Fatalf("an admitted caller's key: %d claimed, want 1", n)
	}
}

// TestKeyedAdmissionDecidedOnce: a keyed call's admission is decided once,
// before its key is read: a scoped principal's keyed call reads its run for
// the decision no more often than the same call without a key (two looks
// could disagree, and a call admitted by the second after a refusal by the
// first would be made without its key).
func TestKeyedAdmissionDecidedOnce(t *testing.T) {
	f := newFixture(t)
	f.srv.Calls = &fakeCalls{recs: map[string]*paddock.CallRecord{}}
	tcp := f.srv.TCPHandler()
	b, _ := fakeJobs{f.svc}.Bootstrap(context.Background(), paddock.BootstrapRequest{Project: "app"})
	reads := func(key string) int {
		f.svc.asked()
		hdr := []string{"Authorization", "Bearer " + fakeToken("admin@app")}
		if key != "" {
			hdr = append(hdr, paddock.IdempotencyHeader, key)
		}
		if a := doTCP(tcp, "POST", "/v1/runs/"+b.Run.ID+"/retain", "", hdr...); a.status != 200 {
			t.Fatalf("retain (key %q): %d %+v", key, a.status, a.Error)
		}
		n := 0
		for _, c := range f.svc.asked() {
			if c.what == "Run "+b.Run.ID {
				n++
			}
		}
		return n
	}
	if plain, keyed := reads(""), reads("k-once"); keyed != plain {
		t.Fatalf("the run read %d times for a keyed call, %d without a key", keyed, plain)
	}
}

// slowCalls is fakeCalls whose Begin waits for a token on release, and
// then fails with err if it is set.
type slowCalls struct {
	*fakeCalls
	release chan struct{}
	err     error
}

func (c *slowCalls) Begin(ctx context.Context, key, request string) (*paddock.CallRecord, error) {
	<-c.release
	if c.err != nil {
		return nil, c.err
	}
	return c.fakeCalls.Begin(ctx, key, request)
}

// TestKeyClaimedBesideExec: an exec's key is claimed while the broker
// reads the run (a gated route), and nothing of the call is done before
// the claim is made: the call is made once it is; made again with its
// key, the call reaches the gate, is stopped there and answered with the
// first answer; a claim that fails, or a key another call holds, leaves
// the command unrun and is answered as before, even when the call's own
// handler had answered first (its answer is dropped).
func TestKeyClaimedBesideExec(t *testing.T) {
	f := newFixture(t)
	r := f.svc.newRun("app", nil)
	calls := &slowCalls{fakeCalls: &fakeCalls{recs: map[string]*paddock.CallRecord{}}, release: make(chan struct{})}
	f.srv.Calls = calls
	h := f.srv.Handler()
	ctx := context.Background()
	path := "/v1/runs/" + r.ID + "/exec"
	reached := make(chan struct{}, 1)
	f.svc.beforeGate = func() { reached <- struct{}{} }
	// exec makes the call with key and body, lets its claim be made once
	// the broker has reached its gate (when wait), and returns its answer.
	exec := func(key, body string, wait bool) *httptest.ResponseRecorder {
		got := make(chan *httptest.ResponseRecorder)
		go func() { got <- keyedDo(h, ctx, "POST", path, key, body) }()
		if wait {
			select {
			case <-reached:
			case <-time.After(10 * time.Second):
				t.Fatal("the call did not reach the broker before its key was claimed")
			}
			if w := f.svc.whats(); w != "" {
				t.Fatalf("before its key was claimed the call did %q", w)
			}
		}
		calls.release <- struct{}{}
		a := <-got
		if n := a.Header().Get("Content-Length"); n != "" && n != strconv.Itoa(a.Body.Len()) {
			t.Fatalf("an answer of %d bytes says it has %s: %q", a.Body.Len(), n, a.Body)
		}
		return a
	}

	first := exec("k1", `{"argv":["true"]}`, true)
	if first.Code != 200 || !strings.Contains(first.Body.String(), `"out"`) || !strings.Contains(f.svc.whats(), "Exec "+r.ID) {
		t.Fatalf("the first call: %d %q, did %q", first.Code, first.Body, f.svc.whats())
	}
	again := exec("k1", `{"argv":["true"]}`, true)
	if again.Code != 200 || again.Body.String() != first.Body.String() || again.Header().Get(paddock.ReplayedHeader) != "true" {
		t.Fatalf("made again: %d %q %v", again.Code, again.Body, again.Header())
	}
	if w := f.svc.whats(); w != "" {
		t.Fatalf("made again, the call did %q", w)
	}
	// The key on another body: refused as another call's, though the
	// handler refused the body first (that answer is dropped).
	if other := exec("k1", `{"argv":`, false); other.Code != 409 || !strings.Contains(other.Body.String(), "another call") {
		t.Fatalf("the key on another call: %d %q", other.Code, other.Body)
	}
	// A claim that fails: nothing done, and said so (the call may be
	// made again).
	calls.err = errors.New("the store is away")
	failed := exec("k2", `{"argv":["true"]}`, true)
	if failed.Code < 500 || !strings.Contains(failed.Body.String(), `"done":false`) {
		t.Fatalf("a claim that failed: %d %q", failed.Code, failed.Body)
	}
	if w := f.svc.whats(); w != "" {
		t.Fatalf("with its claim failed, the call did %q", w)
	}
	calls.err = nil
	if a := exec("k2", `{"argv":["true"]}`, true); a.Code != 200 || a.Header().Get(paddock.ReplayedHeader) != "" || !strings.Contains(f.svc.whats(), "Exec") {
		t.Fatalf("made again once the store is back: %d %q", a.Code, a.Body)
	}
	// A route that is not gated claims its key before its call.
	f.svc.beforeGate = nil
	got := make(chan *httptest.ResponseRecorder)
	go func() { got <- keyedDo(h, ctx, "POST", "/v1/projects", "k3", `{"path":"/src/app","name":"app2"}`) }()
	time.Sleep(50 * time.Millisecond)
	if w := f.svc.whats(); w != "" {
		t.Fatalf("a route that is not gated did %q before its key was claimed", w)
	}
	calls.release <- struct{}{}
	if a := <-got; a.Code != 201 {
		t.Fatalf("a project added: %d %q", a.Code, a.Body)
	}
}

// endedCalls is fakeCalls whose Begin finds the key's call running here,
// though it has ended by the time the retry is answered: its record,
// looked up again, is done.
type endedCalls struct{ *fakeCalls }

func (c endedCalls) Begin(_ context.Context, key, request string) (*paddock.CallRecord, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs[key] = &paddock.CallRecord{Key: key, Request: request, Owner: "me", Done: true, Status: 200, Answer: []byte(`{"ok":true,"data":"first"}` + "\n")}
	return &paddock.CallRecord{Key: key, Request: request, Owner: "me"}, nil
}

// TestKeyedRetryOfACallEndedMeanwhile: a retry that found its key's call
// running here, and is answered once that call has ended (a gated call
// waits at the broker before its answer), gives the first call's answer,
// read again, not that it was lost.
func TestKeyedRetryOfACallEndedMeanwhile(t *testing.T) {
	f := newFixture(t)
	r := f.svc.newRun("app", nil)
	f.srv.Calls = endedCalls{&fakeCalls{recs: map[string]*paddock.CallRecord{}}}
	h := f.srv.Handler()
	a := keyedDo(h, context.Background(), "POST", "/v1/runs/"+r.ID+"/exec", "k1", `{"argv":["true"]}`)
	if a.Code != 200 || a.Header().Get(paddock.ReplayedHeader) != "true" || !strings.Contains(a.Body.String(), "first") {
		t.Fatalf("a retry of a call that ended meanwhile: %d %q", a.Code, a.Body)
	}
	if w := f.svc.whats(); w != "" {
		t.Fatalf("the retry did %q", w)
	}
}
