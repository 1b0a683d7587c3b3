package httpapi

import (
	"context"
	"strings"

	"github.com/paddock-dev/paddock"
)

// fakePrincipals knows one principal per role, unscoped, and the same
// scoped to project app (their names are the role's, or ROLE@app), each
// with the token "pdk_tok_NAME_s"; uid 1000 maps to the viewer.
type fakePrincipals struct{ st *fakeState }

func fakePrincipal(name string) (*paddock.Caller, bool) {
	role, scoped := strings.CutSuffix(name, "@app")
	if !paddock.Role(role).Valid() {
		return nil, false
	}
	c := &paddock.Caller{Principal: name, Role: paddock.Role(role), Name: name}
	if scoped {
		c.Projects = []string{"app"}
	}
	return c, true
}

// fakeToken is the token of the fake principal name.
func fakeToken(name string) string { return "pdk_tok_" + name + "_s" }

func (f fakePrincipals) Authenticate(ctx context.Context, token string) (*paddock.Caller, error) {
	name, ok := strings.CutPrefix(strings.TrimSuffix(token, "_s"), "pdk_tok_")
	if c, found := fakePrincipal(name); ok && found && strings.HasSuffix(token, "_s") {
		return c, nil
	}
	return nil, paddock.Errorf(paddock.CodeUnauthorized, "unknown token")
}

func (f fakePrincipals) CallerByUID(ctx context.Context, uid int) (*paddock.Caller, error) {
	if uid == 1000 {
		c, _ := fakePrincipal("viewer")
		return c, nil
	}
	return nil, nil
}

// Recheck refuses a principal the test revoked (fakeState.revoked).
func (f fakePrincipals) Recheck(ctx context.Context, c *paddock.Caller) (*paddock.Caller, error) {
	f.st.mu.Lock()
	gone := f.st.revoked[c.Principal]
	f.st.mu.Unlock()
	if n, ok := fakePrincipal(c.Principal); ok && !gone {
		return n, nil
	}
	return nil, paddock.Errorf(paddock.CodeUnauthorized, "no longer live")
}

func (f fakePrincipals) AddPrincipal(ctx context.Context, req paddock.PrincipalRequest, by string) (*paddock.Principal, error) {
	return &paddock.Principal{Name: req.Name, Role: req.Role, Projects: req.Projects}, f.st.record(ctx, "AddPrincipal", req.Name, req.Role, req.Projects, by)
}

func (f fakePrincipals) Principals(ctx context.Context) ([]*paddock.Principal, error) {
	return nil, f.st.record(ctx, "Principals")
}

func (f fakePrincipals) Principal(ctx context.Context, name string) (*paddock.Principal, error) {
	return &paddock.Principal{Name: name}, f.st.record(ctx, "Principal", name)
}

func (f fakePrincipals) SetPrincipal(ctx context.Context, name string, req paddock.PrincipalRequest, by string) (*paddock.Principal, error) {
	return &paddock.Principal{Name: name, Role: req.Role}, f.st.record(ctx, "SetPrincipal", name, req.Role, by)
}

func (f fakePrincipals) RemovePrincipal(ctx context.Context, name, by string) (*paddock.Principal, error) {
	return &paddock.Principal{Name: name}, f.st.record(ctx, "RemovePrincipal", name, by)
}

func (f fakePrincipals) CreateToken(ctx context.Context, req paddock.TokenRequest, by string) (*paddock.NewToken, error) {
	return &paddock.NewToken{Token: paddock.Token{ID: "t1", Principal: req.Principal}, Secret: fakeToken(req.Principal)},
		f.st.record(ctx, "CreateToken", req.Principal, req.Expires, by)
}

func (f fakePrincipals) Tokens(ctx context.Context, principal string) ([]*paddock.Token, error) {
	return nil, f.st.record(ctx, "Tokens", principal)
}

func (f fakePrincipals) RevokeToken(ctx context.Context, id, by string) (*paddock.Token, error) {
	return &paddock.Token{ID: id}, f.st.record(ctx, "RevokeToken", id, by)
}
