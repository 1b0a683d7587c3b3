package httpapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock"
	"go.opentelemetry.io/otel/propagation"
	"golang.org/x/sys/unix"
)

// Cluster is where runs are when several daemons share a store as nodes
// (package postgres): the daemon gives it its store and Manager; nil on a
// daemon of its own.
type Cluster interface {
	// Self is this node.
	Self() paddock.Node
	// Locate returns the node that holds a run (a zero Node for a run
	// made before nodes); CodeNotFound for no run.
	Locate(ctx context.Context, runID string) (paddock.Node, error)
	// Place picks the node for a new run of project and holds a place
	// there; release gives the place back when no run was made (the call
	// failed). CodeNotFound for no such project.
	Place(ctx context.Context, project string) (n paddock.Node, release func(), err error)
	// Nodes lists the nodes.
	Nodes(ctx context.Context) ([]paddock.Node, error)
	// Adopt restores on this node a run whose node is lost, from its
	// checkpoint in the shared store, and adopts its interrupted job.
	Adopt(ctx context.Context, runID, by string) (*paddock.AdoptResult, error)
}

// The headers of a call one node forwards to another. A client's own
// values of them are dropped when it comes in (guard).
const (
	// nodeSecretHeader carries the cluster's secret: the node listener
	// refuses a call without it.
	nodeSecretHeader = "X-Paddock-Node-Secret"
	// forwardedByHeader names the node that forwarded the call; a call
	// that carries it is never forwarded again.
	forwardedByHeader = "X-Paddock-Forwarded-By"
	// actorHeader is who called the forwarding node (its actor), and
	// callerHeader "operator" when the forwarding node admitted the
	// caller as the operator (a run's token travels in Authorization and
	// is checked again).
	actorHeader  = "X-Paddock-Actor"
	callerHeader = "X-Paddock-Caller"
	// principalHeader names the principal, when callerHeader is
	// "principal".
	principalHeader = "X-Paddock-Principal"
	// principalTokenHeader is the id (never the secret) of the token that
	// admitted the principal's call, so that the node there refuses it
	// once revoked, mid-stream too.
	principalTokenHeader = "X-Paddock-Principal-Token"
)

// runPath splits /v1/runs/{id}[/rest] into the id and the rest.
func runPath(p string) (id, rest string, ok bool) {
	after, found := strings.CutPrefix(p, "/v1/runs/")
	if !found || after == "" {
		return "", "", false
	}
	id, rest, _ = strings.Cut(after, "/")
	return id, rest, id != ""
}

// servedAnywhere are the calls on a run that any node answers from the
// shared store, whichever node holds the run: its record, its events and
// their stream (woken on every node by LISTEN/NOTIFY), its jobs' records,
// and its adoption.
func servedAnywhere(method, rest string) bool {
	switch {
	case method == http.MethodGet && (rest == "" || rest == "events" || rest == "events/stream" || rest == "jobs"):
		return true
	case method == http.MethodGet && strings.HasPrefix(rest, "jobs/") && !strings.Contains(strings.TrimPrefix(rest, "jobs/"), "/"):
		return true
	case method == http.MethodPost && rest == "adopt":
		return true
	}
	return false
}

// placed says whether a call makes a new run of the project its body
// names: a create, a bootstrap (a run and its agent), a flow's start (its
// first run). Each goes to the node Place picks, so that capacity holds
// whichever way a run is made.
func placed(path string) bool {
	switch path {
	case "/v1/runs", "/v1/bootstrap", "/v1/flows":
		return true
	}
	return false
}

// maxCreateBody bounds the body of a create this node reads to place it.
const maxCreateBody = 1 << 20

// forward sends a call to the node that holds its run, or, for a new run,
// to the node chosen for it; it answers the calls it does not forward
// with next. A call another node forwarded is never forwarded again.
func (s *Server) forward(next http.Handler) http.Handler {
	if s.Cluster == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(forwardedByHeader) != "" {
			next.ServeHTTP(w, r)
			return
		}
		self := s.Cluster.Self()
		if r.Method == http.MethodPost && placed(r.URL.Path) {
			s.forwardNewRun(next, self, w, r)
			return
		}
		s.forwardToRunsNode(next, self, w, r)
	})
}

// forwardNewRun sends a call that makes a run to the node Place picks for
// its project (next, when that is self), and gives the place back when
// no run was made. What names no project, or a run's token, is next's.
func (s *Server) forwardNewRun(next http.Handler, self paddock.Node, w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCreateBody+1))
	if err != nil {
		writeError(w, paddock.Errorf(paddock.CodeBadRequest, "reading the request: %v", err))
		return
	}
	if len(body) > maxCreateBody {
		writeError(w, paddock.Errorf(paddock.CodeTooLarge, "a create request is at most %d bytes", maxCreateBody))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct {
		Project string `json:"project"`
	}
	if json.Unmarshal(body, &req) != nil || req.Project == "" {
		next.ServeHTTP(w, r) // the create's own checks say what is wrong
		return
	}
	if _, agent := r.Context().Value(scopeKey).(string); agent {
		next.ServeHTTP(w, r) // a run's token: the route refuses it, and nothing is held
		return
	}
	if s.answerKeptElsewhere(w, r) {
		return // made again with its key: nothing is placed
	}
	n, release, err := s.Cluster.Place(r.Context(), req.Project)
	if paddock.IsCode(err, paddock.CodeNotFound) {
		next.ServeHTTP(w, r) // the route says there is no such project
		return
	}
	if err != nil {
		s.fail(w, r, paddock.MarkUndone(err)) // no node was chosen: nothing was made
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	if n.ID == self.ID {
		next.ServeHTTP(sw, r)
	} else {
		s.proxy(sw, r, n, true)
	}
	if sw.status < 200 || sw.status > 299 {
		release() // no run was made: the place is given back
	}
}

// forwardToRunsNode sends a call on a run to the node that holds it;
// next answers what any node answers, and the runs self holds while its
// lease is its own. A run on a node that is not alive is node_lost.
func (s *Server) forwardToRunsNode(next http.Handler, self paddock.Node, w http.ResponseWriter, r *http.Request) {
	id, rest, ok := runPath(r.URL.Path)
	if !ok || servedAnywhere(r.Method, rest) {
		next.ServeHTTP(w, r)
		return
	}
	n, err := s.Cluster.Locate(r.Context(), id)
	switch {
	case paddock.IsCode(err, paddock.CodeNotFound):
		next.ServeHTTP(w, r) // the route says there is no such run
	case err != nil:
		s.fail(w, r, paddock.MarkUndone(err)) // not served: nothing was done
	case n.ID == "":
		next.ServeHTTP(w, r)
	case n.ID == self.ID:
		if err := selfFenced(self, n); err != nil {
			writeError(w, paddock.MarkUndone(err))
			return
		}
		next.ServeHTTP(w, r)
	case n.State != paddock.NodeAlive:
		what := "lost: it stopped renewing its lease"
		if n.State == paddock.NodeLeft {
			what = "stopped"
		}
		writeError(w, &paddock.Error{Code: paddock.CodeNodeLost,
			Message: "run " + id + " is on node " + n.ID + ", which is " + what + "; restart that node, or adopt the run on this one (paddock adopt " + id + ")",
			Details: map[string]any{"node": n.ID, "node_state": n.State, paddock.DetailDone: false}})
	default:
		s.proxy(w, r, n, false)
	}
}

// nodeTransport carries the calls one node forwards to another. It takes
// no proxy the environment names (HTTP_PROXY, which the default transport
// follows for any address but loopback): each call carries the cluster's
// secret, and runs' tokens. A node the others cannot reach (a cut link
// drops packets, it refuses nothing) must not hold the calls forwarded to
// it until the kernel gives up on them, a quarter of an hour: a connection
// is given nodeDial to open, and once open it fails when what it sent is
// not acknowledged within nodeUnacked, or, quiet (a long command's
// answer), when the node stops answering its keep-alive probes.
var nodeTransport http.RoundTripper = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	// Keep a connection for each call a busy node forwards at once: the
	// default keeps two a node, and every call beyond them opened a
	// connection and closed it (the forwarded write's tail).
	t.MaxIdleConnsPerHost = nodeIdleConns
	d := &net.Dialer{
		Timeout:         nodeDial,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: nodeUnacked / 2, Interval: nodeUnacked / 6, Count: 3},
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(nodeUnacked.Milliseconds()))
			})
			return errors.Join(err, serr)
		},
	}
	t.DialContext = d.DialContext
	return t
}()

// How long a forwarded call waits for a node that does not answer: to
// connect, and for what it sent to be acknowledged (or a quiet
// connection's probes answered).
const (
	nodeDial    = 5 * time.Second
	nodeUnacked = 6 * time.Second
)

// nodeIdleConns is how many open connections to each other node are kept
// between the calls forwarded to it.
const nodeIdleConns = 64

// proxy hands the call to node n as its caller made it: the body, the
// streams, an upgraded connection (exec/attach) all pass through.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request, n paddock.Node, placed bool) {
	target, err := url.Parse(n.Address)
	if err != nil || target.Scheme != "http" || target.Host == "" {
		s.fail(w, r, &paddock.Error{Code: paddock.CodeInternal, Message: "node " + n.ID + " has an address that does not parse", Err: err})
		return
	}
	_, agent := r.Context().Value(scopeKey).(string)
	from := s.Cluster.Self().ID
	var fwdErr error
	if s.Observer != nil && !streamed(r) {
		start := time.Now()
		defer func() { s.Observer.Forwarded(time.Since(start), fwdErr) }()
	}
	// sent is whether any of the call went out to the node: a call that
	// failed before did nothing there, and can be made again.
	var sent atomic.Bool
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out = pr.Out.WithContext(httptrace.WithClientTrace(pr.Out.Context(),
				&httptrace.ClientTrace{WroteHeaderField: func(string, []string) { sent.Store(true) }}))
			pr.SetURL(target)
			pr.Out.Host = target.Host
			h := pr.Out.Header
			h.Del("Cookie")
			h.Del("Origin")
			h.Del("Referer")
			h.Del("X-Forwarded-For")
			h.Set(actorHeader, actor(r))
			// The call's span (traced) is the node's call's parent there.
			propagator.Inject(r.Context(), propagation.HeaderCarrier(h))
			if agent {
				h.Set(nodeSecretHeader, s.NodeSecret)
				h.Set(forwardedByHeader, from)
			} else {
				// The operator's credential here (the socket, this daemon's
				// token, the review page's cookie) is worth nothing there.
				h.Del("Authorization")
				AsNode(h, s.NodeSecret, from)
				if c := paddock.CallerOf(r.Context()); c != nil && c.Principal != "" {
					// A principal's call: the node there reads its role again.
					h.Set(callerHeader, "principal")
					h.Set(principalHeader, c.Principal)
					h.Set(principalTokenHeader, c.Token) // its id: checked there again
				}
			}
		},
		Transport:     nodeTransport,
		FlushInterval: -1, // streams (events, exec output, MCP) as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			fwdErr = err
			delivered := sent.Load()
			s.log().Warn("forwarding a call to its run's node failed", "node", n.ID, "path", r.URL.Path, "delivered", delivered, "err", err)
			writeError(w, forwardError(n, placed, delivered))
		},
	}
	http.NewResponseController(w).SetWriteDeadline(time.Time{}) // the node there bounds the call
	rp.ServeHTTP(w, r)
}

// forwardError is the answer to a call node n did not answer: whether
// the call went out (delivered) says whether it may have been done there.
// A new run is made again (its place is given back); a call on a run
// that never went out may be made again as it is, one that did only
// once its run's events show it was not done.
func forwardError(n paddock.Node, placed, delivered bool) *paddock.Error {
	details := map[string]any{"node": n.ID, "delivered": delivered}
	if !delivered {
		details[paddock.DetailDone] = false // may be made again as it is
	}
	who := "node " + n.ID + " (" + n.Address + ")"
	if placed {
		msg := who + ", chosen for the new run, did not answer; nothing was made, try again"
		if delivered {
			msg = who + ", chosen for the new run, did not answer; if a run was made there it is listed (paddock ls), else try again"
		}
		return &paddock.Error{Code: paddock.CodeBusy, Message: msg, Details: details}
	}
	msg := who + ", which holds this run, could not be reached from this node: the call did not reach it and nothing was done, it may be made again"
	if delivered {
		msg = who + ", which holds this run, stopped answering this node: the call may have been done there; its run's events say (paddock events), make it again only if they do not show it"
	}
	return &paddock.Error{Code: paddock.CodeNodeLost, Message: msg + "; a node the others cannot reach that still holds its lease keeps its runs, one that lost it is marked lost after its lease",
		Details: details}
}

// streamed says whether r is a stream whose forwarding lasts as long as
// its caller wants (events, a streamed or attached command, MCP): it is
// not timed.
func streamed(r *http.Request) bool {
	p := r.URL.Path
	return r.Header.Get("Upgrade") != "" || strings.HasSuffix(p, "/stream") || strings.HasSuffix(p, "/mcp")
}

// NodeHandler returns the API for the node listener: the calls other nodes
// forward. Each must carry the cluster's secret; the caller is the
// operator when the forwarding node said so, or the run whose token it
// carries.
func (s *Server) NodeHandler() http.Handler {
	next := s.mux()
	return s.endable(s.traced(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(nodeSecretHeader)
		by := r.Header.Get(forwardedByHeader)
		if s.NodeSecret == "" || got == "" || by == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.NodeSecret)) != 1 {
			writeError(w, paddock.Errorf(paddock.CodeForbidden, "the node listener takes only calls forwarded by another node of this paddock"))
			return
		}
		if r.Header.Get("Origin") != "" || r.Header.Get("Referer") != "" {
			writeError(w, paddock.Errorf(paddock.CodeForbidden, "requests from web pages are refused"))
			return
		}
		a := r.Header.Get(actorHeader)
		if a == "" {
			a = "unknown"
		}
		ctx := context.WithValue(r.Context(), actorKey, a+" via node "+by)
		tok, hasTok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch {
		case hasTok && strings.HasPrefix(tok, "pdk_run_") && s.Jobs != nil:
			var err error
			if ctx, err = s.asRunsAgent(ctx, tok); err != nil {
				writeError(w, err)
				return
			}
		case !hasTok && r.Header.Get(callerHeader) == "operator":
			ctx = paddock.WithCaller(ctx, operatorCaller(a+" via node "+by))
		case !hasTok && r.Header.Get(callerHeader) == "principal" && s.Principals != nil:
			c, err := s.Principals.Recheck(ctx, &paddock.Caller{Principal: r.Header.Get(principalHeader), Token: r.Header.Get(principalTokenHeader)})
			if paddock.IsCode(err, paddock.CodeUnauthorized) {
				writeError(w, paddock.Errorf(paddock.CodeUnauthorized, "the principal node %s forwarded this call for, or its token, is no longer live", by))
				return
			}
			if err != nil {
				s.fail(w, r, err)
				return
			}
			ctx = s.withLiveCheck(withCaller(ctx, c))
		default:
			writeError(w, paddock.Errorf(paddock.CodeForbidden, "a forwarded call names no caller"))
			return
		}
		r = r.WithContext(ctx)
		if r.Header.Get(paddock.AgentHeader) != "" {
			r = r.WithContext(paddock.WithAgent(r.Context()))
		}
		// The forwarding node looked the run up; it may have moved since
		// (adopted while this node was away), or this node may have lost
		// its lease: a run this node does not hold, alive, is not served
		// here, and the call is not forwarded again.
		if id, rest, ok := runPath(r.URL.Path); ok && s.Cluster != nil && !servedAnywhere(r.Method, rest) {
			self := s.Cluster.Self()
			n, err := s.Cluster.Locate(r.Context(), id)
			switch {
			case paddock.IsCode(err, paddock.CodeNotFound):
			case err != nil:
				s.fail(w, r, err)
				return
			case n.ID == self.ID:
				if err := selfFenced(self, n); err != nil {
					writeError(w, err)
					return
				}
			case n.ID != "":
				writeError(w, &paddock.Error{Code: paddock.CodeConflict,
					Message: "run " + id + " is on node " + n.ID + " now, not on node " + self.ID + " (" + by + " forwarded the call here): ask again",
					Details: map[string]any{"node": n.ID}})
				return
			}
		}
		next.ServeHTTP(w, r)
	}), nodesOnly))
}

// selfFenced is node_lost when the shared store says this node (at) is
// not the one alive under its id: marked lost or stopped, or joined again
// by a newer epoch. Its renewal would tell it so up to a third of a lease
// later; until then its runs' calls are refused rather than served by a
// node whose runs another may be adopting.
func selfFenced(self, at paddock.Node) error {
	if at.State == paddock.NodeAlive && (at.Epoch == 0 || self.Epoch == 0 || at.Epoch == self.Epoch) {
		return nil
	}
	return &paddock.Error{Code: paddock.CodeNodeLost,
		Message: "this node (" + self.ID + ") lost its lease: the shared store says it is " + string(at.State) + ", and it serves no call on its runs; it stops at its next renewal",
		Details: map[string]any{"node": self.ID, "node_state": at.State}}
}

// AsNode marks a call as node from's, for the operator, authenticated by
// the cluster's secret: what a node's listener takes (NodeHandler).
func AsNode(h http.Header, secret, from string) {
	h.Set(nodeSecretHeader, secret)
	h.Set(forwardedByHeader, from)
	h.Set(callerHeader, "operator")
}

// dropNodeHeaders removes what only a node may send from a client's call.
func dropNodeHeaders(r *http.Request) {
	for _, h := range []string{nodeSecretHeader, forwardedByHeader, actorHeader, callerHeader, principalHeader, principalTokenHeader} {
		r.Header.Del(h)
	}
}

// clusterHandlers answer about the cluster's nodes: nil cluster, a
// daemon of its own.
type clusterHandlers struct{ cluster Cluster }

func (h *clusterHandlers) nodes(r *http.Request) (any, error) {
	if h.cluster == nil {
		return nil, paddock.Errorf(paddock.CodeUnsupported, "this daemon is a node of no cluster: its store is not shared (serve --store postgres://… makes it one)")
	}
	return h.cluster.Nodes(r.Context())
}

func (h *clusterHandlers) adopt(r *http.Request) (any, error) {
	if h.cluster == nil {
		return nil, paddock.Errorf(paddock.CodeUnsupported, "this daemon is a node of no cluster: there is no other node to adopt a run from")
	}
	return h.cluster.Adopt(r.Context(), r.PathValue("id"), actor(r))
}

// statusWriter remembers the status of the answer it passes on.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
