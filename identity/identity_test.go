package identity_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/identity"
	"github.com/paddock-dev/paddock/sqlite"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newService(t *testing.T) (*identity.Service, *clock) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	err = st.Update(ctx, func(tx paddock.Tx) error {
		return tx.CreateProject(ctx, &paddock.Project{Name: "app", Root: "/src/app", Fingerprint: "f", CreatedAt: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)}
	return &identity.Service{Store: st, Now: c.now, Logger: slog.New(slog.DiscardHandler)}, c
}

func code(err error) paddock.Code {
	if err == nil {
		return ""
	}
	return paddock.ErrorCode(err)
}

// TestPrincipalsAreChecked: names, roles, kinds and projects are checked
// before anything is stored; a taken name or uid is a conflict.
func TestPrincipalsAreChecked(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	uid, root, self := 1000, 0, os.Geteuid()
	if self == 1000 {
		uid = 1001
	}
	for _, tc := range []struct {
		req  paddock.PrincipalRequest
		want paddock.Code
	}{
		{paddock.PrincipalRequest{Name: "Ann", Role: paddock.RoleReviewer}, paddock.CodeBadRequest},
		{paddock.PrincipalRequest{Name: "ann", Role: "boss"}, paddock.CodeBadRequest},
		{paddock.PrincipalRequest{Name: "ann", Role: paddock.RoleReviewer, Kind: "robot"}, paddock.CodeBadRequest},
		{paddock.PrincipalRequest{Name: "ann", Role: paddock.RoleReviewer, Projects: []string{"nope"}}, paddock.CodeNotFound},
		{paddock.PrincipalRequest{Name: "ann", Role: paddock.RoleViewer, UID: &root}, paddock.CodeBadRequest},
		{paddock.PrincipalRequest{Name: "ann", Role: paddock.RoleViewer, UID: &self}, paddock.CodeBadRequest},
		{paddock.PrincipalRequest{Name: "ann@example.com", Role: paddock.RoleReviewer, Projects: []string{"app", "app"}, UID: &uid}, ""},
		{paddock.PrincipalRequest{Name: "ann@example.com", Role: paddock.RoleViewer}, paddock.CodeConflict},
		{paddock.PrincipalRequest{Name: "bob", Role: paddock.RoleViewer, UID: &uid}, paddock.CodeConflict},
	} {
		p, err := s.AddPrincipal(ctx, tc.req, "root")
		if code(err) != tc.want {
			t.Errorf("%+v: %v, want %q", tc.req, err, tc.want)
		}
		if err == nil && (p.Kind != paddock.PrincipalPerson || len(p.Projects) != 1 || p.CreatedBy != "root") {
			t.Errorf("added %+v", p)
		}
	}
	c, err := s.CallerByUID(ctx, uid)
	if err != nil || c == nil || c.Principal != "ann@example.com" || c.Role != paddock.RoleReviewer || !c.InProject("app") || c.InProject("other") {
		t.Fatalf("uid %d: %+v %v", uid, c, err)
	}
	if c, err := s.CallerByUID(ctx, 1001); c != nil || err != nil {
		t.Fatalf("an unmapped uid: %+v %v", c, err)
	}
	if _, err := s.SetPrincipal(ctx, "ann@example.com", paddock.PrincipalRequest{Name: "other", Role: paddock.RoleViewer}, "root"); code(err) != paddock.CodeBadRequest {
		t.Fatalf("a rename: %v", err)
	}
	if p, err := s.SetPrincipal(ctx, "ann@example.com", paddock.PrincipalRequest{Role: paddock.RoleViewer}, "root"); err != nil || p.Role != paddock.RoleViewer || p.UID != nil || p.Projects != nil {
		t.Fatalf("set: %+v %v", p, err)
	}
}

// TestTokens: a token admits its principal until it is revoked, expires,
// or its principal is removed; a wrong secret with a right id, a token of
// another shape and an unknown id are refused alike, saying nothing of
// the token; last use is written at most once a minute.
func TestTokens(t *testing.T) {
	s, clk := newService(t)
	ctx := context.Background()
	for _, n := range []string{"bot", "ann"} {
		if _, err := s.AddPrincipal(ctx, paddock.PrincipalRequest{Name: n, Role: paddock.RoleOrchestrator}, "root"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateToken(ctx, paddock.TokenRequest{Principal: "nobody"}, "root"); code(err) != paddock.CodeNotFound {
		t.Fatalf("a token for nobody: %v", err)
	}
	for _, bad := range []string{"0s", "-1h", "400d", "soon", "1.5d"} {
		if _, err := s.CreateToken(ctx, paddock.TokenRequest{Principal: "bot", Expires: bad}, "root"); code(err) != paddock.CodeBadRequest {
			t.Errorf("expires %q: %v", bad, err)
		}
	}
	live, err := s.CreateToken(ctx, paddock.TokenRequest{Principal: "bot"}, "root")
	if err != nil {
		t.Fatal(err)
	}
	short, err := s.CreateToken(ctx, paddock.TokenRequest{Principal: "bot", Expires: "1d"}, "root")
	if err != nil || !short.ExpiresAt.Equal(clk.t.Add(24*time.Hour)) {
		t.Fatalf("a one-day token: %+v %v", short, err)
	}
	annTok, _ := s.CreateToken(ctx, paddock.TokenRequest{Principal: "ann"}, "root")
	c, err := s.Authenticate(ctx, live.Secret)
	if err != nil || c.Principal != "bot" || c.Role != paddock.RoleOrchestrator || c.Token != live.ID {
		t.Fatalf("a live token: %+v %v", c, err)
	}
	if again, err := s.Recheck(ctx, c); err != nil || again.Principal != "bot" {
		t.Fatalf("a live caller again: %+v %v", again, err)
	}
	forged := live.Secret[:len(live.Secret)-1] + "x"
	if strings.HasSuffix(live.Secret, "x") {
		forged = live.Secret[:len(live.Secret)-1] + "y"
	}
	for _, bad := range []string{forged, "pdk_tok_", "pdk_tok_nope_secret", "pdk_run_x", strings.TrimPrefix(live.Secret, "pdk_tok_")} {
		_, err := s.Authenticate(ctx, bad)
		if code(err) != paddock.CodeUnauthorized || strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// Last use: written once, again only a minute on.
	tokens := func() map[string]*paddock.Token {
		ts, err := s.Tokens(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]*paddock.Token{}
		for _, tk := range ts {
			m[tk.ID] = tk
		}
		return m
	}
	first := tokens()[live.ID].LastUsedAt
	if !first.Equal(clk.t) {
		t.Fatalf("last use %v, want %v", first, clk.t)
	}
	clk.t = clk.t.Add(30 * time.Second)
	s.Authenticate(ctx, live.Secret)
	if got := tokens()[live.ID].LastUsedAt; !got.Equal(first) {
		t.Fatalf("last use written again within a minute: %v", got)
	}
	clk.t = clk.t.Add(31 * time.Second)
	s.Authenticate(ctx, live.Secret)
	if got := tokens()[live.ID].LastUsedAt; !got.Equal(clk.t) {
		t.Fatalf("last use not written a minute on: %v", got)
	}
	// Expired a day on; revoked at once; a removed principal's, too.
	clk.t = clk.t.Add(25 * time.Hour)
	if _, err := s.Authenticate(ctx, short.Secret); code(err) != paddock.CodeUnauthorized {
		t.Fatalf("an expired token: %v", err)
	}
	if _, err := s.RevokeToken(ctx, live.ID, "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, live.Secret); code(err) != paddock.CodeUnauthorized {
		t.Fatalf("a revoked token: %v", err)
	}
	// What outlives its call (a stream, a review page session) ends with
	// its token, and with its principal even if one of its name comes back.
	if _, err := s.Recheck(ctx, c); code(err) != paddock.CodeUnauthorized {
		t.Fatalf("a revoked token's caller again: %v", err)
	}
	ann, _ := s.Recheck(ctx, &paddock.Caller{Principal: "ann"})
	s.RemovePrincipal(ctx, "ann", "root")
	clk.t = clk.t.Add(time.Second)
	s.AddPrincipal(ctx, paddock.PrincipalRequest{Name: "ann", Role: paddock.RoleAdmin}, "root")
	if _, err := s.Recheck(ctx, ann); code(err) != paddock.CodeUnauthorized {
		t.Fatalf("a principal made again: %v", err)
	}
	if _, err := s.Authenticate(ctx, annTok.Secret); code(err) != paddock.CodeUnauthorized {
		t.Fatalf("a removed principal's token: %v", err)
	}
	if _, ok := tokens()[annTok.ID]; ok {
		t.Fatalf("a removed principal's token is still listed")
	}
	if ts, err := s.Tokens(ctx, "ann"); err != nil || len(ts) != 0 {
		t.Fatalf("tokens of a principal made again: %+v %v", ts, err)
	}
	if _, err := s.Tokens(ctx, "nobody"); code(err) != paddock.CodeNotFound {
		t.Fatalf("tokens of no principal: %v", err)
	}
}
