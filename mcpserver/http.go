package mcpserver

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/paddock-dev/paddock"
)

// SessionTimeout closes an HTTP session no request has used for this long.
const SessionTimeout = 30 * time.Minute

// Handler serves runs' MCP servers over streamable HTTP: the daemon's
// route /v1/runs/{id}/mcp, whose {id} names the run. Each run has its own
// server and its own sessions: a session of one run is never reached
// through another's path. Who may call is the API's business (the run's
// token or the operator), checked before Handler is reached.
type Handler struct {
	cfg Config

	mu     sync.Mutex
	runs   map[string]*httpRun
	closed bool
}

type httpRun struct {
	srv *Server
	h   *mcp.StreamableHTTPHandler
}

// NewHandler returns a Handler whose servers are made from cfg.
func NewHandler(cfg Config) *Handler {
	return &Handler{cfg: cfg, runs: map[string]*httpRun{}}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	run, err := h.server(r.Context(), r.PathValue("id"))
	if err != nil {
		http.Error(w, oneLine(err), http.StatusServiceUnavailable)
		return
	}
	run.h.ServeHTTP(w, r)
}

// server returns run id's server, made on its first request.
func (h *Handler) server(ctx context.Context, id string) (*httpRun, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, paddock.Errorf(paddock.CodeConflict, "the daemon is stopping")
	}
	if run := h.runs[id]; run != nil {
		return run, nil
	}
	srv, err := New(context.WithoutCancel(ctx), h.cfg, id)
	if err != nil {
		return nil, err
	}
	run := &httpRun{srv: srv, h: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() },
		&mcp.StreamableHTTPOptions{SessionTimeout: SessionTimeout, Logger: h.cfg.Logger})}
	h.runs[id] = run
	return run, nil
}

// Close ends every session (their streams end) and stops every run's
// watch; the daemon calls it before it stops listening.
func (h *Handler) Close() {
	h.mu.Lock()
	h.closed = true
	runs := h.runs
	h.runs = nil
	h.mu.Unlock()
	for _, run := range runs {
		for ss := range run.srv.MCP().Sessions() {
			ss.Close()
		}
		run.srv.Close()
	}
}
