package httpapi

import (
	"net/http"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/tools"
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
	call func(*Server, *http.Request) (any, error)
	// unbounded: call runs a command, bounded by the command's own limits
	// (up to the daemon's exec_limits), not by the server's write timeout.
	unbounded bool
	// stream writes its own answer: a stream, a raw body.
	stream func(*Server, http.ResponseWriter, *http.Request)
}

func reply(fn func(*Server, *http.Request) (any, error)) handler { return handler{call: fn} }
func command(fn func(*Server, *http.Request) (any, error)) handler {
	return handler{call: fn, unbounded: true}
}
func stream(fn func(*Server, http.ResponseWriter, *http.Request)) handler {
	return handler{stream: fn}
}

// route is one row of the API: its method and path (a net/http pattern),
// who may call it, its status on success, and its handler.
type route struct {
	method, path string
	who          caller
	status       int
	h            handler
}

// routes is the API. The mux, the run tokens' reach and the statuses are
// all read from it; openapi.json describes exactly these (TestOpenAPI…).
var routes = []route{
	{"GET", "/healthz", anyone, http.StatusOK, reply((*Server).health)},
	{"GET", "/v1/openapi.json", anyone, http.StatusOK, stream((*Server).openAPI)},
	{"GET", "/v1/status", operator, http.StatusOK, reply((*Server).status)},
	{"GET", "/v1/doctor", operator, http.StatusOK, reply((*Server).doctor)},
	{"POST", "/v1/gc", operator, http.StatusOK, reply((*Server).gc)},
	{"POST", "/v1/ui/login", operator, http.StatusCreated, reply((*Server).uiLogin)},
	{"GET", "/v1/bundle-key", operator, http.StatusOK, reply((*Server).bundleKey)},
	{"GET", "/v1/queue", operator, http.StatusOK, reply((*Server).queue)},
	{"POST", "/v1/import", operator, http.StatusCreated, stream((*Server).importBundle)},
	{"GET", "/v1/nodes", operator, http.StatusOK, reply((*Server).nodes)},

	{"POST", "/v1/projects", operator, http.StatusCreated, reply((*Server).addProject)},
	{"GET", "/v1/projects", operator, http.StatusOK, reply((*Server).projects)},
	{"GET", "/v1/projects/{name}", operator, http.StatusOK, reply((*Server).project)},
	{"PATCH", "/v1/projects/{name}", operator, http.StatusOK, reply((*Server).setProject)},
	{"DELETE", "/v1/projects/{name}", operator, http.StatusOK, reply((*Server).removeProject)},
	{"POST", "/v1/projects/{name}/unlock", operator, http.StatusOK, reply((*Server).unlock)},
	{"GET", "/v1/projects/{name}/manifest", operator, http.StatusOK, reply((*Server).projectManifest)},
	{"GET", "/v1/projects/{name}/checkout", operator, http.StatusOK, reply((*Server).projectCheckout)},

	{"POST", "/v1/runs", operator, http.StatusCreated, reply((*Server).create)},
	{"POST", "/v1/bootstrap", operator, http.StatusCreated, reply((*Server).bootstrap)},
	{"GET", "/v1/runs", operator, http.StatusOK, reply((*Server).runs)},
	{"GET", "/v1/runs/{id}", runToken, http.StatusOK, reply((*Server).run)},
	{"DELETE", "/v1/runs/{id}", operator, http.StatusOK, reply((*Server).remove)},
	{"POST", "/v1/runs/{id}/retain", operator, http.StatusOK, reply((*Server).retain)},
	{"POST", "/v1/runs/{id}/reject", operator, http.StatusOK, reply((*Server).reject)},
	{"POST", "/v1/runs/{id}/review", operator, http.StatusCreated, reply((*Server).review)},
	{"POST", "/v1/runs/{id}/fork", operator, http.StatusCreated, reply((*Server).fork)},
	{"POST", "/v1/runs/{id}/checkpoint", runToken, http.StatusOK, reply((*Server).checkpoint)},
	{"POST", "/v1/runs/{id}/resume", runToken, http.StatusOK, reply((*Server).resume)},
	{"POST", "/v1/runs/{id}/adopt", operator, http.StatusOK, reply((*Server).adopt)},
	{"GET", "/v1/runs/{id}/artifacts/{kind}", runToken, http.StatusOK, reply((*Server).artifact)},
	{"GET", "/v1/runs/{id}/events", runToken, http.StatusOK, reply((*Server).events)},
	{"GET", "/v1/runs/{id}/events/stream", runToken, http.StatusOK, stream((*Server).eventStream)},

	{"GET", "/v1/runs/{id}/tools", runToken, http.StatusOK, reply((*Server).tools)},
	{"POST", "/v1/runs/{id}/tools/{name}", runToken, http.StatusOK, reply((*Server).callTool)},
	{"POST", "/v1/runs/{id}/inbox", operator, http.StatusOK, reply((*Server).deliver)},
	{"POST", "/v1/runs/{id}/exec", runToken, http.StatusOK, command((*Server).exec)},
	{"POST", "/v1/runs/{id}/exec/stream", runToken, http.StatusOK, stream((*Server).execStream)},
	{"POST", "/v1/runs/{id}/exec/attach", runToken, http.StatusSwitchingProtocols, stream((*Server).execAttach)},
	{"POST", "/v1/runs/{id}/jobs", runToken, http.StatusAccepted, reply((*Server).startJob)},
	{"GET", "/v1/runs/{id}/jobs", runToken, http.StatusOK, reply((*Server).jobs)},
	{"GET", "/v1/runs/{id}/status", runToken, http.StatusOK, reply((*Server).jobStatus)},
	{"GET", "/v1/runs/{id}/jobs/{job}", runToken, http.StatusOK, reply((*Server).job)},
	{"POST", "/v1/runs/{id}/jobs/{job}/cancel", runToken, http.StatusOK, reply((*Server).cancelJob)},

	{"GET", "/v1/runs/{id}/changeset", runToken, http.StatusOK, reply((*Server).changeSet)},
	{"GET", "/v1/runs/{id}/changeset/diff", operator, http.StatusOK, stream((*Server).changeSetDiff)},
	{"GET", "/v1/runs/{id}/bundle", operator, http.StatusOK, stream((*Server).bundle)},
	{"GET", "/v1/runs/{id}/changeset/blame", operator, http.StatusOK, reply((*Server).blame)},
	{"POST", "/v1/runs/{id}/submit", runToken, http.StatusOK, reply((*Server).submit)},
	{"POST", "/v1/runs/{id}/approve", operator, http.StatusOK, reply((*Server).approve)},
	{"POST", "/v1/runs/{id}/apply", operator, http.StatusOK, reply((*Server).apply)},
	{"POST", "/v1/runs/{id}/undo", operator, http.StatusOK, reply((*Server).undo)},
	{"POST", "/v1/runs/{id}/queue", operator, http.StatusCreated, reply((*Server).queueAdd)},
	{"GET", "/v1/runs/{id}/queue", operator, http.StatusOK, reply((*Server).queueEntry)},
	{"DELETE", "/v1/runs/{id}/queue", operator, http.StatusOK, reply((*Server).queueRemove)},
	{"POST", "/v1/runs/{id}/queue/undo", operator, http.StatusOK, reply((*Server).queueUndo)},

	{"GET", "/v1/runs/{id}/capabilities", runToken, http.StatusOK, reply((*Server).capabilities)},
	{"POST", "/v1/runs/{id}/verify", runToken, http.StatusOK, command((*Server).verify)},
	{"GET", "/v1/runs/{id}/requests", runToken, http.StatusOK, reply((*Server).accessRequests)},
	{"POST", "/v1/runs/{id}/requests", runToken, http.StatusCreated, reply((*Server).requestAccess)},
	{"POST", "/v1/runs/{id}/requests/{request}/grant", operator, http.StatusOK, reply((*Server).grant)},
	{"POST", "/v1/runs/{id}/requests/{request}/deny", operator, http.StatusOK, reply((*Server).deny)},

	// MCP's streamable HTTP transport: one endpoint, three methods (a
	// message, the server's stream, the session's end).
	{"POST", "/v1/runs/{id}/mcp", runToken, http.StatusOK, stream((*Server).mcp)},
	{"GET", "/v1/runs/{id}/mcp", runToken, http.StatusOK, stream((*Server).mcp)},
	{"DELETE", "/v1/runs/{id}/mcp", runToken, http.StatusNoContent, stream((*Server).mcp)},

	{"POST", "/v1/flows", operator, http.StatusCreated, reply((*Server).startFlow)},
	{"GET", "/v1/flows", operator, http.StatusOK, reply((*Server).flows)},
	{"GET", "/v1/flows/{flow}", operator, http.StatusOK, reply((*Server).flow)},
	{"POST", "/v1/runs/{id}/menu/{event}", runToken, http.StatusOK, reply((*Server).pickEvent)},

	{"GET", "/v1/agents", operator, http.StatusOK, reply((*Server).agents)},
	{"POST", "/v1/agents", operator, http.StatusCreated, reply((*Server).addAgent)},
	{"GET", "/v1/agents/{name}", operator, http.StatusOK, reply((*Server).agent)},
	{"DELETE", "/v1/agents/{name}", operator, http.StatusOK, reply((*Server).removeAgent)},
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
	out := make([]RouteInfo, len(routes))
	for i, rt := range routes {
		out[i] = RouteInfo{Method: rt.method, Path: rt.path, Status: rt.status, RunToken: rt.who == runToken}
	}
	return out
}

// mux serves the table; what no route matches is an envelope's not_found.
func (s *Server) mux() http.Handler {
	mux := http.NewServeMux()
	for i := range routes {
		rt := &routes[i]
		mux.HandleFunc(rt.method+" "+rt.path, func(w http.ResponseWriter, r *http.Request) { s.serve(rt, w, r) })
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, paddock.Errorf(paddock.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	return mux
}

func (s *Server) serve(rt *route, w http.ResponseWriter, r *http.Request) {
	if rt.h.stream != nil {
		if err := rt.admits(r); err != nil {
			s.fail(w, r, err)
			return
		}
		rt.h.stream(s, w, r)
		return
	}
	w = s.runFunnel(w, r)
	if err := rt.admits(r); err != nil {
		s.fail(w, r, err)
		return
	}
	// The seq rule: a mutating request on a run may carry ?expect_seq=N;
	// if the run moved on, it is refused.
	if v := r.URL.Query().Get("expect_seq"); v != "" && r.Method != http.MethodGet && r.PathValue("id") != "" {
		seq, err := intParam(v, "expect_seq")
		if err != nil {
			s.fail(w, r, err)
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
	data, err := rt.h.call(s, r)
	if rc != nil {
		rc.SetWriteDeadline(time.Now().Add(WriteStall))
	}
	if err != nil {
		s.fail(w, r, err)
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

// The handlers, in the order of the table.

func (s *Server) health(r *http.Request) (any, error) {
	return map[string]string{"status": "ok"}, nil
}

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI)
}

func (s *Server) status(r *http.Request) (any, error) { return s.Status(), nil }

func (s *Server) doctor(r *http.Request) (any, error) {
	if s.Doctor == nil {
		return nil, paddock.Errorf(paddock.CodeUnsupported, "this daemon has no doctor")
	}
	return s.Doctor(r.Context()), nil
}

func (s *Server) gc(r *http.Request) (any, error) {
	var req paddock.GCRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return nonNil(s.Collector.GC(r.Context(), req.DryRun))
}

func (s *Server) addProject(r *http.Request) (any, error) {
	var req paddock.AddProjectRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Projects.AddProject(r.Context(), req)
}

func (s *Server) projects(r *http.Request) (any, error) {
	return nonNil(s.Projects.Projects(r.Context()))
}

func (s *Server) project(r *http.Request) (any, error) {
	return s.Projects.Project(r.Context(), r.PathValue("name"))
}

func (s *Server) setProject(r *http.Request) (any, error) {
	var req paddock.SetProjectRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Projects.SetProject(r.Context(), r.PathValue("name"), actor(r), req)
}

func (s *Server) removeProject(r *http.Request) (any, error) {
	return map[string]string{"removed": r.PathValue("name")}, s.Projects.RemoveProject(r.Context(), r.PathValue("name"))
}

func (s *Server) unlock(r *http.Request) (any, error) {
	var req paddock.UnlockRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	l, err := s.Projects.Unlock(r.Context(), r.PathValue("name"), actor(r), req.Force)
	return paddock.UnlockResult{Released: l, By: actor(r)}, err
}

func (s *Server) create(r *http.Request) (any, error) {
	var req paddock.CreateRunRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Runs.Create(r.Context(), req)
}

func (s *Server) bootstrap(r *http.Request) (any, error) {
	var req paddock.BootstrapRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Jobs.Bootstrap(r.Context(), req)
}

func (s *Server) runs(r *http.Request) (any, error) {
	all, err := boolParam(r, "all")
	if err != nil {
		return nil, err
	}
	return nonNil(s.Runs.Runs(r.Context(), paddock.RunFilter{Project: r.URL.Query().Get("project"), Removed: all}))
}

func (s *Server) run(r *http.Request) (any, error) {
	return s.Runs.Run(r.Context(), r.PathValue("id"))
}

func (s *Server) remove(r *http.Request) (any, error) {
	return s.Runs.Remove(r.Context(), r.PathValue("id"))
}

func (s *Server) retain(r *http.Request) (any, error) {
	return s.Runs.Retain(r.Context(), r.PathValue("id"))
}

func (s *Server) review(r *http.Request) (any, error) {
	var req paddock.ReviewRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Reviews.Review(r.Context(), r.PathValue("id"), req.Agent)
}

func (s *Server) fork(r *http.Request) (any, error) {
	var req paddock.ForkRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Forks.Fork(r.Context(), r.PathValue("id"), req)
}

func (s *Server) reject(r *http.Request) (any, error) {
	return s.Runs.Reject(r.Context(), r.PathValue("id"))
}

func (s *Server) checkpoint(r *http.Request) (any, error) {
	var req paddock.CheckpointRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.Reason == "" {
		req.Reason = "requested by " + actor(r)
	}
	return s.Runs.Checkpoint(r.Context(), r.PathValue("id"), req.Reason)
}

func (s *Server) resume(r *http.Request) (any, error) {
	return s.Runs.Resume(r.Context(), r.PathValue("id"))
}

func (s *Server) artifact(r *http.Request) (any, error) {
	return s.Jobs.Artifact(r.Context(), r.PathValue("id"), r.PathValue("kind"))
}

func (s *Server) tools(r *http.Request) (any, error) {
	return s.Broker.Tools(r.Context(), r.PathValue("id"))
}

func (s *Server) callTool(r *http.Request) (any, error) {
	args, err := readObject(r)
	if err != nil {
		return nil, err
	}
	return s.Broker.CallTool(r.Context(), r.PathValue("id"), r.PathValue("name"), args)
}

func (s *Server) deliver(r *http.Request) (any, error) {
	lim := s.InboxLimits
	if lim.MaxFile == 0 {
		lim = tools.DefaultInboxLimits
	}
	if r.ContentLength > lim.MaxFile {
		return nil, paddock.Errorf(paddock.CodeTooLarge, "inbox: the file is larger than %d bytes; nothing was written", lim.MaxFile)
	}
	body := http.MaxBytesReader(nil, r.Body, lim.MaxFile+1)
	return s.Broker.Deliver(r.Context(), r.PathValue("id"), r.URL.Query().Get("name"), body, lim)
}

func (s *Server) exec(r *http.Request) (any, error) {
	var req paddock.ExecRequest
	if err := decodeN(r, &req, maxExecBody); err != nil {
		return nil, err
	}
	if err := s.operatorOnly(r, &req); err != nil {
		return nil, err
	}
	return s.Broker.Exec(r.Context(), r.PathValue("id"), req)
}

func (s *Server) startJob(r *http.Request) (any, error) {
	var req paddock.StartJobRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.Exec != nil {
		if err := s.operatorOnly(r, req.Exec); err != nil {
			return nil, err
		}
	}
	return s.Jobs.StartJob(r.Context(), r.PathValue("id"), req)
}

func (s *Server) jobs(r *http.Request) (any, error) {
	return s.Jobs.Jobs(r.Context(), r.PathValue("id"))
}

func (s *Server) jobStatus(r *http.Request) (any, error) {
	return s.Jobs.JobStatus(r.Context(), r.PathValue("id"))
}

func (s *Server) job(r *http.Request) (any, error) {
	return s.Jobs.Job(r.Context(), r.PathValue("id"), r.PathValue("job"))
}

func (s *Server) cancelJob(r *http.Request) (any, error) {
	return s.Jobs.CancelJob(r.Context(), r.PathValue("id"), r.PathValue("job"))
}

func (s *Server) changeSet(r *http.Request) (any, error) {
	return s.Changes.ChangeSet(r.Context(), r.PathValue("id"))
}

func (s *Server) submit(r *http.Request) (any, error) {
	var req paddock.SubmitRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Changes.SubmitExpecting(r.Context(), r.PathValue("id"), req.ExpectHash)
}

func (s *Server) approve(r *http.Request) (any, error) {
	var req paddock.ApproveRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if len(req.Hunks) > 0 {
		return s.Provenance.ApproveHunks(r.Context(), r.PathValue("id"), req.Hash, req.Hunks, actor(r))
	}
	return s.Changes.Approve(r.Context(), r.PathValue("id"), req.Hash, actor(r))
}

func (s *Server) blame(r *http.Request) (any, error) {
	return s.Provenance.Blame(r.Context(), r.PathValue("id"), r.URL.Query().Get("hash"))
}

func (s *Server) apply(r *http.Request) (any, error) {
	var req paddock.ApplyRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	switch req.To {
	case "", "branch":
		if req.ThreeWay {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "a 3-way merge applies only to --to worktree (a branch is built on the base, where nothing needs merging)")
		}
		return s.Changes.Apply(r.Context(), r.PathValue("id"), req.Branch, gitx.Identity{Name: req.AuthorName, Email: req.AuthorEmail})
	case "worktree":
		if req.Branch != "" {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "a branch name applies only to --to branch")
		}
		return s.Changes.ApplyToWorktree(r.Context(), r.PathValue("id"), req.ThreeWay)
	}
	return nil, paddock.Errorf(paddock.CodeBadRequest, "apply to %q: branch or worktree", req.To)
}

func (s *Server) undo(r *http.Request) (any, error) {
	return s.Changes.Undo(r.Context(), r.PathValue("id"))
}

func (s *Server) capabilities(r *http.Request) (any, error) {
	return s.Broker.Capabilities(r.Context(), r.PathValue("id"))
}

func (s *Server) verify(r *http.Request) (any, error) {
	var req paddock.VerifyRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Verifier.Verify(r.Context(), r.PathValue("id"), req)
}

func (s *Server) accessRequests(r *http.Request) (any, error) {
	return nonNil(s.Broker.AccessRequests(r.Context(), r.PathValue("id")))
}

func (s *Server) requestAccess(r *http.Request) (any, error) {
	var in paddock.AccessRequestInput
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	return s.Broker.RequestAccess(r.Context(), r.PathValue("id"), in)
}

func (s *Server) grant(r *http.Request) (any, error) { return s.decideAccess(r, true) }
func (s *Server) deny(r *http.Request) (any, error)  { return s.decideAccess(r, false) }

func (s *Server) decideAccess(r *http.Request, grant bool) (any, error) {
	var req paddock.DecideRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Broker.DecideAccess(r.Context(), r.PathValue("id"), r.PathValue("request"), grant, actor(r), req.Note)
}

func (s *Server) agents(r *http.Request) (any, error) {
	return nonNil(s.Projects.Agents(r.Context()))
}

func (s *Server) addAgent(r *http.Request) (any, error) {
	var req paddock.AddAgentRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Projects.AddAgent(r.Context(), req)
}

func (s *Server) agent(r *http.Request) (any, error) {
	return s.Projects.Agent(r.Context(), r.PathValue("name"))
}

func (s *Server) removeAgent(r *http.Request) (any, error) {
	return map[string]string{"removed": r.PathValue("name")}, s.Projects.RemoveAgent(r.Context(), r.PathValue("name"))
}

func (s *Server) projectManifest(r *http.Request) (any, error) {
	return s.Verifier.ProjectManifest(r.Context(), r.PathValue("name"))
}

func (s *Server) projectCheckout(r *http.Request) (any, error) {
	return s.Projects.ProjectCheckout(r.Context(), r.PathValue("name"))
}

func (s *Server) startFlow(r *http.Request) (any, error) {
	var req paddock.StartFlowRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Flows.StartFlow(r.Context(), req)
}

func (s *Server) flows(r *http.Request) (any, error) {
	return nonNil(s.Flows.Flows(r.Context(), r.URL.Query().Get("project")))
}

func (s *Server) flow(r *http.Request) (any, error) {
	return s.Flows.Flow(r.Context(), r.PathValue("flow"))
}

func (s *Server) pickEvent(r *http.Request) (any, error) {
	var req paddock.MenuEventRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return s.Flows.PickEvent(r.Context(), r.PathValue("id"), r.PathValue("event"), req)
}
