package paddock

import (
	"context"
	"slices"
	"time"
)

// Role is what a principal may do: which routes of the API it may call
// (the route table names, for each route, the roles that reach it).
type Role string

// The roles, from the most to the least. A run's token is none of them:
// it reaches only its own run, as its agent.
const (
	// RoleAdmin: everything, principals and settings included.
	RoleAdmin Role = "admin"
	// RoleOrchestrator: create and drive runs (bootstrap, tools, exec,
	// jobs, submit, verify, flows) and read them; never approve, apply,
	// grant, or decide on another's work.
	RoleOrchestrator Role = "orchestrator"
	// RoleReviewer: read everything in its projects, approve, reject,
	// apply, undo, queue, and decide access requests.
	RoleReviewer Role = "reviewer"
	// RoleViewer: read only.
	RoleViewer Role = "viewer"
)

// Roles lists the roles, from the most to the least.
var Roles = []Role{RoleAdmin, RoleOrchestrator, RoleReviewer, RoleViewer}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }

// PrincipalKind says whether a principal is a person or a service.
type PrincipalKind string

const (
	PrincipalPerson  PrincipalKind = "person"
	PrincipalService PrincipalKind = "service"
)

// Principal is a named person or service that calls paddock, with its
// role and the projects it is scoped to.
type Principal struct {
	Name string        `json:"name"`
	Kind PrincipalKind `json:"kind"`
	Role Role          `json:"role"`
	// Projects scopes the role to these projects; empty is every project.
	// Routes beyond one project (the daemon's, principals') are an
	// admin's of every project.
	Projects []string `json:"projects,omitempty"`
	// UID, if set, maps a local user on the unix socket (by the peer's
	// uid) to this principal.
	UID       *int      `json:"uid,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by,omitempty"`
}

// InProject reports whether p's role reaches project.
func (p *Principal) InProject(project string) bool { return inProjects(p.Projects, project) }

// inProjects says whether a scope (none: every project) holds project.
func inProjects(projects []string, project string) bool {
	return len(projects) == 0 || slices.Contains(projects, project)
}

// Token is a principal's bearer token, as stored: its id and the hash of
// the whole token, never the token. A token is shown once, when made.
type Token struct {
	// ID is the token's public part (the token is pdk_tok_ID_SECRET).
	ID        string    `json:"id"`
	Principal string    `json:"principal"`
	Hash      string    `json:"-"` // sha256 of the whole token, hex
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	// LastUsedAt is when the token last admitted a call (kept to the
	// minute, so that calls do not each write).
	LastUsedAt time.Time `json:"last_used_at,omitzero"`
}

// Live reports whether t admits calls at now.
func (t *Token) Live(now time.Time) bool {
	return t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt))
}

// Caller is who makes a call: a principal, or the operator (the unix
// socket's user with no principal, or the daemon's own token), who has
// every right. The API puts it in the call's context; the services read
// it to record who decided and to check an approval policy.
type Caller struct {
	// Principal is the principal's name; empty for the operator.
	Principal string `json:"principal,omitempty"`
	Role      Role   `json:"role"`
	// Projects scopes a principal's role (see Principal.Projects).
	Projects []string `json:"projects,omitempty"`
	// Name is who the caller is, for the record: the principal's name,
	// or the operator's ("alice (uid 1000)", "token").
	Name string `json:"name"`
	// Token is the id of the principal's token that admitted the call, if
	// one did, and Since when the principal was made: what outlives the
	// call (a stream, a review page session) is checked again against
	// them, so that a token revoked, or a principal removed (or removed
	// and made again), ends it.
	Token string    `json:"-"`
	Since time.Time `json:"-"`
}

// InProject reports whether c's role reaches project.
func (c *Caller) InProject(project string) bool { return inProjects(c.Projects, project) }

// HeldToCeiling reports whether a call's command is held to what the
// run's agent was given (its definition's network ceiling and its
// grants, no less confinement than the machine enforces, the session's
// limits for each command): the agent's own calls, and every
// principal's but an admin's. The operator and an admin choose.
func HeldToCeiling(ctx context.Context) bool {
	if AgentCall(ctx) {
		return true
	}
	return PrincipalOf(ctx) != "" && CallerOf(ctx).Role != RoleAdmin
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// PrincipalOf is the name of ctx's caller's principal: "" for the
// operator, a run's agent or the daemon itself.
func PrincipalOf(ctx context.Context) string {
	if c := CallerOf(ctx); c != nil {
		return c.Principal
	}
	return ""
}

// CallerOf returns ctx's caller, or nil (a call the daemon makes on its
// own, or one from a run's agent).
func CallerOf(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}

// PrincipalRequest adds or changes a principal (paddock principal add).
type PrincipalRequest struct {
	Name     string        `json:"name"`
	Kind     PrincipalKind `json:"kind,omitempty"` // person if empty
	Role     Role          `json:"role"`
	Projects []string      `json:"projects,omitempty"`
	UID      *int          `json:"uid,omitempty"`
}

// TokenRequest makes a token for a principal; Expires is a Go duration
// ("720h"), empty for a token that does not expire.
type TokenRequest struct {
	Principal string `json:"principal"`
	Expires   string `json:"expires,omitempty"`
}

// NewToken is a token just made: Secret is the token itself, shown once.
type NewToken struct {
	Token
	Secret string `json:"token"`
}
