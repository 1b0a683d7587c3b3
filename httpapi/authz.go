package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/paddock-dev/paddock"
)

// Principals is who may call besides the operator and the runs' agents:
// named people and services, each with a role scoped to projects, and
// their tokens (the daemon's lifecycle.Principals). Without it every
// caller the guard lets in is the operator.
type Principals interface {
	// Authenticate returns the caller a principal's token (pdk_tok_…)
	// names, if the token is live; unauthorized otherwise, saying no
	// more (never the token).
	Authenticate(ctx context.Context, token string) (*paddock.Caller, error)
	// CallerByUID returns the principal a local uid maps to, or nil.
	CallerByUID(ctx context.Context, uid int) (*paddock.Caller, error)
	// Recheck is c as it is now, for what outlives the call that admitted
	// it (a stream, a review page session): unauthorized once its token
	// is revoked or expired, or its principal removed or made again.
	Recheck(ctx context.Context, c *paddock.Caller) (*paddock.Caller, error)

	AddPrincipal(ctx context.Context, req paddock.PrincipalRequest, by string) (*paddock.Principal, error)
	Principals(ctx context.Context) ([]*paddock.Principal, error)
	Principal(ctx context.Context, name string) (*paddock.Principal, error)
	SetPrincipal(ctx context.Context, name string, req paddock.PrincipalRequest, by string) (*paddock.Principal, error)
	RemovePrincipal(ctx context.Context, name, by string) (*paddock.Principal, error)
	CreateToken(ctx context.Context, req paddock.TokenRequest, by string) (*paddock.NewToken, error)
	Tokens(ctx context.Context, principal string) ([]*paddock.Token, error)
	RevokeToken(ctx context.Context, id, by string) (*paddock.Token, error)
}

// caller says who may call a route: the roles it admits, and whether a
// run's own token reaches it (on its own run).
type caller uint8

const (
	// anyone the guard let in (the health check, the API's description,
	// who the caller is).
	anyone caller = iota
	// admin: principals, projects' settings, agents, the daemon's upkeep.
	admin
	// viewer: any role reads.
	viewer
	// orchestrator: orchestrators (and admins) drive runs.
	orchestrator
	// reviewer: reviewers (and admins) decide on runs.
	reviewer
	// agentViews and agentDrives are viewer and orchestrator, and also a
	// run's own token on its own run: the agent's side of its run.
	agentViews
	agentDrives
	// abandons (reject): reviewers decide; an orchestrator may also give
	// up a run it drives while nothing of it is submitted.
	abandons
	// picks (a flow's menu): the run's agent, reviewers, and
	// orchestrators on a run that is no review of another's work.
	picks
)

// roles are the roles a route admits (the operator is every role).
func (c caller) roles() []paddock.Role {
	switch c {
	case anyone, viewer, agentViews:
		return paddock.Roles
	case admin:
		return []paddock.Role{paddock.RoleAdmin}
	case orchestrator, agentDrives:
		return []paddock.Role{paddock.RoleAdmin, paddock.RoleOrchestrator}
	case reviewer:
		return []paddock.Role{paddock.RoleAdmin, paddock.RoleReviewer}
	case abandons, picks:
		return []paddock.Role{paddock.RoleAdmin, paddock.RoleOrchestrator, paddock.RoleReviewer}
	}
	return nil
}

// agent says whether a run's token reaches a route (on its own run).
func (c caller) agent() bool { return c == agentViews || c == agentDrives || c == picks }

// authz decides whether a caller the guard let in may call a route: its
// role, the projects it is scoped to, and the two rules that look at the
// run (abandons, picks). It reads runs and flows only for what it needs.
type authz struct {
	runs  Runs
	flows Flows
}

// admits enforces who may call rt: a run's token reaches only its own
// run, and only the agent's side of it; a principal only what its role
// admits, in its projects.
func (a *authz) admits(rt *route, r *http.Request) error {
	ctx := r.Context()
	if rt.who == anyone {
		return nil
	}
	if run, ok := ctx.Value(scopeKey).(string); ok {
		if !rt.who.agent() {
			return paddock.Errorf(paddock.CodeForbidden, "a run (its token, or its own socket) does not reach %s %s; that is the operator's", rt.method, rt.path).WithRule("run_token")
		}
		if id := r.PathValue("id"); id != run {
			return paddock.Errorf(paddock.CodeRunMismatch, "this caller is run %s's agent (its token, or its own socket), not %s's", run, id)
		}
		return nil
	}
	c := paddock.CallerOf(ctx)
	if c == nil {
		return paddock.Errorf(paddock.CodeForbidden, "this call names no caller")
	}
	if c.Principal == "" {
		return nil // the operator has every right
	}
	if !slices.Contains(rt.who.roles(), c.Role) {
		return paddock.Errorf(paddock.CodeForbidden, "%s is %s; %s %s is for %s", c.Name, article(c.Role), rt.method, rt.path, roleList(rt.who.roles())).
			WithRule("role").WithDetail("role", c.Role).WithDetail("roles", rt.who.roles())
	}
	var run *paddock.Run
	if id := r.PathValue("id"); id != "" && (len(c.Projects) > 0 || (c.Role == paddock.RoleOrchestrator && (rt.who == abandons || rt.who == picks))) {
		var err error
		if run, err = a.runs.Run(ctx, id); err != nil {
			return err
		}
	}
	if err := a.inScope(ctx, rt, r, c, run); err != nil {
		return err
	}
	if c.Role != paddock.RoleOrchestrator || run == nil {
		return nil
	}
	switch {
	case rt.who == abandons && run.Review != "":
		return paddock.Errorf(paddock.CodeForbidden, "%s is an orchestrator: it may give up run %s only while nothing of it is submitted; its change set (%s) is a reviewer's to reject", c.Name, run.ID, run.Review).
			WithRule("separation_of_duties")
	case rt.who == picks && run.ReviewOf != nil:
		return paddock.Errorf(paddock.CodeForbidden, "%s is an orchestrator: run %s reviews run %s's work, and deciding its menu is a reviewer's", c.Name, run.ID, run.ReviewOf.Run).
			WithRule("separation_of_duties")
	}
	return nil
}

// inScope checks a scoped principal's projects against the project a
// route is about: the path's project, run or flow, or where namedIn says
// the route names it. A route about no one project is for principals of
// every project.
func (a *authz) inScope(ctx context.Context, rt *route, r *http.Request, c *paddock.Caller, run *paddock.Run) error {
	if len(c.Projects) == 0 {
		return nil
	}
	project := ""
	switch query := r.URL.Query().Get("project"); {
	case run != nil:
		project = run.Project
	case strings.HasPrefix(rt.path, "/v1/projects/{name}"):
		project = r.PathValue("name")
	case r.PathValue("flow") != "":
		f, err := a.flows.Flow(ctx, r.PathValue("flow"))
		if err != nil {
			return err
		}
		project = f.Project
	case namedIn[rt.method+" "+rt.path] == inBody:
		return nil // its handler checks the body's project (inScope)
	case namedIn[rt.method+" "+rt.path] == listed && query == "":
		return nil // answered with the principal's projects' part
	case namedIn[rt.method+" "+rt.path] != 0 && query != "":
		project = query
	default:
		return paddock.Errorf(paddock.CodeForbidden, "%s reaches only project %s; %s %s is about every project (name one with ?project= where the route takes it)", c.Name, strings.Join(c.Projects, ", "), rt.method, rt.path).
			WithRule("project_scope")
	}
	return outOfScope(c, project)
}

// naming is where a route whose path names no project names the one it
// is about.
type naming uint8

const (
	// inBody: a new run or flow names its project in its body.
	inBody naming = iota + 1
	// inQuery: ?project=, which a scoped principal must give.
	inQuery
	// listed: a list that answers a scoped principal with its projects'
	// part (the review page's login is its own), narrowed by ?project= if
	// given.
	listed
)

// namedIn says where the routes about one project that their path does
// not name name it.
var namedIn = map[string]naming{
	"POST /v1/runs": inBody, "POST /v1/bootstrap": inBody, "POST /v1/flows": inBody,
	"GET /v1/queue": inQuery, "POST /v1/import": inQuery,
	"GET /v1/projects": listed, "GET /v1/runs": listed, "GET /v1/flows": listed, "GET /v1/events/stream": listed, "POST /v1/ui/login": listed,
}

// outOfScope refuses a principal scoped to other projects than project.
func outOfScope(c *paddock.Caller, project string) error {
	if c.InProject(project) {
		return nil
	}
	return paddock.Errorf(paddock.CodeForbidden, "%s reaches only project %s, not %s", c.Name, strings.Join(c.Projects, ", "), project).
		WithRule("project_scope").WithDetail("project", project)
}

func article(r paddock.Role) string {
	if strings.IndexByte("aeiou", string(r)[0]) >= 0 {
		return "an " + string(r)
	}
	return "a " + string(r)
}

func roleList(rs []paddock.Role) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	if len(s) == 1 {
		return s[0] + "s"
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1] + "s"
}

// operatorCaller is the operator, named by the connection.
func operatorCaller(name string) *paddock.Caller {
	return &paddock.Caller{Role: paddock.RoleAdmin, Name: name}
}

// withCaller is ctx for a call by c: the caller for the services, and its
// name as the call's actor (what events and logs record).
func withCaller(ctx context.Context, c *paddock.Caller) context.Context {
	if c.Principal != "" {
		ctx = context.WithValue(ctx, actorKey, c.Name)
	}
	return paddock.WithCaller(ctx, c)
}

// stillLive is what a stream asks between its rounds: whether its caller
// is still admitted (a principal's token not revoked, the principal not
// removed); a run's agent and the operator always are.
func (s *Server) stillLive(ctx context.Context) error {
	if paddock.PrincipalOf(ctx) == "" || s.Principals == nil {
		return nil
	}
	_, err := s.Principals.Recheck(ctx, paddock.CallerOf(ctx))
	return err
}

type liveKey struct{}

// withLiveCheck puts s.stillLive in ctx for serveSSE.
func (s *Server) withLiveCheck(ctx context.Context) context.Context {
	return context.WithValue(ctx, liveKey{}, s.stillLive)
}

// liveCheck is ctx's check, or nil.
func liveCheck(ctx context.Context) func(context.Context) error {
	f, _ := ctx.Value(liveKey{}).(func(context.Context) error)
	return f
}

// inScope is the check for a call that names its project in its body (a
// new run, a flow): nil for the operator, the daemon and a run's agent.
func inScope(ctx context.Context, project string) error {
	if c := paddock.CallerOf(ctx); c != nil {
		return outOfScope(c, project)
	}
	return nil
}
