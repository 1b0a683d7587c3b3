package httpapi

import (
	"net/http"
	"time"

	"github.com/paddock-dev/paddock"
)

// caller says who may call a route, beyond the guard (which lets in the
// operator and the runs' tokens).
type caller uint8

const (
	// operator: the unix socket, or the daemon's token on TCP. Deciding
	// about a run (approve, apply, reject, retain, rm) and everything
	// beyond one run are the operator's.
	operator caller = iota
	// runToken: the operator, or a run's own token on its own run: the
	// agent's side of its run.
	runToken
	// anyone the guard let in (the health check, the API's description).
	anyone
)

// handler answers a route, one of three ways.
type handler struct {
	// call answers with the data of an envelope, or an error.
	call func(*http.Request) (any, error)
	// unbounded: call runs a command, bounded by the command's own limits
	// (up to the daemon's exec_limits), not by the server's write timeout.
	unbounded bool
	// stream writes its own answer: a stream, a raw body.
	stream func(http.ResponseWriter, *http.Request)
}

func reply(fn func(*http.Request) (any, error)) handler   { return handler{call: fn} }
func command(fn func(*http.Request) (any, error)) handler { return handler{call: fn, unbounded: true} }
func stream(fn func(http.ResponseWriter, *http.Request)) handler {
	return handler{stream: fn}
}

// handlers are the routes' handlers, one type per concern, each holding
// only the services its routes call (and the shared apiBase, if it fails
// or logs on its own). A Server makes them anew, from its fields, each
// time it makes an http.Handler (mux).
type handlers struct {
	api      *apiBase
	daemon   daemonHandlers
	ui       uiHandlers
	cluster  clusterHandlers
	projects projectsHandlers
	jobs     jobsHandlers
	verify   verifyHandlers
	flows    flowsHandlers
	bundles  bundlesHandlers
	queue    queueHandlers
	runs     runsHandlers
	changes  changesHandlers
	broker   brokerHandlers
	notices  noticesHandlers
}

// handlers gives each concern's handlers what they call of s.
func (s *Server) handlers() *handlers {
	api := s.base()
	return &handlers{api: api,
		daemon:   daemonHandlers{status: s.Status, doctor: s.Doctor, collector: s.Collector, prom: s.Metrics},
		ui:       uiHandlers{sessions: s.UI, addr: s.UIAddr},
		cluster:  clusterHandlers{cluster: s.Cluster},
		projects: projectsHandlers{projects: s.Projects},
		jobs:     jobsHandlers{jobs: s.Jobs},
		verify:   verifyHandlers{verifier: s.Verifier},
		flows:    flowsHandlers{flows: s.Flows},
		bundles:  bundlesHandlers{bundles: s.Bundles, api: api},
		queue:    queueHandlers{queue: s.Queue},
		runs:     runsHandlers{runs: s.Runs, reviews: s.Reviews, forks: s.Forks, api: api},
		changes:  changesHandlers{changes: s.Changes, provenance: s.Provenance, redactors: s.Broker, api: api},
		broker:   brokerHandlers{broker: s.Broker, inbox: s.InboxLimits, mcpHandler: s.MCP, api: api},
		notices:  noticesHandlers{notices: s.Notices},
	}
}

// route is one row of the API: its method and path (a net/http pattern),
// who may call it, its status on success, and its handler.
type route struct {
	method, path string
	who          caller
	status       int
	h            handler
}

// routes is the API, served by h. The mux, the run tokens' reach and the
// statuses are all read from it; openapi.json describes exactly these
// (TestOpenAPI…).
func (h *handlers) routes() []route {
	return []route{
		{"GET", "/healthz", anyone, http.StatusOK, reply(h.daemon.health)},
		{"GET", "/v1/openapi.json", anyone, http.StatusOK, stream(h.daemon.openAPI)},
		{"GET", "/metrics", operator, http.StatusOK, stream(h.daemon.metrics)},
		{"GET", "/v1/status", operator, http.StatusOK, reply(h.daemon.daemonStatus)},
		{"GET", "/v1/doctor", operator, http.StatusOK, reply(h.daemon.doctorReport)},
		{"POST", "/v1/gc", operator, http.StatusOK, reply(h.daemon.gc)},
		{"POST", "/v1/ui/login", operator, http.StatusCreated, reply(h.ui.uiLogin)},
		{"GET", "/v1/bundle-key", operator, http.StatusOK, reply(h.bundles.bundleKey)},
		{"GET", "/v1/queue", operator, http.StatusOK, reply(h.queue.listQueue)},
		{"POST", "/v1/import", operator, http.StatusCreated, stream(h.bundles.importBundle)},
		{"GET", "/v1/nodes", operator, http.StatusOK, reply(h.cluster.nodes)},
		{"GET", "/v1/events/stream", operator, http.StatusOK, stream(h.notices.stream)},

		{"POST", "/v1/projects", operator, http.StatusCreated, reply(h.projects.addProject)},
		{"GET", "/v1/projects", operator, http.StatusOK, reply(h.projects.listProjects)},
		{"GET", "/v1/projects/{name}", operator, http.StatusOK, reply(h.projects.project)},
		{"PATCH", "/v1/projects/{name}", operator, http.StatusOK, reply(h.projects.setProject)},
		{"DELETE", "/v1/projects/{name}", operator, http.StatusOK, reply(h.projects.removeProject)},
		{"POST", "/v1/projects/{name}/unlock", operator, http.StatusOK, reply(h.projects.unlock)},
		{"GET", "/v1/projects/{name}/manifest", operator, http.StatusOK, reply(h.verify.projectManifest)},
		{"GET", "/v1/projects/{name}/checkout", operator, http.StatusOK, reply(h.projects.projectCheckout)},

		{"POST", "/v1/runs", operator, http.StatusCreated, reply(h.runs.create)},
		{"POST", "/v1/bootstrap", operator, http.StatusCreated, reply(h.jobs.bootstrap)},
		{"GET", "/v1/runs", operator, http.StatusOK, reply(h.runs.listRuns)},
		{"GET", "/v1/runs/{id}", runToken, http.StatusOK, reply(h.runs.run)},
		{"DELETE", "/v1/runs/{id}", operator, http.StatusOK, reply(h.runs.remove)},
		{"POST", "/v1/runs/{id}/retain", operator, http.StatusOK, reply(h.runs.retain)},
		{"POST", "/v1/runs/{id}/reject", operator, http.StatusOK, reply(h.runs.reject)},
		{"POST", "/v1/runs/{id}/review", operator, http.StatusCreated, reply(h.runs.review)},
		{"POST", "/v1/runs/{id}/fork", operator, http.StatusCreated, reply(h.runs.fork)},
		{"POST", "/v1/runs/{id}/checkpoint", runToken, http.StatusOK, reply(h.runs.checkpoint)},
		{"POST", "/v1/runs/{id}/resume", runToken, http.StatusOK, reply(h.runs.resume)},
		{"POST", "/v1/runs/{id}/adopt", operator, http.StatusOK, reply(h.cluster.adopt)},
		{"GET", "/v1/runs/{id}/artifacts/{kind}", runToken, http.StatusOK, reply(h.jobs.artifact)},
		{"GET", "/v1/runs/{id}/events", runToken, http.StatusOK, reply(h.runs.events)},
		{"GET", "/v1/runs/{id}/events/stream", runToken, http.StatusOK, stream(h.runs.eventStream)},

		{"GET", "/v1/runs/{id}/tools", runToken, http.StatusOK, reply(h.broker.tools)},
		{"POST", "/v1/runs/{id}/tools/{name}", runToken, http.StatusOK, reply(h.broker.callTool)},
		{"POST", "/v1/runs/{id}/inbox", operator, http.StatusOK, reply(h.broker.deliver)},
		{"POST", "/v1/runs/{id}/exec", runToken, http.StatusOK, command(h.broker.exec)},
		{"POST", "/v1/runs/{id}/exec/stream", runToken, http.StatusOK, stream(h.broker.execStream)},
		{"POST", "/v1/runs/{id}/exec/attach", runToken, http.StatusSwitchingProtocols, stream(h.broker.execAttach)},
		{"POST", "/v1/runs/{id}/jobs", runToken, http.StatusAccepted, reply(h.jobs.startJob)},
		{"GET", "/v1/runs/{id}/jobs", runToken, http.StatusOK, reply(h.jobs.listJobs)},
		{"GET", "/v1/runs/{id}/status", runToken, http.StatusOK, reply(h.jobs.jobStatus)},
		{"GET", "/v1/runs/{id}/jobs/{job}", runToken, http.StatusOK, reply(h.jobs.job)},
		{"POST", "/v1/runs/{id}/jobs/{job}/cancel", runToken, http.StatusOK, reply(h.jobs.cancelJob)},

		{"GET", "/v1/runs/{id}/changeset", runToken, http.StatusOK, reply(h.changes.changeSet)},
		{"GET", "/v1/runs/{id}/changeset/diff", operator, http.StatusOK, stream(h.changes.changeSetDiff)},
		{"GET", "/v1/runs/{id}/bundle", operator, http.StatusOK, stream(h.bundles.bundle)},
		{"GET", "/v1/runs/{id}/changeset/blame", operator, http.StatusOK, reply(h.changes.blame)},
		{"POST", "/v1/runs/{id}/submit", runToken, http.StatusOK, reply(h.changes.submit)},
		{"POST", "/v1/runs/{id}/approve", operator, http.StatusOK, reply(h.changes.approve)},
		{"POST", "/v1/runs/{id}/apply", operator, http.StatusOK, reply(h.changes.apply)},
		{"POST", "/v1/runs/{id}/undo", operator, http.StatusOK, reply(h.changes.undo)},
		{"POST", "/v1/runs/{id}/queue", operator, http.StatusCreated, reply(h.queue.queueAdd)},
		{"GET", "/v1/runs/{id}/queue", operator, http.StatusOK, reply(h.queue.queueEntry)},
		{"DELETE", "/v1/runs/{id}/queue", operator, http.StatusOK, reply(h.queue.queueRemove)},
		{"POST", "/v1/runs/{id}/queue/undo", operator, http.StatusOK, reply(h.queue.queueUndo)},

		{"GET", "/v1/runs/{id}/capabilities", runToken, http.StatusOK, reply(h.broker.capabilities)},
		{"POST", "/v1/runs/{id}/verify", runToken, http.StatusOK, command(h.verify.verify)},
		{"GET", "/v1/runs/{id}/requests", runToken, http.StatusOK, reply(h.broker.accessRequests)},
		{"POST", "/v1/runs/{id}/requests", runToken, http.StatusCreated, reply(h.broker.requestAccess)},
		{"POST", "/v1/runs/{id}/requests/{request}/grant", operator, http.StatusOK, reply(h.broker.grant)},
		{"POST", "/v1/runs/{id}/requests/{request}/deny", operator, http.StatusOK, reply(h.broker.deny)},

		// MCP's streamable HTTP transport: one endpoint, three methods (a
		// message, the server's stream, the session's end).
		{"POST", "/v1/runs/{id}/mcp", runToken, http.StatusOK, stream(h.broker.mcp)},
		{"GET", "/v1/runs/{id}/mcp", runToken, http.StatusOK, stream(h.broker.mcp)},
		{"DELETE", "/v1/runs/{id}/mcp", runToken, http.StatusNoContent, stream(h.broker.mcp)},

		{"POST", "/v1/flows", operator, http.StatusCreated, reply(h.flows.startFlow)},
		{"GET", "/v1/flows", operator, http.StatusOK, reply(h.flows.listFlows)},
		{"GET", "/v1/flows/{flow}", operator, http.StatusOK, reply(h.flows.flow)},
		{"POST", "/v1/runs/{id}/menu/{event}", runToken, http.StatusOK, reply(h.flows.pickEvent)},

		{"GET", "/v1/agents", operator, http.StatusOK, reply(h.projects.agents)},
		{"POST", "/v1/agents", operator, http.StatusCreated, reply(h.projects.addAgent)},
		{"GET", "/v1/agents/{name}", operator, http.StatusOK, reply(h.projects.agent)},
		{"DELETE", "/v1/agents/{name}", operator, http.StatusOK, reply(h.projects.removeAgent)},
	}
}

// RouteInfo describes one route of the API.
type RouteInfo struct {
	Method string // GET, POST, …
	Path   string // as in openapi.json: /v1/runs/{id}
	Status int    // on success
	// RunToken: a run's own token reaches it (on its own run); otherwise
	// only the operator does (or anyone let in, for /healthz and
	// /v1/openapi.json).
	RunToken bool
}

// Routes lists the API's routes, in the order of the table.
func Routes() []RouteInfo {
	// The table's rows, without handlers to call.
	routes := (&handlers{}).routes()
	out := make([]RouteInfo, len(routes))
	for i, rt := range routes {
		out[i] = RouteInfo{Method: rt.method, Path: rt.path, Status: rt.status, RunToken: rt.who == runToken}
	}
	return out
}

// mux serves the table, with s's handlers; what no route matches is an
// envelope's not_found.
func (s *Server) mux() http.Handler {
	h := s.handlers()
	mux := http.NewServeMux()
	for _, rt := range h.routes() {
		if s.Observer == nil {
			mux.HandleFunc(rt.method+" "+rt.path, func(w http.ResponseWriter, r *http.Request) {
				spanRun(r)
				h.api.serve(&rt, w, r)
			})
			continue
		}
		mux.HandleFunc(rt.method+" "+rt.path, func(w http.ResponseWriter, r *http.Request) {
			spanRun(r)
			start, sw := time.Now(), &statusWriter{ResponseWriter: w}
			h.api.serve(&rt, sw, r)
			code := sw.status
			if code == 0 {
				code = http.StatusOK
			}
			s.Observer.Request(rt.method, rt.path, code, rt.h.stream != nil, time.Since(start))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, paddock.Errorf(paddock.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// serve answers r by rt's handler: through the run's funnel, once rt
// admits the caller and the seq rule holds.
func (a *apiBase) serve(rt *route, w http.ResponseWriter, r *http.Request) {
	if rt.h.stream != nil {
		if err := rt.admits(r); err != nil {
			a.fail(w, r, err)
			return
		}
		rt.h.stream(w, r)
		return
	}
	w = a.runFunnel(w, r)
	if err := rt.admits(r); err != nil {
		a.fail(w, r, err)
		return
	}
	// The seq rule: a mutating request on a run may carry ?expect_seq=N;
	// if the run moved on, it is refused.
	if v := r.URL.Query().Get("expect_seq"); v != "" && r.Method != http.MethodGet && r.PathValue("id") != "" {
		seq, err := intParam(v, "expect_seq")
		if err != nil {
			a.fail(w, r, err)
			return
		}
		r = r.WithContext(paddock.WithExpectSeq(r.Context(), r.PathValue("id"), seq))
	}
	var rc *http.ResponseController
	if rt.h.unbounded {
		// The command's own wall limit bounds it, not the server's write
		// timeout; the answer then gets a fresh one.
		rc = http.NewResponseController(w)
		rc.SetWriteDeadline(time.Time{})
	}
	data, err := rt.h.call(r)
	if rc != nil {
		rc.SetWriteDeadline(time.Now().Add(WriteStall))
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeData(w, rt.status, data)
}

// admits enforces who may call the route: a run's token reaches only its
// own run, and only the agent's side of it.
func (rt *route) admits(r *http.Request) error {
	run, ok := r.Context().Value(scopeKey).(string)
	if !ok || rt.who == anyone {
		return nil
	}
	if rt.who != runToken {
		return paddock.Errorf(paddock.CodeForbidden, "a run (its token, or its own socket) does not reach %s %s; that is the operator's", rt.method, rt.path)
	}
	if id := r.PathValue("id"); id != run {
		return paddock.Errorf(paddock.CodeRunMismatch, "this caller is run %s's agent (its token, or its own socket), not %s's", run, id)
	}
	return nil
}
