package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

func intp(n int) *int { return &n }

// stamp is a time both stores keep exactly (PostgreSQL keeps microseconds).
func stamp(d time.Duration) time.Time {
	return time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC).Add(d)
}

// testPrincipals: principals are created, read by name and by uid, listed
// by name, updated and deleted; a taken name or uid is a conflict; a
// missing one is not found; empty projects read back as nil.
func testPrincipals(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	alice := &paddock.Principal{Name: "alice", Kind: paddock.PrincipalPerson, Role: paddock.RoleReviewer,
		Projects: []string{"app", "lib"}, UID: intp(1000), CreatedAt: stamp(0), CreatedBy: "operator"}
	ci := &paddock.Principal{Name: "ci", Kind: paddock.PrincipalService, Role: paddock.RoleOrchestrator,
		Projects: []string{}, CreatedAt: stamp(time.Second)}
	update(t, s, func(tx paddock.Tx) error {
		if err := tx.CreatePrincipal(ctx, ci); err != nil {
			return err
		}
		return tx.CreatePrincipal(ctx, alice)
	})
	wantCode(t, s.Update(ctx, func(tx paddock.Tx) error {
		return tx.CreatePrincipal(ctx, &paddock.Principal{Name: "alice", Kind: paddock.PrincipalPerson, Role: paddock.RoleViewer, CreatedAt: stamp(0)})
	}), paddock.CodeConflict)
	wantCode(t, s.Update(ctx, func(tx paddock.Tx) error {
		return tx.CreatePrincipal(ctx, &paddock.Principal{Name: "bob", Kind: paddock.PrincipalPerson, Role: paddock.RoleViewer, UID: intp(1000), CreatedAt: stamp(0)})
	}), paddock.CodeConflict)
	// An answer leaves the transaction usable.
	update(t, s, func(tx paddock.Tx) error {
		if err := tx.CreatePrincipal(ctx, &paddock.Principal{Name: "alice", Role: paddock.RoleViewer, CreatedAt: stamp(0)}); !paddock.IsCode(err, paddock.CodeConflict) {
			t.Fatalf("duplicate name: %v", err)
		}
		return tx.CreatePrincipal(ctx, &paddock.Principal{Name: "bob", Kind: paddock.PrincipalPerson, Role: paddock.RoleViewer, UID: intp(1001), CreatedAt: stamp(2 * time.Second)})
	})
	s.View(ctx, func(tx paddock.Tx) error {
		got, err := tx.Principal(ctx, "alice")
		if err != nil || !reflect.DeepEqual(got, alice) {
			t.Fatalf("alice = %+v, %v; want %+v", got, err, alice)
		}
		got, err = tx.Principal(ctx, "ci")
		if err != nil || got.Projects != nil || got.UID != nil || got.Kind != paddock.PrincipalService || got.CreatedBy != "" {
			t.Fatalf("ci = %+v, %v", got, err)
		}
		if got, err := tx.PrincipalByUID(ctx, 1001); err != nil || got.Name != "bob" {
			t.Fatalf("uid 1001 = %+v, %v", got, err)
		}
		all, err := tx.Principals(ctx)
		if err != nil || len(all) != 3 || all[0].Name != "alice" || all[1].Name != "bob" || all[2].Name != "ci" {
			t.Fatalf("principals = %v, %v", all, err)
		}
		_, err = tx.Principal(ctx, "nobody")
		wantCode(t, err, paddock.CodeNotFound)
		_, err = tx.PrincipalByUID(ctx, 4242)
		wantCode(t, err, paddock.CodeNotFound)
		return nil
	})

	// Kind, role, projects and uid change; name, created_at and created_by stay.
	update(t, s, func(tx paddock.Tx) error {
		p := *alice
		p.Role, p.Projects, p.UID = paddock.RoleAdmin, nil, intp(2000)
		p.CreatedAt, p.CreatedBy = stamp(time.Hour), "someone else"
		return tx.UpdatePrincipal(ctx, &p)
	})
	wantCode(t, s.Update(ctx, func(tx paddock.Tx) error {
		p := *alice
		p.UID = intp(1001) // bob's
		return tx.UpdatePrincipal(ctx, &p)
	}), paddock.CodeConflict)
	wantCode(t, s.Update(ctx, func(tx paddock.Tx) error {
		return tx.UpdatePrincipal(ctx, &paddock.Principal{Name: "nobody", Role: paddock.RoleViewer})
	}), paddock.CodeNotFound)
	update(t, s, func(tx paddock.Tx) error {
		p, err := tx.Principal(ctx, "bob")
		if err != nil {
			return err
		}
		p.UID, p.Projects = nil, []string{"app"}
		return tx.UpdatePrincipal(ctx, p)
	})
	s.View(ctx, func(tx paddock.Tx) error {
		got, err := tx.Principal(ctx, "alice")
		if err != nil || got.Role != paddock.RoleAdmin || got.Projects != nil || got.UID == nil || *got.UID != 2000 ||
			!got.CreatedAt.Equal(stamp(0)) || got.CreatedBy != "operator" {
			t.Fatalf("alice after the update = %+v, %v", got, err)
		}
		if got, err := tx.PrincipalByUID(ctx, 2000); err != nil || got.Name != "alice" {
			t.Fatalf("uid 2000 = %+v, %v", got, err)
		}
		_, err = tx.PrincipalByUID(ctx, 1000)
		wantCode(t, err, paddock.CodeNotFound)
		_, err = tx.PrincipalByUID(ctx, 1001)
		wantCode(t, err, paddock.CodeNotFound)
		if got, err := tx.Principal(ctx, "bob"); err != nil || got.UID != nil || !reflect.DeepEqual(got.Projects, []string{"app"}) {
			t.Fatalf("bob after the update = %+v, %v", got, err)
		}
		return nil
	})
	// bob's old uid is free again.
	update(t, s, func(tx paddock.Tx) error {
		return tx.CreatePrincipal(ctx, &paddock.Principal{Name: "carol", Kind: paddock.PrincipalPerson, Role: paddock.RoleViewer, UID: intp(1001), CreatedAt: stamp(0)})
	})

	update(t, s, func(tx paddock.Tx) error { return tx.DeletePrincipal(ctx, "carol") })
	wantCode(t, s.Update(ctx, func(tx paddock.Tx) error { return tx.DeletePrincipal(ctx, "carol") }), paddock.CodeNotFound)
	s.View(ctx, func(tx paddock.Tx) error {
		_, err := tx.Principal(ctx, "carol")
		wantCode(t, err, paddock.CodeNotFound)
		return nil
	})
}

// testTokens: a principal's tokens are created, read, listed oldest first
// (by principal and all), revoked and marked used, the zero times kept as
// none; a missing token or principal is not found; a principal's deletion
// takes its tokens.
func testTokens(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	update(t, s, func(tx paddock.Tx) error {
		for _, name := range []string{"alice", "ci"} {
			if err := tx.CreatePrincipal(ctx, &paddock.Principal{Name: name, Kind: paddock.PrincipalPerson, Role: paddock.RoleReviewer, CreatedAt: stamp(0)}); err != nil {
				return err
			}
		}
		return nil
	})
	t1 := &paddock.Token{ID: "t1", Principal: "alice", Hash: "h1", CreatedAt: stamp(time.Minute), ExpiresAt: stamp(30 * 24 * time.Hour)}
	t2 := &paddock.Token{ID: "t2", Principal: "ci", Hash: "h2", CreatedAt: stamp(2 * time.Minute)}
	t3 := &paddock.Token{ID: "t3", Principal: "alice", Hash: "h3", CreatedAt: stamp(3 * time.Minute)}
	update(t, s, func(tx paddock.Tx) error {
		for _, tok := range []*paddock.Token{t3, t1, t2} {
			if err := tx.CreateToken(ctx, tok); err != nil {
				return err
			}
		}
		return nil
	})
	wantCode(t, s.Update(ctx, func(tx paddock.Tx) error {
		return tx.CreateToken(ctx, &paddock.Token{ID: "t1", Principal: "alice", Hash: "hx", CreatedAt: stamp(0)})
	}), paddock.CodeConflict)
	wantCode(t, s.Update(ctx, func(tx paddock.Tx) error {
		return tx.CreateToken(ctx, &paddock.Token{ID: "t9", Principal: "nobody", Hash: "hx", CreatedAt: stamp(0)})
	}), paddock.CodeNotFound)
	tokenIDs := func(ts []*paddock.Token) []string {
		var out []string
		for _, tok := range ts {
			out = append(out, tok.ID)
		}
		return out
	}
	s.View(ctx, func(tx paddock.Tx) error {
		got, err := tx.Token(ctx, "t1")
		if err != nil || !reflect.DeepEqual(got, t1) {
			t.Fatalf("t1 = %+v, %v; want %+v", got, err, t1)
		}
		got, err = tx.Token(ctx, "t2")
		if err != nil || !got.ExpiresAt.IsZero() || !got.RevokedAt.IsZero() || !got.LastUsedAt.IsZero() || got.Hash != "h2" {
			t.Fatalf("t2 = %+v, %v", got, err)
		}
		if all, err := tx.Tokens(ctx, ""); err != nil || !reflect.DeepEqual(tokenIDs(all), []string{"t1", "t2", "t3"}) {
			t.Fatalf("all tokens = %v, %v", tokenIDs(all), err)
		}
		if mine, err := tx.Tokens(ctx, "alice"); err != nil || !reflect.DeepEqual(tokenIDs(mine), []string{"t1", "t3"}) {
			t.Fatalf("alice's tokens = %v, %v", tokenIDs(mine), err)
		}
		if none, err := tx.Tokens(ctx, "nobody"); err != nil || len(none) != 0 {
			t.Fatalf("nobody's tokens = %v, %v", tokenIDs(none), err)
		}
		_, err = tx.Token(ctx, "nope")
		wantCode(t, err, paddock.CodeNotFound)
		return nil
	})

	// Revocation and last use round trip; the rest stays.
	update(t, s, func(tx paddock.Tx) error {
		tok, err := tx.Token(ctx, "t1")
		if err != nil {
			return err
		}
		tok.LastUsedAt, tok.RevokedAt = stamp(time.Hour), stamp(2*time.Hour)
		tok.Hash, tok.ExpiresAt = "changed", time.Time{}
		return tx.UpdateToken(ctx, tok)
	})
	wantCode(t, s.Update(ctx, func(tx paddock.Tx) error {
		return tx.UpdateToken(ctx, &paddock.Token{ID: "nope", RevokedAt: stamp(0)})
	}), paddock.CodeNotFound)
	s.View(ctx, func(tx paddock.Tx) error {
		got, err := tx.Token(ctx, "t1")
		if err != nil || !got.LastUsedAt.Equal(stamp(time.Hour)) || !got.RevokedAt.Equal(stamp(2*time.Hour)) ||
			got.Hash != "h1" || !got.ExpiresAt.Equal(t1.ExpiresAt) || got.Live(stamp(3*time.Hour)) {
			t.Fatalf("t1 after the update = %+v, %v", got, err)
		}
		return nil
	})
	// Clearing the times stores none again.
	update(t, s, func(tx paddock.Tx) error {
		tok, err := tx.Token(ctx, "t1")
		if err != nil {
			return err
		}
		tok.LastUsedAt, tok.RevokedAt = time.Time{}, time.Time{}
		return tx.UpdateToken(ctx, tok)
	})
	s.View(ctx, func(tx paddock.Tx) error {
		if got, err := tx.Token(ctx, "t1"); err != nil || !got.LastUsedAt.IsZero() || !got.RevokedAt.IsZero() {
			t.Fatalf("t1 after clearing = %+v, %v", got, err)
		}
		return nil
	})

	// A principal's deletion takes its tokens, and only its.
	update(t, s, func(tx paddock.Tx) error { return tx.DeletePrincipal(ctx, "alice") })
	s.View(ctx, func(tx paddock.Tx) error {
		for _, id := range []string{"t1", "t3"} {
			_, err := tx.Token(ctx, id)
			wantCode(t, err, paddock.CodeNotFound)
		}
		if all, err := tx.Tokens(ctx, ""); err != nil || !reflect.DeepEqual(tokenIDs(all), []string{"t2"}) {
			t.Fatalf("tokens left = %v, %v", tokenIDs(all), err)
		}
		return nil
	})
}

// testApprovalPolicy: a project's approval policy round trips through
// CreateProject and UpdateProject; nil stays nil.
func testApprovalPolicy(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app")
	policy := &paddock.ApprovalPolicy{
		Approvals: 2, From: []string{"role:reviewer", "alice"},
		Labels: []paddock.LabelRule{{Label: "ci_config", Approvals: 3, From: []string{"role:admin"}}, {Label: "secret", Approvals: 2}},
		Auto:   &paddock.AutoApproval{MaxLines: 20, Risky: []string{"executable"}},
	}
	withPolicy := project("lib")
	withPolicy.Policy = policy
	update(t, s, func(tx paddock.Tx) error { return tx.CreateProject(ctx, withPolicy) })
	s.View(ctx, func(tx paddock.Tx) error {
		if p, err := tx.Project(ctx, "app"); err != nil || p.Policy != nil {
			t.Fatalf("app's policy = %+v, %v; want nil", p.Policy, err)
		}
		if p, err := tx.Project(ctx, "lib"); err != nil || !reflect.DeepEqual(p.Policy, policy) {
			t.Fatalf("lib's policy = %+v, %v; want %+v", p.Policy, err, policy)
		}
		ps, err := tx.Projects(ctx)
		if err != nil || len(ps) != 2 || ps[0].Policy != nil || !reflect.DeepEqual(ps[1].Policy, policy) {
			t.Fatalf("projects = %v, %v", ps, err)
		}
		return nil
	})
	team := paddock.TeamApprovalPolicy()
	update(t, s, func(tx paddock.Tx) error {
		p, err := tx.Project(ctx, "app")
		if err != nil {
			return err
		}
		p.Policy = team
		if err := tx.UpdateProject(ctx, p); err != nil {
			return err
		}
		if p, err = tx.Project(ctx, "lib"); err != nil {
			return err
		}
		p.Policy = nil
		return tx.UpdateProject(ctx, p)
	})
	s.View(ctx, func(tx paddock.Tx) error {
		if p, err := tx.Project(ctx, "app"); err != nil || !reflect.DeepEqual(p.Policy, team) {
			t.Fatalf("app's policy = %+v, %v; want %+v", p.Policy, err, team)
		}
		if p, err := tx.Project(ctx, "lib"); err != nil || p.Policy != nil {
			t.Fatalf("lib's policy = %+v, %v; want nil", p.Policy, err)
		}
		return nil
	})
}
