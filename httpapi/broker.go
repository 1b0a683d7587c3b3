package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/tools"
)

// Broker is what a run may do and how its answers are masked: commands,
// working tools, its inbox, its capabilities and access requests, and its
// redactor (the funnel every answer about a run passes).
type Broker interface {
	// Run is the broker's look at a run (the MCP route's: the run must
	// exist before its server is reached).
	Run(ctx context.Context, id string) (*paddock.Run, error)

	Exec(ctx context.Context, id string, req paddock.ExecRequest) (*paddock.ExecResult, error)
	ExecStream(ctx context.Context, id string, req paddock.ExecRequest, stdout, stderr io.Writer) (*paddock.ExecResult, error)
	ExecAttach(ctx context.Context, id string, req paddock.ExecRequest, streams paddock.ExecIO) (*paddock.ExecResult, error)

	// Tools lists the working tools a run is offered; CallTool runs one
	// with its arguments (one JSON object, read strictly already).
	Tools(ctx context.Context, id string) ([]*tools.Tool, error)
	CallTool(ctx context.Context, id, name string, args json.RawMessage) (any, error)
	// Deliver writes body into a run's inbox, within the daemon's limits.
	Deliver(ctx context.Context, id, name string, body io.Reader, lim tools.InboxLimits) (*paddock.InboxResult, error)

	Capabilities(ctx context.Context, id string) (*paddock.Capabilities, error)
	RequestAccess(ctx context.Context, id string, in paddock.AccessRequestInput) (*paddock.AccessRequest, error)
	AccessRequests(ctx context.Context, id string) ([]*paddock.AccessRequest, error)
	// DecideAccess grants or denies a run's pending access request: only
	// an operator's route reaches it (a run token never grants).
	DecideAccess(ctx context.Context, id, reqID string, grant bool, by, note string) (*paddock.AccessRequest, error)

	// Redactor masks a run's declared secrets (and credential shapes).
	Redactor(ctx context.Context, id string) (*redact.Redactor, error)
}

// brokerHandlers answer what a run may do (broker.go, attach.go): its
// commands, tools, inbox (within inbox), access requests, and its MCP
// server (mcpHandler, the daemon's; nil serves none).
type brokerHandlers struct {
	broker     Broker
	inbox      tools.InboxLimits
	mcpHandler http.Handler
	api        *apiBase
}

func (h *brokerHandlers) tools(r *http.Request) (any, error) {
	return h.broker.Tools(r.Context(), r.PathValue("id"))
}

func (h *brokerHandlers) callTool(r *http.Request) (any, error) {
	args, err := readObject(r)
	if err != nil {
		return nil, err
	}
	return h.broker.CallTool(r.Context(), r.PathValue("id"), r.PathValue("name"), args)
}

func (h *brokerHandlers) deliver(r *http.Request) (any, error) {
	lim := h.inbox
	if lim.MaxFile == 0 {
		lim = tools.DefaultInboxLimits
	}
	if r.ContentLength > lim.MaxFile {
		return nil, paddock.Errorf(paddock.CodeTooLarge, "inbox: the file is larger than %d bytes; nothing was written", lim.MaxFile)
	}
	body := http.MaxBytesReader(nil, r.Body, lim.MaxFile+1)
	return h.broker.Deliver(r.Context(), r.PathValue("id"), r.URL.Query().Get("name"), body, lim)
}

func (h *brokerHandlers) exec(r *http.Request) (any, error) {
	var req paddock.ExecRequest
	if err := decodeN(r, &req, maxExecBody); err != nil {
		return nil, err
	}
	if err := operatorOnly(r, &req); err != nil {
		return nil, err
	}
	return h.broker.Exec(r.Context(), r.PathValue("id"), req)
}

func (h *brokerHandlers) capabilities(r *http.Request) (any, error) {
	return h.broker.Capabilities(r.Context(), r.PathValue("id"))
}

func (h *brokerHandlers) accessRequests(r *http.Request) (any, error) {
	return nonNil(h.broker.AccessRequests(r.Context(), r.PathValue("id")))
}

func (h *brokerHandlers) requestAccess(r *http.Request) (any, error) {
	var in paddock.AccessRequestInput
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	return h.broker.RequestAccess(r.Context(), r.PathValue("id"), in)
}

func (h *brokerHandlers) grant(r *http.Request) (any, error) { return h.decideAccess(r, true) }
func (h *brokerHandlers) deny(r *http.Request) (any, error)  { return h.decideAccess(r, false) }

func (h *brokerHandlers) decideAccess(r *http.Request, grant bool) (any, error) {
	var req paddock.DecideRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return h.broker.DecideAccess(r.Context(), r.PathValue("id"), r.PathValue("request"), grant, actor(r), req.Note)
}

// operatorOnly refuses what only the operator (or an admin) may ask of a
// command, when a run's own token or another principal asks: to run with less confinement than this machine can
// enforce. The network a command gets is the service's to decide for every
// way an agent reaches exec (lifecycle's agentExec): none unless it asks,
// and never above its definition's ceiling.
func operatorOnly(r *http.Request, req *paddock.ExecRequest) error {
	if _, agent := r.Context().Value(scopeKey).(string); !agent && !paddock.HeldToCeiling(r.Context()) {
		return nil
	}
	if req.AllowDegraded {
		return paddock.Errorf(paddock.CodeForbidden, "allow_degraded is the operator's (or an admin's) decision, not the agent's nor an orchestrator's").WithRule("ceiling")
	}
	if req.Session {
		return paddock.Errorf(paddock.CodeForbidden, "session is the operator's (or an admin's): an agent's commands are commands of its session, with their own limits").WithRule("ceiling")
	}
	return nil
}

// mcp hands a run's MCP request to the MCP server (mcpHandler), for a caller
// the route admitted (the run's token on its own run, or the operator) and
// a run that exists. What it writes passes the run's funnel, one message
// (an SSE event, a JSON answer) per write; a session's stream lasts as
// long as the session, past the server's write timeout.
func (h *brokerHandlers) mcp(w http.ResponseWriter, r *http.Request) {
	if h.mcpHandler == nil {
		writeError(w, paddock.Errorf(paddock.CodeUnsupported, "this daemon serves no MCP over HTTP; use paddock mcp RUN"))
		return
	}
	if _, err := h.broker.Run(r.Context(), r.PathValue("id")); err != nil {
		h.api.fail(w, r, err)
		return
	}
	red, err := h.broker.Redactor(r.Context(), r.PathValue("id"))
	if err != nil {
		h.api.fail(w, r, err)
		return
	}
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	h.mcpHandler.ServeHTTP(&mcpMasker{ResponseWriter: w, red: red}, r)
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
func (h *brokerHandlers) execStream(w http.ResponseWriter, r *http.Request) {
	var req paddock.ExecRequest
	if err := decodeN(r, &req, maxExecBody); err != nil {
		writeError(w, err)
		return
	}
	if err := operatorOnly(r, &req); err != nil {
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
	// send writes one line; mask, if set, masks it first.
	send := func(line StreamLine, mask func([]byte) []byte) {
		b, _ := json.Marshal(line)
		if mask != nil {
			b = mask(b)
		}
		mu.Lock()
		defer mu.Unlock()
		rc.SetWriteDeadline(time.Now().Add(WriteStall))
		w.Write(append(b, '\n'))
		rc.Flush()
	}
	chunk := func(name string) io.Writer {
		return writerFunc(func(p []byte) (int, error) {
			send(StreamLine{Stream: name, Data: bytes.Clone(p)}, nil)
			return len(p), nil
		})
	}
	res, err := h.broker.ExecStream(r.Context(), r.PathValue("id"), req, chunk("stdout"), chunk("stderr"))
	// The last line, the result or the error (which may quote the
	// command's arguments), passes the run's funnel whole; the output's
	// lines were masked as the command wrote them.
	last := func(line StreamLine) {
		send(line, func(b []byte) []byte {
			if red, rerr := h.broker.Redactor(r.Context(), r.PathValue("id")); rerr == nil {
				b = red.Secrets(b)
			}
			return redact.Shapes(b)
		})
	}
	if err != nil {
		var pe *paddock.Error
		if !errors.As(err, &pe) || pe.Code == paddock.CodeInternal {
			h.api.log().Error("exec failed", "path", r.URL.Path, "err", err)
			pe = &paddock.Error{Code: paddock.CodeInternal, Message: "internal error (details are in the daemon log)"}
		}
		last(StreamLine{Error: pe})
		return
	}
	res.Stdout, res.Stderr = "", "" // already streamed
	last(StreamLine{Result: res})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
