package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
)

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
	if asked := a.svc.whats(); asked != "" || got.status != http.StatusServiceUnavailable || got.Error == nil || got.Error.Code != paddock.CodeNodeLost {
		t.Fatalf("exec on a run of this node, the store saying this node is lost: %d %+v; the service was asked %q", got.status, got.Error, asked)
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
