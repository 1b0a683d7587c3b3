package httpapi

import (
	"net/http"
	"time"

	"github.com/paddock-dev/paddock"
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
	// gated: every effect of call passes through the broker, which waits
	// there for the call's idempotency key to be claimed
	// (paddock.AwaitClaim): the claim is made while the broker reads the
	// run, not before (keyed).
	gated bool
}

func reply(fn func(*http.Request) (any, error)) handler   { return handler{call: fn} }
func command(fn func(*http.Request) (any, error)) handler { return handler{call: fn, unbounded: true} }

// gated is h for a call whose every effect waits in the broker for its
// idempotency key's claim (paddock.AwaitClaim).
func gated(h handler) handler {
	h.gated = true
	return h
}
func stream(fn func(http.ResponseWriter, *http.Request)) handler {
	return handler{stream: fn}
}

// handlers are the routes' handlers, one type per concern, each holding
// only the services its routes call (and the shared apiBase, if it fails
// or logs on its own). A Server makes them anew, from its fields, each
// time it makes an http.Handler (mux).
type handlers struct {
	api      *apiBase
	authz    authz
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
	who      principalsHandlers
}

// handlers gives each concern's handlers what they call of s.
func (s *Server) handlers() *handlers {
	api := s.base()
	return &handlers{api: api, authz: authz{runs: s.Runs, flows: s.Flows},
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
		who:      principalsHandlers{principals: s.Principals},
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
		{"GET", "/metrics", admin, http.StatusOK, stream(h.daemon.metrics)},
		{"GET", "/v1/status", viewer, http.StatusOK, reply(h.daemon.daemonStatus)},
		{"GET", "/v1/doctor", viewer, http.StatusOK, reply(h.daemon.doctorReport)},
		{"POST", "/v1/gc", admin, http.StatusOK, reply(h.daemon.gc)},
		{"POST", "/v1/ui/login", viewer, http.StatusCreated, reply(h.ui.uiLogin)},
		{"GET", "/v1/bundle-key", viewer, http.StatusOK, reply(h.bundles.bundleKey)},
		{"GET", "/v1/queue", viewer, http.StatusOK, reply(h.queue.listQueue)},
		{"POST", "/v1/import", admin, http.StatusCreated, stream(h.bundles.importBundle)},
		{"GET", "/v1/nodes", viewer, http.StatusOK, reply(h.cluster.nodes)},
		{"GET", "/v1/events/stream", viewer, http.StatusOK, stream(h.notices.stream)},

		{"POST", "/v1/projects", admin, http.StatusCreated, reply(h.projects.addProject)},
		{"GET", "/v1/projects", viewer, http.StatusOK, reply(h.projects.listProjects)},
		{"GET", "/v1/projects/{name}", viewer, http.StatusOK, reply(h.projects.project)},
		{"PATCH", "/v1/projects/{name}", admin, http.StatusOK, reply(h.projects.setProject)},
		{"DELETE", "/v1/projects/{name}", admin, http.StatusOK, reply(h.projects.removeProject)},
		{"POST", "/v1/projects/{name}/unlock", admin, http.StatusOK, reply(h.projects.unlock)},
		{"GET", "/v1/projects/{name}/manifest", viewer, http.StatusOK, reply(h.verify.projectManifest)},
		{"GET", "/v1/projects/{name}/checkout", viewer, http.StatusOK, reply(h.projects.projectCheckout)},

		{"POST", "/v1/runs", orchestrator, http.StatusCreated, reply(h.runs.create)},
		{"POST", "/v1/bootstrap", orchestrator, http.StatusCreated, reply(h.jobs.bootstrap)},
		{"GET", "/v1/runs", viewer, http.StatusOK, reply(h.runs.listRuns)},
		{"GET", "/v1/runs/{id}", agentViews, http.StatusOK, reply(h.runs.run)},
		{"DELETE", "/v1/runs/{id}", orchestrator, http.StatusOK, reply(h.runs.remove)},
		{"POST", "/v1/runs/{id}/retain", orchestrator, http.StatusOK, reply(h.runs.retain)},
		{"POST", "/v1/runs/{id}/reject", abandons, http.StatusOK, reply(h.runs.reject)},
		{"POST", "/v1/runs/{id}/review", orchestrator, http.StatusCreated, reply(h.runs.review)},
		{"POST", "/v1/runs/{id}/fork", orchestrator, http.StatusCreated, reply(h.runs.fork)},
		{"POST", "/v1/runs/{id}/checkpoint", agentDrives, http.StatusOK, reply(h.runs.checkpoint)},
		{"POST", "/v1/runs/{id}/resume", agentDrives, http.StatusOK, reply(h.runs.resume)},
		{"POST", "/v1/runs/{id}/adopt", admin, http.StatusOK, reply(h.cluster.adopt)},
		{"GET", "/v1/runs/{id}/artifacts/{kind}", agentViews, http.StatusOK, reply(h.jobs.artifact)},
		{"GET", "/v1/runs/{id}/events", agentViews, http.StatusOK, reply(h.runs.events)},
		{"GET", "/v1/runs/{id}/events/stream", agentViews, http.StatusOK, stream(h.runs.eventStream)},

		{"GET", "/v1/runs/{id}/tools", agentViews, http.StatusOK, reply(h.broker.tools)},
		{"POST", "/v1/runs/{id}/tools/{name}", agentDrives, http.StatusOK, gated(reply(h.broker.callTool))},
		{"POST", "/v1/runs/{id}/inbox", orchestrator, http.StatusOK, reply(h.broker.deliver)},
		{"POST", "/v1/runs/{id}/exec", agentDrives, http.StatusOK, gated(command(h.broker.exec))},
		{"POST", "/v1/runs/{id}/exec/stream", agentDrives, http.StatusOK, stream(h.broker.execStream)},
		{"POST", "/v1/runs/{id}/exec/attach", agentDrives, http.StatusSwitchingProtocols, stream(h.broker.execAttach)},
		{"POST", "/v1/runs/{id}/jobs", agentDrives, http.StatusAccepted, reply(h.jobs.startJob)},
		{"GET", "/v1/runs/{id}/jobs", agentViews, http.StatusOK, reply(h.jobs.listJobs)},
		{"GET", "/v1/runs/{id}/status", agentViews, http.StatusOK, reply(h.jobs.jobStatus)},
		{"GET", "/v1/runs/{id}/jobs/{job}", agentViews, http.StatusOK, reply(h.jobs.job)},
		{"POST", "/v1/runs/{id}/jobs/{job}/cancel", agentDrives, http.StatusOK, reply(h.jobs.cancelJob)},

		{"GET", "/v1/runs/{id}/changeset", agentViews, http.StatusOK, reply(h.changes.changeSet)},
		{"GET", "/v1/runs/{id}/changeset/diff", viewer, http.StatusOK, stream(h.changes.changeSetDiff)},
		{"GET", "/v1/runs/{id}/bundle", viewer, http.StatusOK, stream(h.bundles.bundle)},
		{"GET", "/v1/runs/{id}/changeset/blame", viewer, http.StatusOK, reply(h.changes.blame)},
		{"POST", "/v1/runs/{id}/submit", agentDrives, http.StatusOK, reply(h.changes.submit)},
		{"POST", "/v1/runs/{id}/approve", reviewer, http.StatusOK, reply(h.changes.approve)},
		{"POST", "/v1/runs/{id}/apply", reviewer, http.StatusOK, reply(h.changes.apply)},
		{"POST", "/v1/runs/{id}/undo", reviewer, http.StatusOK, reply(h.changes.undo)},
		{"POST", "/v1/runs/{id}/queue", reviewer, http.StatusCreated, reply(h.queue.queueAdd)},
		{"GET", "/v1/runs/{id}/queue", viewer, http.StatusOK, reply(h.queue.queueEntry)},
		{"DELETE", "/v1/runs/{id}/queue", reviewer, http.StatusOK, reply(h.queue.queueRemove)},
		{"POST", "/v1/runs/{id}/queue/undo", reviewer, http.StatusOK, reply(h.queue.queueUndo)},

		{"GET", "/v1/runs/{id}/capabilities", agentViews, http.StatusOK, reply(h.broker.capabilities)},
		{"POST", "/v1/runs/{id}/verify", agentDrives, http.StatusOK, command(h.verify.verify)},
		{"GET", "/v1/runs/{id}/requests", agentViews, http.StatusOK, reply(h.broker.accessRequests)},
		{"POST", "/v1/runs/{id}/requests", agentDrives, http.StatusCreated, reply(h.broker.requestAccess)},
		{"POST", "/v1/runs/{id}/requests/{request}/grant", reviewer, http.StatusOK, reply(h.broker.grant)},
		{"POST", "/v1/runs/{id}/requests/{request}/deny", reviewer, http.StatusOK, reply(h.broker.deny)},

		// MCP's streamable HTTP transport: one endpoint, three methods (a
		// message, the server's stream, the session's end).
		{"POST", "/v1/runs/{id}/mcp", agentDrives, http.StatusOK, stream(h.broker.mcp)},
		{"GET", "/v1/runs/{id}/mcp", agentDrives, http.StatusOK, stream(h.broker.mcp)},
		{"DELETE", "/v1/runs/{id}/mcp", agentDrives, http.StatusNoContent, stream(h.broker.mcp)},

		{"POST", "/v1/flows", orchestrator, http.StatusCreated, reply(h.flows.startFlow)},
		{"GET", "/v1/flows", viewer, http.StatusOK, reply(h.flows.listFlows)},
		{"GET", "/v1/flows/{flow}", viewer, http.StatusOK, reply(h.flows.flow)},
		{"POST", "/v1/runs/{id}/menu/{event}", picks, http.StatusOK, reply(h.flows.pickEvent)},

		{"GET", "/v1/whoami", anyone, http.StatusOK, reply(h.who.whoami)},
		{"POST", "/v1/principals", admin, http.StatusCreated, reply(h.who.add)},
		{"GET", "/v1/principals", admin, http.StatusOK, reply(h.who.list)},
		{"GET", "/v1/principals/{name}", admin, http.StatusOK, reply(h.who.get)},
		{"PATCH", "/v1/principals/{name}", admin, http.StatusOK, reply(h.who.set)},
		{"DELETE", "/v1/principals/{name}", admin, http.StatusOK, reply(h.who.remove)},
		{"POST", "/v1/tokens", admin, http.StatusCreated, reply(h.who.createToken)},
		{"GET", "/v1/tokens", admin, http.StatusOK, reply(h.who.tokens)},
		{"DELETE", "/v1/tokens/{token}", admin, http.StatusOK, reply(h.who.revokeToken)},

		{"GET", "/v1/agents", viewer, http.StatusOK, reply(h.projects.agents)},
		{"POST", "/v1/agents", admin, http.StatusCreated, reply(h.projects.addAgent)},
		{"GET", "/v1/agents/{name}", viewer, http.StatusOK, reply(h.projects.agent)},
		{"DELETE", "/v1/agents/{name}", admin, http.StatusOK, reply(h.projects.removeAgent)},
	}
}

// RouteInfo describes one route of the API.
type RouteInfo struct {
	Method string // GET, POST, …
	Path   string // as in openapi.json: /v1/runs/{id}
	Status int    // on success
	// RunToken: a run's own token reaches it (on its own run).
	RunToken bool
	// Roles are the principals' roles that may call it (the operator,
	// who is no principal, calls every route); Public: anyone the guard
	// lets in, whoever they are.
	Roles  []paddock.Role
	Public bool
}

// Routes lists the API's routes, in the order of the table.
func Routes() []RouteInfo {
	// The table's rows, without handlers to call.
	routes := (&handlers{}).routes()
	out := make([]RouteInfo, len(routes))
	for i, rt := range routes {
		out[i] = RouteInfo{Method: rt.method, Path: rt.path, Status: rt.status, RunToken: rt.who.agent(), Roles: rt.who.roles(), Public: rt.who == anyone}
	}
	return out
}

// mux serves the table, with s's handlers; what no route matches is an
// envelope's not_found.
func (s *Server) mux() http.Handler {
	h := s.handlers()
	mux := http.NewServeMux()
	for _, rt := range h.routes() {
		// A key is read only once the route admits its caller (keyed): a
		// caller it does not admit is refused as without one, and nothing
		// of its call is read whole or kept.
		serve := s.keyed(rt.h.gated, func(r *http.Request) error { return h.authz.admits(&rt, r) },
			func(w http.ResponseWriter, r *http.Request, err error) { h.api.refuse(&rt, w, r, err) },
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.api.serve(&rt, &h.authz, w, r) }))
		if s.Observer == nil {
			mux.HandleFunc(rt.method+" "+rt.path, func(w http.ResponseWriter, r *http.Request) {
				spanRun(r)
				serve.ServeHTTP(w, r)
			})
			continue
		}
		mux.HandleFunc(rt.method+" "+rt.path, func(w http.ResponseWriter, r *http.Request) {
			spanRun(r)
			start, sw := time.Now(), &statusWriter{ResponseWriter: w}
			serve.ServeHTTP(sw, r)
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

// refuse answers a caller rt does not admit: through the run's funnel,
// but on a stream's route (its answers are masked as they stream).
func (a *apiBase) refuse(rt *route, w http.ResponseWriter, r *http.Request, err error) {
	if rt.h.stream == nil {
		w = a.runFunnel(w, r)
	}
	a.fail(w, r, err)
}

// serve answers r by rt's handler: through the run's funnel, once rt
// admits the caller (or keyed did) and the seq rule holds.
func (a *apiBase) serve(rt *route, az *authz, w http.ResponseWriter, r *http.Request) {
	if !admittedBefore(r) {
		if err := az.admits(rt, r); err != nil {
			a.refuse(rt, w, r, err)
			return
		}
	}
	if rt.h.stream != nil {
		rt.h.stream(w, r)
		return
	}
	// The work the call leaves for after its answer (the look at what a
	// command changed) begins once the answer is flushed: the answer's
	// last steps, and its caller's reading of it, keep the processors. It
	// begins if the call panics too (it may hold a run's lock).
	ctx, answered := paddock.WithAnswerFirst(r.Context())
	defer answered.Answered()
	a.answer(rt, w, r.WithContext(ctx))
	http.NewResponseController(w).Flush()
}

// answer makes rt's call and writes its answer.
func (a *apiBase) answer(rt *route, w http.ResponseWriter, r *http.Request) {
	w = a.runFunnel(w, r)
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
