// Package httpapi serves paddock's JSON action protocol under /v1.
//
// Every answer is an envelope: {"ok":true,"data":…} or
// {"ok":false,"error":{"code":…,"message":…,"details":{…}}}. The status is
// derived from the error code in one table (Status). An internal error never
// carries its detail to the client: it is logged with a correlation id, and
// the client gets the id.
//
// The routes are one table (routes.go): each route's method and path, who
// may call it (the operator, or also a run's own token), its status on
// success and its handler. The handlers of each concern are methods of a
// type of their own, in a file with the interface they call (projects.go:
// Projects, runs.go: Runs, jobs.go: Jobs, broker.go and attach.go: Broker,
// changes.go, verify.go, flows.go, portable.go: Bundles and Queue,
// daemon.go: Collector), which holds only the calls its routes make: the
// daemon's lifecycle.Manager provides them, a test gives the fakes it
// needs. A handler type holds its interfaces and apiBase, what every
// handler shares (failing, logging, the run's funnel), never the Server.
//
// # Hardening
//
//   - Request bodies are capped and must be one JSON object with known fields.
//   - A request that carries a browser Origin or Referer is refused: no web
//     page may drive the API through a user's browser.
//   - The Host header must name loopback or the unix socket, so a DNS
//     rebinding attack cannot reach the TCP listener under a foreign name.
//   - On TCP every request needs the bearer token from the state directory;
//     on the unix socket (mode 0600) the file permission is the credential,
//     and the peer's uid is recorded as the actor.
package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/identity"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/strictjson"
	"github.com/paddock-dev/paddock/tools"
	"github.com/paddock-dev/paddock/ui"
	"go.opentelemetry.io/otel/trace"
)

// MaxBody is the largest request body accepted.
const MaxBody = 1 << 20

// maxExecBody is the largest body of an exec: MaxBody and a stdin of
// paddock.MaxExecStdin bytes in base64.
const maxExecBody = MaxBody + (paddock.MaxExecStdin+2)/3*4

// WriteStall is how long a write of an answer may take once a
// long-running request (a command) has its result: a reader that stalls
// longer loses the connection, whatever the command's own limit was.
const WriteStall = 30 * time.Second

// MaxWait is the longest an events request may wait for new events.
const MaxWait = 60 * time.Second

// Server is the HTTP API of one daemon. Set its fields before taking a
// handler of it (Handler, TCPHandler, NodeHandler, RunHandler): the
// routes' handlers are given the services as they are then.
type Server struct {
	// The services the routes call, one per concern: the daemon's
	// lifecycle.Manager's. Each is a slice of paddock.Service (the
	// protocol client.Client speaks too) and of what only the daemon
	// decides: who the caller is (the by arguments, named by the
	// connection's actor, never by the request), its limits, a run's
	// secrets and tokens. Run and Project are every service's, so an
	// interface that needs one holds it too.
	//
	// A route calls only its concern's, so a server may leave out those
	// whose routes it is not asked (a test); reaching one of those
	// panics. Without Jobs, no run token is admitted; without Broker, no
	// answer is masked by a run's declared secrets (the funnel's redactor
	// is the broker's).
	Projects   Projects
	Runs       Runs
	Jobs       Jobs
	Broker     Broker
	Changes    Changes
	Provenance Provenance
	Verifier   Verifier
	Reviews    Reviews
	Forks      Forks
	Flows      Flows
	Queue      Queue
	Bundles    Bundles
	Collector  Collector
	Notices    Notices
	// Calls, if set, makes a call that carries an idempotency key once
	// (keyed.go); without it the key is not read.
	Calls Calls
	// Principals, if set, admits principals' tokens and maps local users
	// to principals; without it every caller is the operator or a run.
	Principals Principals

	Logger *slog.Logger
	// Token is required as a bearer token on TCP listeners.
	Token string
	// Status returns the daemon's status for /v1/status.
	Status func() paddock.DaemonStatus
	// Doctor probes, in the daemon's own process, what it can enforce
	// (/v1/doctor); nil answers unsupported.
	Doctor func(context.Context) *paddock.DoctorReport
	// InboxLimits bound inbound files; zero means tools.DefaultInboxLimits.
	InboxLimits tools.InboxLimits
	// MCP serves a run's MCP server over streamable HTTP at
	// /v1/runs/{id}/mcp (the daemon's mcpserver.Handler), once the caller
	// is admitted and the run exists; nil answers unsupported.
	MCP http.Handler
	// UI holds the review page's sessions (package ui): the page is served
	// at /ui on TCP listeners, and a session's cookie admits its browser
	// as the operator. Nil serves no page.
	UI *ui.Sessions
	// UIAddr returns the loopback TCP address the review page is served
	// on, starting a listener if the daemon has none.
	UIAddr func(context.Context) (string, error)
	// Cluster, when several daemons share the store as nodes, says where
	// runs are: a call for a run on another node is forwarded to it (with
	// NodeSecret, the cluster's secret, which NodeHandler checks). Nil on
	// a daemon of its own.
	Cluster    Cluster
	NodeSecret string
	// Metrics serves GET /metrics (the daemon's Prometheus registry); nil
	// answers unsupported. Observer, if set, is told of each request a
	// route answered and of each call forwarded to another node.
	Metrics  http.Handler
	Observer Observer
	// Tracer, if set, makes each request's server span (OpenTelemetry),
	// under its caller's W3C traceparent; a call forwarded to another
	// node carries it on.
	Tracer trace.Tracer

	ends streamsEnd // EndStreams
	kept keptBudget // what each caller's kept answers take (keyed.go)
}

// Observer is told what the API answered (the daemon's metrics).
type Observer interface {
	// Request: a route (its pattern, never a run id) answered code; a
	// streamed one (events, a streamed or attached command, MCP) is
	// counted, not timed.
	Request(method, route string, code int, streamed bool, d time.Duration)
	// Forwarded: a call proxied to another node, from the call to the
	// end of its answer.
	Forwarded(d time.Duration, err error)
}

// Status maps an error code to its HTTP status. It is the only such table.
func Status(c paddock.Code) int {
	switch c {
	case paddock.CodeBadRequest:
		return http.StatusBadRequest
	case paddock.CodeNotFound:
		return http.StatusNotFound
	case paddock.CodeConflict, paddock.CodeNotBootstrapped:
		return http.StatusConflict
	case paddock.CodeBusy:
		return http.StatusLocked
	case paddock.CodeUnauthorized:
		return http.StatusUnauthorized
	case paddock.CodeForbidden, paddock.CodeRunMismatch:
		return http.StatusForbidden
	case paddock.CodeUnsupported:
		return http.StatusNotImplemented
	case paddock.CodeAttributionLeak:
		return http.StatusUnprocessableEntity
	case paddock.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case paddock.CodeNodeLost:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

type ctxKey int

const (
	actorKey ctxKey = iota
	scopeKey        // the run a run token was issued for
	peerKey         // the unix socket's peer uid
)

// ConnContext records who is on the other end of a connection: the peer's
// user on a unix socket, the remote address on TCP. Pass it as
// http.Server.ConnContext.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	actor := "tcp:" + c.RemoteAddr().String()
	if uc, ok := c.(*net.UnixConn); ok {
		actor = "unix:unknown"
		if raw, err := uc.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) {
				cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
				if err == nil {
					ctx = context.WithValue(ctx, peerKey, int(cred.Uid))
					actor = "uid " + strconv.Itoa(int(cred.Uid))
					if u, err := user.LookupId(strconv.Itoa(int(cred.Uid))); err == nil {
						actor = u.Username + " (" + actor + ")"
					}
				}
			})
		}
	}
	return context.WithValue(ctx, actorKey, actor)
}

func actor(r *http.Request) string {
	if a, ok := r.Context().Value(actorKey).(string); ok {
		return a
	}
	return "unknown"
}

// listener is the kind of listener a guard serves.
type listener uint8

const (
	// unixPrivate: the daemon's own unix socket (mode 0600): its peer is the
	// operator, or the principal its uid maps to.
	unixPrivate listener = iota
	// unixShared: serve --shared-socket (mode 0660, a group's): its peer must
	// be a principal, by its uid (or by a token).
	unixShared
	// loopbackTCP: a loopback listener; a token is required.
	loopbackTCP
)

// Handler returns the API for the unix socket.
func (s *Server) Handler() http.Handler {
	return s.endable(s.traced(s.guard(s.forward(s.mux()), unixPrivate), anyCaller))
}

// SharedHandler returns the API for the shared unix socket, whose
// callers are the principals their uids map to: an unmapped peer is
// refused rather than taken for the operator.
func (s *Server) SharedHandler() http.Handler {
	return s.endable(s.traced(s.guard(s.forward(s.mux()), unixShared), anyCaller))
}

// TCPHandler returns the API for a loopback TCP listener: it also requires the token.
func (s *Server) TCPHandler() http.Handler {
	return s.endable(s.traced(s.guard(s.forward(s.mux()), loopbackTCP), anyCaller))
}

func (s *Server) log() *slog.Logger { return s.base().log() }

func (s *Server) guard(next http.Handler, on listener) http.Handler {
	tcp := on == loopbackTCP
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dropNodeHeaders(r) // only a node sends them, and on its own listener
		if tcp && isUIPath(r.URL.Path) {
			s.serveUI(w, r)
			return
		}
		browser := false
		if tcp {
			var err error
			if r, browser, err = s.browserCall(r); err != nil {
				writeError(w, err)
				return
			}
		}
		if !browser && refuseForeign(w, r, tcp) {
			return
		}
		// A review page's session is its principal's (or the operator's),
		// checked in browserCall.
		if !browser && r.URL.Path != "/healthz" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			var c *paddock.Caller
			var err error
			switch {
			case !ok && tcp:
				writeError(w, paddock.Errorf(paddock.CodeUnauthorized, "a valid bearer token is required on TCP (it is in the state directory's token file, or made for a principal: paddock token create)"))
				return
			case !ok:
				// The unix socket's 0600 mode is the operator's credential;
				// a local user mapped to a principal is that principal.
				c, err = s.localCaller(r, on == unixShared)
			case s.Token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.Token)) == 1:
				c = operatorCaller(actor(r)) // the daemon's token: the operator
			case strings.HasPrefix(got, "pdk_run_") && s.Jobs != nil:
				var ctx context.Context
				if ctx, err = s.asRunsAgent(r.Context(), got); err == nil {
					r = r.WithContext(ctx)
				}
			case strings.HasPrefix(got, identity.TokenPrefix) && s.Principals != nil:
				c, err = s.Principals.Authenticate(r.Context(), got)
			default:
				err = paddock.Errorf(paddock.CodeUnauthorized, "unknown token: neither the daemon's (the token file in its state directory), a principal's, nor a live run's")
			}
			if err != nil {
				writeError(w, err)
				return
			}
			if c != nil {
				r = r.WithContext(s.withLiveCheck(withCaller(r.Context(), c)))
			}
		}
		if r.Header.Get(paddock.AgentHeader) != "" {
			// An operator's client acting for the run's agent (paddock mcp).
			r = r.WithContext(paddock.WithAgent(r.Context()))
		}
		next.ServeHTTP(w, r)
	})
}

// localCaller is the caller on a unix socket: the principal its peer's
// uid maps to, or else the operator, who is the daemon's own user or
// root. Any other peer (the shared socket's, or one a changed mode let
// in) is refused: the socket's permission is the operator's credential
// only for the operator.
func (s *Server) localCaller(r *http.Request, shared bool) (*paddock.Caller, error) {
	uid, ok := r.Context().Value(peerKey).(int)
	if ok && !shared && (uid == 0 || uid == os.Geteuid()) {
		// Root and the daemon's own user are the operator: no principal
		// stands for them (identity refuses to map them), so nothing is read.
		return operatorCaller(actor(r)), nil
	}
	if ok && s.Principals != nil {
		c, err := s.Principals.CallerByUID(r.Context(), uid)
		if err != nil || c != nil {
			return c, err
		}
	}
	switch {
	case shared && ok:
		return nil, paddock.Errorf(paddock.CodeUnauthorized, "uid %d is no principal's; an admin maps it: paddock principal add NAME --role ROLE --uid %d", uid, uid)
	case shared:
		return nil, paddock.Errorf(paddock.CodeUnauthorized, "this socket's peer is unknown; only principals call here")
	case ok && uid != 0 && uid != os.Geteuid():
		return nil, paddock.Errorf(paddock.CodeUnauthorized, "uid %d is neither the daemon's user nor root, nor a principal's; an admin maps it: paddock principal add NAME --role ROLE --uid %d", uid, uid)
	}
	return operatorCaller(actor(r)), nil
}

// asRunsAgent is ctx for a call made with a run's token: scoped to that
// run, as its agent; unauthorized for a token no run has.
func (s *Server) asRunsAgent(ctx context.Context, token string) (context.Context, error) {
	id, err := s.Jobs.RunForToken(ctx, token)
	if err != nil {
		return nil, paddock.Errorf(paddock.CodeUnauthorized, "unknown token: neither the daemon's (the token file in its state directory) nor a live run's")
	}
	return paddock.WithAgent(context.WithValue(ctx, scopeKey, id)), nil
}

// refuseForeign answers, and says it did, a request from a web page or
// for another host than the listener serves: every listener refuses them.
func refuseForeign(w http.ResponseWriter, r *http.Request, tcp bool) bool {
	if r.Header.Get("Origin") != "" || r.Header.Get("Referer") != "" {
		writeError(w, paddock.Errorf(paddock.CodeForbidden, "requests from web pages are refused"))
		return true
	}
	if !hostAllowed(r.Host, tcp) {
		writeError(w, paddock.Errorf(paddock.CodeForbidden, "host %q is not allowed", r.Host))
		return true
	}
	return false
}

func hostAllowed(host string, tcp bool) bool {
	h := host
	if hh, port, err := net.SplitHostPort(host); err == nil {
		// SplitHostPort takes any port: "127.0.0.1:4567.evil.example" is
		// no loopback host, whatever its first part says.
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return false
		}
		h = hh
	}
	switch h {
	case "localhost", "127.0.0.1", "::1", "[::1]":
		return true
	case "paddock", "":
		return !tcp
	}
	return false
}

// openAPI is the checked-in description of /v1; a test holds it and the
// routes to each other.
//
//go:embed openapi.json
var openAPI []byte

func intParam(v, name string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, paddock.Errorf(paddock.CodeBadRequest, "%s must be a non-negative integer", name)
	}
	return n, nil
}

func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, paddock.Errorf(paddock.CodeBadRequest, "%s must be true or false", name)
	}
	return b, nil
}

func nonNil[T any](xs []T, err error) ([]T, error) {
	if xs == nil {
		xs = []T{}
	}
	return xs, err
}

// readObject reads a body that must be one JSON object (a tool's arguments),
// capped at MaxBody. An empty body is {}.
func readObject(r *http.Request) (json.RawMessage, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "cannot read the request body")
	}
	if len(body) > MaxBody {
		return nil, paddock.Errorf(paddock.CodeTooLarge, "request body is larger than %d bytes", MaxBody)
	}
	trimmed := strings.TrimSpace(string(body))
	if trimmed == "" {
		return json.RawMessage("{}"), nil
	}
	if !strings.HasPrefix(trimmed, "{") || !json.Valid(body) {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "the body must be one JSON object")
	}
	if err := strictjson.Check(body); err != nil {
		return nil, badJSON(err)
	}
	return json.RawMessage(body), nil
}

// decode reads one JSON object strictly (see package strictjson): only
// known fields, spelled as they are, each once, in UTF-8. An empty body is
// an empty object.
func decode(r *http.Request, v any) error { return decodeN(r, v, MaxBody) }

// decodeN is decode with a body of at most limit bytes.
func decodeN(r *http.Request, v any, limit int64) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return paddock.Errorf(paddock.CodeBadRequest, "cannot read the request body")
	}
	if int64(len(body)) > limit {
		return paddock.Errorf(paddock.CodeTooLarge, "request body is larger than %d bytes", limit)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if err := strictjson.Unmarshal(body, v); err != nil {
		return badJSON(err)
	}
	return nil
}

type envelope struct {
	OK    bool           `json:"ok"`
	Data  any            `json:"data,omitempty"`
	Error *paddock.Error `json:"error,omitempty"`
}

func writeData(w http.ResponseWriter, status int, data any) {
	writeJSON(w, status, envelope{OK: true, Data: data})
}

func writeError(w http.ResponseWriter, err error) {
	var pe *paddock.Error
	if !errors.As(err, &pe) {
		pe = &paddock.Error{Code: paddock.CodeInternal, Message: "internal error"}
	}
	if pe.Code == paddock.CodeUnauthorized {
		// A 401 says how to authenticate (RFC 9110, 11.6.1).
		w.Header().Set("WWW-Authenticate", `Bearer realm="paddock"`)
	}
	writeJSON(w, Status(pe.Code), envelope{Error: pe})
}

// writeJSON answers with v, passed through the redaction funnel: no
// credential shape leaves the daemon in an answer, whatever its source.
// The answer says its length: its caller has it whole once it is
// flushed, before its handler returns (serve's work after the answer).
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	body := redact.Shapes(buf.Bytes())
	if m, ok := w.(*secretMasker); ok {
		// Masked here, where its length is known.
		body, w = m.red.Secrets(body), m.ResponseWriter
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// apiBase is what every concern's handlers share: how a failed answer is
// written (an internal error logged under a correlation id), and the
// funnel that masks the answers about a run by its declared secrets. Who
// calls (actor, and a run token's scope) is the request's own.
type apiBase struct {
	logger *slog.Logger // nil: slog's default
	// redactors masks a run's declared secrets: the Broker's; without
	// one no answer is masked by a run's secrets.
	redactors redactors
}

// redactors gives a run's redactor (Broker has it).
type redactors interface {
	Redactor(ctx context.Context, id string) (*redact.Redactor, error)
}

// base is what s's handlers share.
func (s *Server) base() *apiBase { return &apiBase{logger: s.Logger, redactors: s.Broker} }

func (a *apiBase) log() *slog.Logger {
	if a.logger == nil {
		return slog.Default()
	}
	return a.logger
}

// fail answers with err (see apiBase.fail).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) { s.base().fail(w, r, err) }

// fail answers with err. An internal error is logged in full under a fresh
// correlation id, and only the id goes to the client.
func (a *apiBase) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := paddock.ErrorCode(err)
	if code == paddock.CodeInternal {
		var b [6]byte
		rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		a.log().Error("request failed", "method", r.Method, "path", r.URL.Path, "correlation_id", id, "err", err)
		pe := &paddock.Error{Code: paddock.CodeInternal, Message: fmt.Sprintf("%s (correlation id %s; details are in the daemon log)", paddock.ErrorMessage(err), id)}
		pe.WithDetail("correlation_id", id)
		var inner *paddock.Error
		if errors.As(err, &inner) && inner.Code == paddock.CodeInternal && inner.Message != "" {
			pe.Message = fmt.Sprintf("%s (correlation id %s; details are in the daemon log)", inner.Message, id)
		}
		if paddock.Undone(err) {
			pe.WithDetail(paddock.DetailDone, false) // nothing was done: the client may call again
		}
		writeError(w, pe)
		return
	}
	writeError(w, err)
}
