package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/paddock-dev/paddock"
)

// fakeCluster says where runs are: on this node unless where says
// otherwise; it records Nodes and Adopt as calls of svc.
type fakeCluster struct {
	svc   *fakeState
	self  paddock.Node
	mu    sync.Mutex
	where map[string]paddock.Node
	place paddock.Node
	// placed and released count Place's places and those given back.
	placed, released int
	fail             error // Locate's and Place's error, if set
}

func (c *fakeCluster) Self() paddock.Node { return c.self }
func (c *fakeCluster) Locate(ctx context.Context, id string) (paddock.Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return paddock.Node{}, c.fail
	}
	if n, ok := c.where[id]; ok {
		return n, nil
	}
	return c.self, nil
}
func (c *fakeCluster) Place(ctx context.Context, project string) (paddock.Node, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return paddock.Node{}, nil, c.fail
	}
	c.placed++
	release := func() {
		c.mu.Lock()
		c.released++
		c.mu.Unlock()
	}
	if c.place.ID == "" {
		return c.self, release, nil
	}
	return c.place, release, nil
}
func (c *fakeCluster) Nodes(ctx context.Context) ([]paddock.Node, error) {
	return []paddock.Node{c.self}, c.svc.record(ctx, "Nodes")
}
func (c *fakeCluster) Adopt(ctx context.Context, id, by string) (*paddock.AdoptResult, error) {
	return &paddock.AdoptResult{}, c.svc.record(ctx, "Adopt", id, by)
}

// twoNodes is node a (its client-facing handler) and node b (its node
// listener, on a loopback port), sharing the secret.
type twoNodes struct {
	a, b       *fixture
	ca, cb     *fakeCluster
	bListener  *httptest.Server
	bRun, bTok string
}

func newTwoNodes(t *testing.T) *twoNodes {
	t.Helper()
	tn := &twoNodes{a: newFixture(t), b: newFixture(t)}
	tn.b.srv.NodeSecret, tn.a.srv.NodeSecret = "s3cret", "s3cret"
	tn.cb = &fakeCluster{svc: tn.b.svc, self: paddock.Node{ID: "nb", State: paddock.NodeAlive}}
	tn.b.srv.Cluster = tn.cb
	tn.bListener = httptest.NewServer(tn.b.srv.NodeHandler())
	t.Cleanup(tn.bListener.Close)
	tn.cb.self.Address = tn.bListener.URL
	res, _ := fakeJobs{tn.b.svc}.Bootstrap(context.Background(), paddock.BootstrapRequest{Project: "app"})
	tn.bRun, tn.bTok = res.Run.ID, res.Token
	tn.b.svc.asked()
	// The shared store: a knows b's run and its token.
	if r := tn.a.svc.newRun("app", nil); r.ID != tn.bRun {
		t.Fatalf("run ids differ: %s %s", r.ID, tn.bRun)
	}
	tn.a.svc.mu.Lock()
	tn.a.svc.tokens[tn.bTok] = tn.bRun
	tn.a.svc.mu.Unlock()
	tn.ca = &fakeCluster{svc: tn.a.svc, self: paddock.Node{ID: "na", State: paddock.NodeAlive, Address: "http://127.0.0.1:1"},
		where: map[string]paddock.Node{tn.bRun: tn.cb.self}}
	tn.a.srv.Cluster = tn.ca
	tn.a.h = tn.a.srv.Handler()
	return tn
}

// TestForwarding: a call for a run on another node reaches that node's
// service, as the caller that made it (the operator, or the run's agent
// with its token checked there again); the run's record and events are
// answered where asked; a new run goes where it is placed.
func TestForwarding(t *testing.T) {
	t.Parallel()
	tn := newTwoNodes(t)
	a, b := tn.a, tn.b
	run := "/v1/runs/" + tn.bRun

	got := a.do(t, a.h, "GET", run+"/changeset", "")
	if got.status != 200 || a.svc.whats() != "" {
		t.Fatalf("forwarded changeset: %d %s; a was asked %q", got.status, got.Data, a.svc.whats())
	}
	calls := b.svc.asked()
	if len(calls) != 1 || calls[0].what != "ChangeSet "+tn.bRun || calls[0].agent {
		t.Fatalf("b was asked %+v", calls)
	}
	// The run's own token: admitted by a, and again by b, as the agent.
	req := httptest.NewRequest("POST", "http://paddock"+run+"/tools/list", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+tn.bTok)
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	calls = b.svc.asked()
	if rec.Code != 200 || len(calls) != 1 || !calls[0].agent || calls[0].what != "CallTool "+tn.bRun+" list {}" {
		t.Fatalf("a token's call: %d %s; b was asked %+v", rec.Code, rec.Body, calls)
	}
	// The record and the events are a's to answer, from the shared store.
	if got := a.do(t, a.h, "GET", run, ""); got.status != 200 || a.svc.whats() != "Run "+tn.bRun || b.svc.whats() != "" {
		t.Fatalf("show: %d", got.status)
	}
	// A new run goes to the node it is placed on.
	tn.ca.place = tn.cb.self
	if got := a.do(t, a.h, "POST", "/v1/runs", `{"project":"app","secrets":["K"]}`); got.status != 201 || b.svc.whats() != "Create app [K]" || a.svc.whats() != "" {
		t.Fatalf("placed create: %d %s", got.status, got.Data)
	}
	if got := a.do(t, a.h, "POST", "/v1/bootstrap", `{"project":"app","agent":{"name":"coder"},"task":"fix"}`); got.status != 201 || b.svc.whats() != "Bootstrap app coder fix" || a.svc.whats() != "" {
		t.Fatalf("placed bootstrap: %d %s", got.status, got.Data)
	}
	if got := a.do(t, a.h, "POST", "/v1/flows", `{"workflow":"task-with-review","project":"app","task":"fix"}`); got.status != 201 || b.svc.whats() != "StartFlow task-with-review app fix" || a.svc.whats() != "" {
		t.Fatalf("placed flow: %d %s", got.status, got.Data)
	}
	// A create that fails there gives its place back; a run's token
	// takes no place at all (the route refuses it).
	tn.b.svc.fail = paddock.Errorf(paddock.CodeConflict, "refused")
	if got := a.do(t, a.h, "POST", "/v1/runs", `{"project":"app"}`); got.status != 409 || tn.ca.placed != 4 || tn.ca.released != 1 {
		t.Fatalf("a failed placed create: %d, %d placed, %d given back", got.status, tn.ca.placed, tn.ca.released)
	}
	tn.b.svc.fail = nil
	b.svc.asked()
	req = httptest.NewRequest("POST", "http://paddock/v1/runs", strings.NewReader(`{"project":"app"}`))
	req.Header.Set("Authorization", "Bearer "+tn.bTok)
	rec = httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || tn.ca.placed != 4 {
		t.Fatalf("a run token's create: %d, %d placed", rec.Code, tn.ca.placed)
	}
	// A client cannot pass for a forwarding node: its node headers are
	// dropped, and the call is forwarded all the same.
	req = httptest.NewRequest("GET", "http://paddock"+run+"/changeset", nil)
	req.Header.Set(forwardedByHeader, "na")
	req.Header.Set(nodeSecretHeader, "guess")
	rec = httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	if rec.Code != 200 || a.svc.whats() != "" || b.svc.whats() != "ChangeSet "+tn.bRun {
		t.Fatalf("a call with forged node headers: %d %s", rec.Code, rec.Body)
	}
}

// TestNodeListenerRefusesStrangers: the node listener takes only calls
// with the cluster's secret, a forwarding node's name and a caller.
func TestNodeListenerRefusesStrangers(t *testing.T) {
	t.Parallel()
	tn := newTwoNodes(t)
	for _, tc := range []struct {
		name    string
		headers map[string]string
	}{
		{"no secret", map[string]string{forwardedByHeader: "na", callerHeader: "operator"}},
		{"a wrong secret", map[string]string{nodeSecretHeader: "s3cre7", forwardedByHeader: "na", callerHeader: "operator"}},
		{"no node", map[string]string{nodeSecretHeader: "s3cret", callerHeader: "operator"}},
		{"no caller", map[string]string{nodeSecretHeader: "s3cret", forwardedByHeader: "na"}},
		{"the daemon's token", map[string]string{nodeSecretHeader: "s3cret", forwardedByHeader: "na", "Authorization": "Bearer t0k3n"}},
		{"a web page", map[string]string{nodeSecretHeader: "s3cret", forwardedByHeader: "na", callerHeader: "operator", "Origin": "http://evil.example"}},
	} {
		req, _ := http.NewRequest("GET", tn.bListener.URL+"/v1/runs/"+tn.bRun+"/changeset", nil)
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d", tc.name, resp.StatusCode)
		}
	}
	if asked := tn.b.svc.whats(); asked != "" {
		t.Fatalf("b's service was asked %q", asked)
	}
}

// TestLostNodesRun: a call for a run on a lost node is refused with
// node_lost and says how to adopt it; its record is still answered, and
// its adoption is this node's.
func TestLostNodesRun(t *testing.T) {
	t.Parallel()
	tn := newTwoNodes(t)
	lost := tn.cb.self
	lost.State = paddock.NodeLost
	tn.ca.where[tn.bRun] = lost
	run := "/v1/runs/" + tn.bRun
	got := tn.a.do(t, tn.a.h, "POST", run+"/exec", `{"argv":["true"]}`)
	if got.status != http.StatusServiceUnavailable || got.Error == nil || got.Error.Code != paddock.CodeNodeLost ||
		!strings.Contains(got.Error.Message, "paddock adopt "+tn.bRun) || got.Error.Details[paddock.DetailDone] != false {
		t.Fatalf("exec on a lost node's run: %d %+v", got.status, got.Error)
	}
	if tn.a.svc.whats() != "" || tn.b.svc.whats() != "" {
		t.Fatal("a service was asked")
	}
	if got := tn.a.do(t, tn.a.h, "GET", run+"/events", ""); got.status != 200 {
		t.Fatalf("events: %d", got.status)
	}
	tn.a.svc.asked()
	if got := tn.a.do(t, tn.a.h, "POST", run+"/adopt", ""); got.status != 200 || !strings.HasPrefix(tn.a.svc.whats(), "Adopt "+tn.bRun) {
		t.Fatalf("adopt: %d %+v", got.status, got.Error)
	}
	// A node that does not answer: node_lost, with its name, and that
	// the call never reached it (its connection was refused).
	dead := tn.cb.self
	tn.bListener.Close()
	tn.ca.where[tn.bRun] = dead
	got = tn.a.do(t, tn.a.h, "GET", run+"/changeset", "")
	if got.status != http.StatusServiceUnavailable || got.Error == nil || !strings.Contains(got.Error.Message, "could not be reached") ||
		got.Error.Details["delivered"] != false || got.Error.Details["node"] != dead.ID || got.Error.Details[paddock.DetailDone] != false {
		t.Fatalf("a silent node: %d %+v", got.status, got.Error)
	}
}

// TestFencedNodeServesNoRunCalls: a node the others marked lost (its
// lease ran out: paused, or cut from the database while its clients still
// reach it) goes on serving the calls on its own runs until its next
// renewal tells it so, up to a third of a lease later. forward looked the
// run up (on this node: served here) but not this node's own state, which
// Locate answers as lost: an exec ran in a workspace whose run another
// node may be adopting, and whose record the store refuses. A call on a
// run of this node, once the shared store says the node is lost, must be
// refused as node_lost.
func TestFencedNodeServesNoRunCalls(t *testing.T) {
	t.Parallel()
	tn := newTwoNodes(t)
	a := tn.a
	mine := a.svc.newRun("app", nil)
	a.svc.asked()
	lost := tn.ca.self
	lost.State = paddock.NodeLost
	tn.ca.where[mine.ID] = lost
	got := a.do(t, a.h, "POST", "/v1/runs/"+mine.ID+"/exec", `{"argv":["true"]}`)
	if asked := a.svc.whats(); asked != "" || got.status != http.StatusServiceUnavailable || got.Error == nil || got.Error.Code != paddock.CodeNodeLost ||
		got.Error.Details[paddock.DetailDone] != false {
		t.Fatalf("exec on a run of this node, the store saying this node is lost: %d %+v; the service was asked %q", got.status, got.Error, asked)
	}
}

// TestUnservedCallsSayNothingWasDone: a call this node could not route
// (the shared store did not answer where its run is, or which node takes
// a new run) was not served: its error says nothing was done
// (details.done false), which a client may make again as it is, whether
// the store's error is paddock's own (node_lost: this node's lease ran
// out) or one it keeps to its log (internal).
func TestUnservedCallsSayNothingWasDone(t *testing.T) {
	t.Parallel()
	for _, fail := range []error{
		&paddock.Error{Code: paddock.CodeNodeLost, Message: "node na has not reached the shared store"},
		errors.New("dial tcp 10.0.0.1:5432: connection refused"),
	} {
		tn := newTwoNodes(t)
		tn.ca.mu.Lock()
		tn.ca.fail = fail
		tn.ca.mu.Unlock()
		for _, call := range [][3]string{
			{"POST", "/v1/runs/" + tn.bRun + "/exec", `{"argv":["true"]}`},
			{"POST", "/v1/runs", `{"project":"app"}`},
		} {
			got := tn.a.do(t, tn.a.h, call[0], call[1], call[2])
			if got.Error == nil || got.Error.Code != paddock.ErrorCode(fail) || got.Error.Details[paddock.DetailDone] != false ||
				strings.Contains(got.Error.Message, "10.0.0.1") {
				t.Errorf("%s %s, the store failing with %v: %d %+v", call[0], call[1], fail, got.status, got.Error)
			}
		}
		if asked := tn.a.svc.whats() + tn.b.svc.whats(); asked != "" {
			t.Fatalf("a service was asked %q", asked)
		}
	}
}

// TestNodeListenerServesOnlyItsRuns: a call forwarded to this node (the
// forwarding node's Locate said the run is here) is served without asking
// again where the run is. When the run moved meanwhile (adopted by another
// node while this one was away), this node acts on a run that is not its
// own any more, with writes its fence lets through (the fence is the
// node's lease, not the run's holder): two nodes drive one run. The node
// listener must refuse (never forward again) a call on a run another node
// holds.
func TestNodeListenerServesOnlyItsRuns(t *testing.T) {
	t.Parallel()
	tn := newTwoNodes(t)
	tn.cb.mu.Lock()
	tn.cb.where = map[string]paddock.Node{tn.bRun: {ID: "nc", State: paddock.NodeAlive, Address: "http://127.0.0.1:1"}}
	tn.cb.mu.Unlock()
	req, _ := http.NewRequest("POST", tn.bListener.URL+"/v1/runs/"+tn.bRun+"/exec", strings.NewReader(`{"argv":["true"]}`))
	req.Header.Set(nodeSecretHeader, "s3cret")
	req.Header.Set(forwardedByHeader, "na")
	req.Header.Set(callerHeader, "operator")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if asked := tn.b.svc.whats(); asked != "" || resp.StatusCode < 400 {
		t.Fatalf("a forwarded exec on a run node nc holds: %d; b's service was asked %q", resp.StatusCode, asked)
	}
}

// TestEveryNewRunIsPlaced: a new run goes to the node Place picks (room,
// then warm snapshots), which is how a node's capacity is kept. Only
// POST /v1/runs was placed: a bootstrap (a new run and its agent, what an
// orchestrator makes) and a flow's start (its first run) were made on the
// node asked, full or not. Each call that makes a run of a project must be
// placed.
func TestEveryNewRunIsPlaced(t *testing.T) {
	t.Parallel()
	tn := newTwoNodes(t)
	a, b := tn.a, tn.b
	tn.ca.place = tn.cb.self
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/bootstrap", `{"project":"app","agent_name":"coder","task":"t"}`, "Bootstrap app"},
		{"/v1/flows", `{"workflow":"review","project":"app","task":"t"}`, "StartFlow review app"},
	} {
		got := a.do(t, a.h, "POST", tc.path, tc.body)
		asked, there := a.svc.whats(), b.svc.whats()
		if asked != "" || !strings.HasPrefix(there, tc.want) {
			t.Errorf("POST %s, placed on nb: %d; na was asked %q, nb %q", tc.path, got.status, asked, there)
		}
	}
}

// TestNodeListenerHoldsARunTokenToItsRun: on the node listener (with the
// secret, as a forwarding node calls), a run's token reaches its own run's
// agent routes only: not another run of the node, not an operator route,
// and it is not turned into the operator by a caller header sent beside it.
func TestNodeListenerHoldsARunTokenToItsRun(t *testing.T) {
	t.Parallel()
	tn := newTwoNodes(t)
	other := tn.b.svc.newRun("app", nil)
	tn.b.svc.asked()
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/runs/" + other.ID + "/exec", `{"argv":["true"]}`},
		{"GET", "/v1/runs/" + other.ID + "/changeset", ""},
		{"POST", "/v1/runs/" + tn.bRun + "/approve", `{"hash":"sha256:x"}`},
		{"DELETE", "/v1/runs/" + tn.bRun, ""},
		{"GET", "/v1/runs", ""},
	} {
		req, _ := http.NewRequest(tc.method, tn.bListener.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set(nodeSecretHeader, "s3cret")
		req.Header.Set(forwardedByHeader, "na")
		req.Header.Set(callerHeader, "operator")
		req.Header.Set("Authorization", "Bearer "+tn.bTok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s with run %s's token: %d", tc.method, tc.path, tn.bRun, resp.StatusCode)
		}
	}
	if asked := tn.b.svc.whats(); asked != "" {
		t.Fatalf("b's service was asked %q", asked)
	}
}

// TestForwardingTakesNoProxy: a forwarded call carries the cluster's
// secret (the operator's power on every node listener) and runs' tokens.
// The reverse proxy's default transport sends calls to a node on another
// machine through HTTP_PROXY when the daemon's environment names one (a
// loopback node is exempt): the secret would go to that proxy. Calls
// between nodes take no proxy.
func TestForwardingTakesNoProxy(t *testing.T) {
	t.Parallel()
	tr, ok := nodeTransport.(*http.Transport)
	if !ok || tr.Proxy != nil {
		t.Fatalf("the transport between nodes: %T, proxy set: %v", nodeTransport, ok && tr.Proxy != nil)
	}
}
