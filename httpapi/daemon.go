package httpapi

import (
	"context"
	"net/http"

	"github.com/paddock-dev/paddock"
)

// daemonHandlers answer about the daemon itself: its health, the API's
// description, its status, doctor and garbage collection.
type daemonHandlers struct {
	status    func() paddock.DaemonStatus
	doctor    func(context.Context) *paddock.DoctorReport // nil: unsupported
	collector Collector
	prom      http.Handler // nil: none
}

func (h *daemonHandlers) health(r *http.Request) (any, error) {
	return map[string]string{"status": "ok"}, nil
}

func (h *daemonHandlers) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI)
}

// metrics serves the daemon's Prometheus metrics (Server.Metrics).
func (h *daemonHandlers) metrics(w http.ResponseWriter, r *http.Request) {
	if h.prom == nil {
		writeError(w, paddock.Errorf(paddock.CodeUnsupported, "this daemon serves no metrics"))
		return
	}
	h.prom.ServeHTTP(w, r)
}

func (h *daemonHandlers) daemonStatus(r *http.Request) (any, error) { return h.status(), nil }

func (h *daemonHandlers) doctorReport(r *http.Request) (any, error) {
	if h.doctor == nil {
		return nil, paddock.Errorf(paddock.CodeUnsupported, "this daemon has no doctor")
	}
	return h.doctor(r.Context()), nil
}

// Collector is the daemon's garbage collection: GC finds what the records
// and the disk disagree about and, unless dryRun, cleans it.
type Collector interface {
	GC(ctx context.Context, dryRun bool) ([]paddock.Finding, error)
}

func (h *daemonHandlers) gc(r *http.Request) (any, error) {
	var req paddock.GCRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return nonNil(h.collector.GC(r.Context(), req.DryRun))
}
