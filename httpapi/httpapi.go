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
// success and its handler. The server serves the daemon's services, one
// narrow interface per concern (service.go: Projects, Runs, Jobs, Broker,
// Changes, …), each holding only the calls its routes make: the daemon's
// lifecycle.Manager provides them, a test gives the fakes it needs.
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
	"os/user"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/strictjson"
	"github.com/paddock-dev/paddock/tools"
	"github.com/paddock-dev/paddock/ui"
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

// Server is the HTTP API of one daemon.
type Server struct {
	// The services the routes call, one per concern (see service.go): the
	// daemon's lifecycle.Manager's. A route calls only its concern's, so a
	// server may leave out those whose routes it is not asked (a test);
	// calling one of those panics. Without Jobs, no run token is admitted;
	// without Broker, no answer is masked by a run's declared secrets (the
	// funnel's redactor is the broker's).
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
)

// operatorOnly refuses what only the operator may ask of a command, when a
// run's own token asks: to run with less confinement than this machine can
// enforce. The network a command gets is the service's to decide for every
// way an agent reaches exec (lifecycle's agentExec): none unless it asks,
// and never above its definition's ceiling.
func (s *Server) operatorOnly(r *http.Request, req *paddock.ExecRequest) error {
	if _, agent := r.Context().Value(scopeKey).(string); !agent {
		return nil
	}
	if req.AllowDegraded {
		return paddock.Errorf(paddock.CodeForbidden, "allow_degraded is the operator's decision, not the agent's")
	}
	if req.Session {
		return paddock.Errorf(paddock.CodeForbidden, "session is the operator's: an agent's commands are commands of its session, with their own limits")
	}
	return nil
}

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

// Handler returns the API for the unix socket.
func (s *Server) Handler() http.Handler { return s.guard(s.forward(s.mux()), false) }

// TCPHandler returns the API for a loopback TCP listener: it also requires the token.
func (s *Server) TCPHandler() http.Handler { return s.guard(s.forward(s.mux()), true) }

func (s *Server) log() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

func (s *Server) guard(next http.Handler, tcp bool) http.Handler {
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
		// A review page's session is the operator's, checked in browserCall.
		if !browser && r.URL.Path != "/healthz" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			switch {
			case !ok && tcp:
				writeError(w, paddock.Errorf(paddock.CodeUnauthorized, "a valid bearer token is required on TCP (it is in the state directory's token file)"))
				return
			case !ok:
				// The unix socket's 0600 mode is the operator's credential.
			case s.Token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.Token)) == 1:
				// The daemon's token: the operator.
			case strings.HasPrefix(got, "pdk_run_") && s.Jobs != nil:
				ctx, err := s.asRunsAgent(r.Context(), got)
				if err != nil {
					writeError(w, err)
					return
				}
				r = r.WithContext(ctx)
			default:
				writeError(w, paddock.Errorf(paddock.CodeUnauthorized, "unknown token: neither the daemon's (the token file in its state directory) nor a live run's"))
				return
			}
		}
		if r.Header.Get(paddock.AgentHeader) != "" {
			// An operator's client acting for the run's agent (paddock mcp).
			r = r.WithContext(paddock.WithAgent(r.Context()))
		}
		next.ServeHTTP(w, r)
	})
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

// SSEHeartbeat is how often an idle event stream sends a comment, so that
// proxies and clients see it alive.
var SSEHeartbeat = 15 * time.Second

// changeSetDiff streams a change set's whole diff from its file: however
// large it is, it never sits in memory. The file is masked already (see
// changeset.MaskDiff); the stream passes the run's funnel all the same, as
// every answer does.
func (s *Server) changeSetDiff(w http.ResponseWriter, r *http.Request) {
	red, err := s.Broker.Redactor(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d, hash, err := s.Changes.ChangeSetDiff(r.Context(), r.PathValue("id"), r.URL.Query().Get("hash"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer d.Close()
	http.NewResponseController(w).SetWriteDeadline(time.Time{}) // a large diff outlives the write timeout
	w.Header().Set("Content-Type", "text/x-diff; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set(paddock.ChangeSetHashHeader, hash)
	w.WriteHeader(http.StatusOK)
	mask := red.NewWriter(w)
	if _, err := io.Copy(mask, d); err == nil {
		mask.Close()
	}
}

// eventStream serves a run's events as Server-Sent Events: each event's id
// is its seq, so a client that reconnects with Last-Event-ID (or ?after=)
// gets every later event once, in order.
func (s *Server) eventStream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after, err := intParam(r.URL.Query().Get("after"), "after")
	if err != nil {
		writeError(w, err)
		return
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		if after, err = intParam(last, "Last-Event-ID"); err != nil {
			writeError(w, err)
			return
		}
	}
	if _, err := s.Runs.Events(r.Context(), id, after, 1); err != nil {
		s.fail(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	for r.Context().Err() == nil {
		ctx, cancel := context.WithTimeout(r.Context(), SSEHeartbeat)
		evs, err := s.Runs.WaitEvents(ctx, id, after, 500)
		cancel()
		if err != nil {
			return
		}
		if len(evs) == 0 {
			io.WriteString(w, ": keep-alive\n\n")
		}
		for _, e := range evs {
			data, _ := json.Marshal(e)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, redact.Shapes(data))
			after = e.Seq
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// mcp hands a run's MCP request to the MCP server (s.MCP), for a caller
// the route admitted (the run's token on its own run, or the operator) and
// a run that exists. What it writes passes the run's funnel, one message
// (an SSE event, a JSON answer) per write; a session's stream lasts as
// long as the session, past the server's write timeout.
func (s *Server) mcp(w http.ResponseWriter, r *http.Request) {
	if s.MCP == nil {
		writeError(w, paddock.Errorf(paddock.CodeUnsupported, "this daemon serves no MCP over HTTP; use paddock mcp RUN"))
		return
	}
	if _, err := s.Broker.Run(r.Context(), r.PathValue("id")); err != nil {
		s.fail(w, r, err)
		return
	}
	red, err := s.Broker.Redactor(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.MCP.ServeHTTP(&mcpMasker{ResponseWriter: w, red: red}, r)
}

// mcpMasker masks credential shapes and the run's declared secrets in
// every write of an MCP answer.
type mcpMasker struct {
	http.ResponseWriter
	red *redact.Redactor
}

func (m *mcpMasker) Unwrap() http.ResponseWriter { return m.ResponseWriter }

func (m *mcpMasker) Write(p []byte) (int, error) {
	if _, err := m.ResponseWriter.Write(m.red.Secrets(redact.Shapes(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// StreamLine is one line of POST /v1/runs/{id}/exec/stream, an NDJSON
// stream: output chunks as they come (base64, masked), then one line with the
// result or the error.
type StreamLine struct {
	Stream string              `json:"stream,omitempty"` // stdout or stderr
	Data   []byte              `json:"data,omitempty"`   // base64 in JSON
	Result *paddock.ExecResult `json:"result,omitempty"`
	Error  *paddock.Error      `json:"error,omitempty"`
}

// execStream runs a command and streams its output. Errors before the
// command starts are ordinary envelopes; after that they end the stream.
func (s *Server) execStream(w http.ResponseWriter, r *http.Request) {
	var req paddock.ExecRequest
	if err := decodeN(r, &req, maxExecBody); err != nil {
		writeError(w, err)
		return
	}
	if err := s.operatorOnly(r, &req); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// The stream lasts as long as the command (its wall limit bounds it);
	// each line must still be taken within WriteStall.
	rc := http.NewResponseController(w)
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	send := func(line StreamLine) {
		mu.Lock()
		defer mu.Unlock()
		rc.SetWriteDeadline(time.Now().Add(WriteStall))
		enc.Encode(line)
		rc.Flush()
	}
	chunk := func(name string) io.Writer {
		return writerFunc(func(p []byte) (int, error) {
			send(StreamLine{Stream: name, Data: bytes.Clone(p)})
			return len(p), nil
		})
	}
	res, err := s.Broker.ExecStream(r.Context(), r.PathValue("id"), req, chunk("stdout"), chunk("stderr"))
	if err != nil {
		var pe *paddock.Error
		if !errors.As(err, &pe) || pe.Code == paddock.CodeInternal {
			s.log().Error("exec failed", "path", r.URL.Path, "err", err)
			pe = &paddock.Error{Code: paddock.CodeInternal, Message: "internal error (details are in the daemon log)"}
		}
		send(StreamLine{Error: pe})
		return
	}
	res.Stdout, res.Stderr = "", "" // already streamed
	send(StreamLine{Result: res})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// events answers GET /v1/runs/{id}/events?after=SEQ&limit=N&wait=DURATION.
// With wait, an empty answer is held until an event arrives or wait passes.
func (s *Server) events(r *http.Request) (any, error) {
	q := r.URL.Query()
	after, err := intParam(q.Get("after"), "after")
	if err != nil {
		return nil, err
	}
	limit, err := intParam(q.Get("limit"), "limit")
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	if w := q.Get("wait"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d < 0 {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "wait must be a duration such as 30s")
		}
		ctx, cancel := context.WithTimeout(r.Context(), min(d, MaxWait))
		defer cancel()
		return s.Runs.WaitEvents(ctx, id, after, int(limit))
	}
	return s.Runs.Events(r.Context(), id, after, int(limit))
}

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
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(redact.Shapes(buf.Bytes()))
}

// fail answers with err. An internal error is logged in full under a fresh
// correlation id, and only the id goes to the client.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := paddock.ErrorCode(err)
	if code == paddock.CodeInternal {
		var b [6]byte
		rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		s.log().Error("request failed", "method", r.Method, "path", r.URL.Path, "correlation_id", id, "err", err)
		pe := &paddock.Error{Code: paddock.CodeInternal, Message: fmt.Sprintf("%s (correlation id %s; details are in the daemon log)", paddock.ErrorMessage(err), id)}
		pe.WithDetail("correlation_id", id)
		var inner *paddock.Error
		if errors.As(err, &inner) && inner.Code == paddock.CodeInternal && inner.Message != "" {
			pe.Message = fmt.Sprintf("%s (correlation id %s; details are in the daemon log)", inner.Message, id)
		}
		writeError(w, pe)
		return
	}
	writeError(w, err)
}
