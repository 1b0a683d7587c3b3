package lifecycle_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/approval"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/lifecycle"
)

func caller(name string, role paddock.Role) context.Context {
	return paddock.WithCaller(context.Background(), &paddock.Caller{Principal: name, Role: role, Name: name})
}

// submitted makes a run (under ctx's caller), writes files into its
// workspace and submits them.
func submitted(t *testing.T, e *env, ctx context.Context, files map[string]string) (*paddock.Run, *paddock.ChangeSet) {
	t.Helper()
	r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "clone"})
	if err != nil {
		t.Fatal(err)
	}
	for p, s := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(r.Workspace.Root, p)), 0o755)
		if err := os.WriteFile(filepath.Join(r.Workspace.Root, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := e.m.Changes.Submit(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return r, cs
}

// people are the principals the tests' callers are: an approval counts
// while its principal exists with the role it approved with.
func people(t *testing.T, e *env) {
	t.Helper()
	for name, role := range map[string]paddock.Role{"ann": paddock.RoleReviewer, "bob": paddock.RoleReviewer, "carol": paddock.RoleReviewer, "otto": paddock.RoleOrchestrator} {
		if err := e.m.Store.Update(context.Background(), func(tx paddock.Tx) error {
			return tx.Principals().CreatePrincipal(context.Background(), &paddock.Principal{Name: name, Kind: paddock.PrincipalPerson, Role: role, CreatedAt: time.Now()})
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func setPolicy(t *testing.T, e *env, pol *paddock.ApprovalPolicy) {
	t.Helper()
	req := paddock.SetProjectRequest{ApprovalPolicy: pol, DefaultPolicy: pol == nil}
	if _, err := e.m.Projects.SetProject(context.Background(), "my-app", "op", req); err != nil {
		t.Fatal(err)
	}
}

func mustRule(t *testing.T, err error, rule paddock.Rule) {
	t.Helper()
	pe, _ := err.(*paddock.Error)
	if pe == nil || pe.Code != paddock.CodeForbidden || pe.Rule != rule {
		t.Fatalf("error = %v, want forbidden by rule %s", err, rule)
	}
}

// approvedEvents are run id's changeset.approved events' data.
func approvedEvents(t *testing.T, m *lifecycle.Manager, id string) []map[string]any {
	t.Helper()
	evs, err := m.Runs.Events(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, ev := range evs {
		if ev.Type == paddock.EventApproved {
			var d map[string]any
			json.Unmarshal(ev.Data, &d)
			out = append(out, d)
		}
	}
	return out
}

// With no policy, one approval by the operator approves, as it always did.
func TestPolicyDefaultIsOneApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	people(t, e)
	r, cs := submitted(t, e, ctx, map[string]string{"README.md": "changed\n"})
	s, err := e.m.Changes.Approve(ctx, r.ID, cs.Hash, "ada")
	if err != nil {
		t.Fatal(err)
	}
	if s.ApprovedBy != "ada" || s.ApprovedAt.IsZero() || s.Policy == nil || !s.Policy.Met || s.Policy.Rule != "approvals" || len(s.Approvals) != 1 || s.Approvals[0].Role != paddock.RoleAdmin {
		t.Fatalf("the operator's approval: %+v %+v", s, s.Policy)
	}
	// Again: nothing changes, nothing more is recorded.
	s2, err := e.m.Changes.Approve(ctx, r.ID, cs.Hash, "ada")
	if err != nil || len(s2.Approvals) != 1 || s2.ApprovedAt != s.ApprovedAt {
		t.Fatalf("again: %+v %v", s2, err)
	}
	evs := approvedEvents(t, e.m, r.ID)
	if len(evs) != 1 || evs[0]["by"] != "ada" || evs[0]["role"] != "admin" || evs[0]["principal"] != nil || evs[0]["policy"].(map[string]any)["met"] != true {
		t.Fatalf("approved events: %v", evs)
	}
	if _, err := e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{Name: "A", Email: "a@example.com"}); err != nil {
		t.Fatal(err)
	}
}

// The team policy: a change set with a ci_config entry needs two
// reviewers; one's approval does not apply; an orchestrator may not
// approve; the second's does, and the commit names both.
func TestPolicyTwoReviewersForALabel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	people(t, e)
	setPolicy(t, e, paddock.TeamApprovalPolicy())
	r, cs := submitted(t, e, ctx, map[string]string{".github/workflows/ci.yml": "on: push\n"})
	ann, bob := caller("ann", paddock.RoleReviewer), caller("bob", paddock.RoleReviewer)

	s, err := e.m.Changes.Approve(ann, r.ID, cs.Hash, "ann")
	if err != nil {
		t.Fatal(err)
	}
	if s.ApprovedBy != "" || !s.ApprovedAt.IsZero() || s.Policy.Met || s.Policy.Rule != "label:ci_config" || s.Policy.Need != 2 || s.Policy.Have != 1 ||
		!strings.Contains(s.Policy.Reason, "1 of 2 approvals from role:reviewer, role:admin for label ci_config") {
		t.Fatalf("one reviewer: %+v %+v", s, s.Policy)
	}
	who := gitx.Identity{Name: "A", Email: "a@example.com"}
	_, err = e.m.Changes.Apply(ctx, r.ID, "", who)
	mustRule(t, err, "label:ci_config")
	_, err = e.m.Changes.Approve(caller("otto", paddock.RoleOrchestrator), r.ID, cs.Hash, "otto")
	mustRule(t, err, approval.RuleFrom)
	// ann again changes nothing.
	if s, err = e.m.Changes.Approve(ann, r.ID, cs.Hash, "ann"); err != nil || s.Policy.Have != 1 || len(s.Approvals) != 1 {
		t.Fatalf("ann again: %+v %v", s, err)
	}
	if s, err = e.m.Changes.Approve(bob, r.ID, cs.Hash, "bob"); err != nil {
		t.Fatal(err)
	}
	if s.ApprovedBy != "ann, bob" || !s.Policy.Met || s.Policy.Have != 2 {
		t.Fatalf("two reviewers: %+v %+v", s, s.Policy)
	}
	evs := approvedEvents(t, e.m, r.ID)
	if len(evs) != 2 || evs[0]["principal"] != "ann" || evs[1]["principal"] != "bob" || evs[1]["role"] != "reviewer" ||
		evs[0]["policy"].(map[string]any)["met"] != false || evs[1]["policy"].(map[string]any)["met"] != true {
		t.Fatalf("approved events: %v", evs)
	}
	if _, err := e.m.Changes.Apply(ctx, r.ID, "", who); err != nil {
		t.Fatal(err)
	}
	if msg := gittest.Git(t, e.repo, "log", "-1", "--format=%B", "paddock/"+r.ID); !strings.Contains(msg, "approved by ann, bob") {
		t.Fatalf("commit message: %q", msg)
	}
}

// A run's own principal (the one that made it) may not approve it, unless
// the policy allows it; the operator, who is no principal, may.
func TestPolicySelfApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	people(t, e)
	ann := caller("ann", paddock.RoleReviewer)
	r, cs := submitted(t, e, ann, map[string]string{"README.md": "ann's\n"})
	_, err := e.m.Changes.Approve(ann, r.ID, cs.Hash, "ann")
	mustRule(t, err, approval.RuleSelfApproval)
	pe := err.(*paddock.Error)
	if pe.Details["policy"] == nil || !strings.Contains(pe.Message, "my-app") {
		t.Fatalf("the refusal names no policy: %+v", pe)
	}
	if evs := approvedEvents(t, e.m, r.ID); len(evs) != 0 {
		t.Fatalf("a refused approval was recorded: %v", evs)
	}
	// A principal that drove it is its own too.
	r2, cs2 := submitted(t, e, context.Background(), map[string]string{"README.md": "driven\n"})
	if err := e.m.Store.Update(context.Background(), func(tx paddock.Tx) error {
		_, err := tx.AppendEvent(context.Background(), r2.ID, paddock.EventRunDriven, map[string]string{"principal": "bob"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, err = e.m.Changes.Approve(caller("bob", paddock.RoleReviewer), r2.ID, cs2.Hash, "bob")
	mustRule(t, err, approval.RuleSelfApproval)

	setPolicy(t, e, &paddock.ApprovalPolicy{Approvals: 1, AllowSelfApproval: true})
	if s, err := e.m.Changes.Approve(ann, r.ID, cs.Hash, "ann"); err != nil || s.ApprovedBy != "ann" {
		t.Fatalf("self-approval allowed: %+v %v", s, err)
	}
	setPolicy(t, e, nil)
	if s, err := e.m.Changes.Approve(context.Background(), r2.ID, cs2.Hash, "bob"); err != nil || s.ApprovedBy != "bob" {
		t.Fatalf("the operator: %+v %v", s, err)
	}
}

// From names who may approve: by role or by name.
func TestPolicyFrom(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	people(t, e)
	setPolicy(t, e, &paddock.ApprovalPolicy{From: []string{"carol"}})
	r, cs := submitted(t, e, context.Background(), map[string]string{"README.md": "x\n"})
	_, err := e.m.Changes.Approve(caller("ann", paddock.RoleReviewer), r.ID, cs.Hash, "ann")
	mustRule(t, err, approval.RuleFrom)
	_, err = e.m.Changes.Approve(context.Background(), r.ID, cs.Hash, "op")
	mustRule(t, err, approval.RuleFrom) // the operator is role admin, not carol
	if s, err := e.m.Changes.Approve(caller("carol", paddock.RoleReviewer), r.ID, cs.Hash, "carol"); err != nil || s.ApprovedBy != "carol" {
		t.Fatalf("carol: %+v %v", s, err)
	}
	if _, err := e.m.Projects.SetProject(context.Background(), "my-app", "op", paddock.SetProjectRequest{ApprovalPolicy: &paddock.ApprovalPolicy{From: []string{"role:viewer"}}}); !paddock.IsCode(err, paddock.CodeBadRequest) {
		t.Fatalf("a policy taking approvals from viewers: %v", err)
	}
}

// A policy made stricter after an approval holds: apply, into the working
// tree too, and the merge queue refuse with its rule.
func TestPolicyTightenedAfterApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	people(t, e)
	r, cs := submitted(t, e, ctx, map[string]string{"README.md": "approved\n"})
	if _, err := e.m.Changes.Approve(caller("ann", paddock.RoleReviewer), r.ID, cs.Hash, "ann"); err != nil {
		t.Fatal(err)
	}
	setPolicy(t, e, &paddock.ApprovalPolicy{Approvals: 2})
	_, err := e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{Name: "A", Email: "a@example.com"})
	mustRule(t, err, approval.RuleApprovals)
	_, err = e.m.Changes.ApplyToWorktree(ctx, r.ID, false)
	mustRule(t, err, approval.RuleApprovals)
	_, err = e.m.Queue.QueueAdd(ctx, r.ID, paddock.QueueAddRequest{Branch: "main"}, "op")
	mustRule(t, err, approval.RuleApprovals)
	if !strings.Contains(err.Error(), "1 of 2 approvals") {
		t.Fatalf("the refusal does not say what is missing: %v", err)
	}
	// A second reviewer meets it.
	if s, err := e.m.Changes.Approve(caller("bob", paddock.RoleReviewer), r.ID, cs.Hash, "bob"); err != nil || s.ApprovedBy != "ann, bob" {
		t.Fatalf("bob: %+v %v", s, err)
	}
	if _, err := e.m.Changes.ApplyToWorktree(ctx, r.ID, false); err != nil {
		t.Fatal(err)
	}
}

// verified records a passing verify of hash on run id, as verify does:
// of the whole plan, or (part) of only the checks its caller picked.
func verified(t *testing.T, e *env, id, hash string, part ...bool) {
	t.Helper()
	if err := e.m.Store.Update(context.Background(), func(tx paddock.Tx) error {
		_, err := tx.AppendEvent(context.Background(), id, paddock.EventVerified, map[string]any{"hash": hash, "passed": true, "stale": false, "full": len(part) == 0})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// A policy with Auto approves a small change set with no risky label once
// verify passed on exactly its hash, on its own authority, and says so;
// never one with a risky label or over its lines.
func TestPolicyAutoApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	people(t, e)
	setPolicy(t, e, &paddock.ApprovalPolicy{Approvals: 1, Auto: &paddock.AutoApproval{MaxLines: 4}})

	// Submitted, then verified.
	r, cs := submitted(t, e, ctx, map[string]string{"README.md": "small\n"})
	if s, _ := e.m.Changes.Approve(ctx, r.ID, "sha256:"+strings.Repeat("0", 64), "x"); s != nil {
		t.Fatal("a wrong hash was approved")
	}
	lifecycle.AfterVerify(ctx, e.m, r.ID, &paddock.VerifyResult{Hash: "sha256:" + strings.Repeat("1", 64), Passed: true})
	if run, _ := e.m.Runs.Run(ctx, r.ID); run.Review == paddock.ReviewApproved {
		t.Fatal("a verify of another hash approved it")
	}
	// A verify of the checks its caller picked (lint alone) is no verify
	// of the change set.
	verified(t, e, r.ID, cs.Hash, true)
	lifecycle.AfterVerify(ctx, e.m, r.ID, &paddock.VerifyResult{Hash: cs.Hash, Passed: true})
	if evs := approvedEvents(t, e.m, r.ID); len(evs) != 0 {
		t.Fatalf("a verify of picked checks approved it: %v", evs)
	}
	verified(t, e, r.ID, cs.Hash)
	lifecycle.AfterVerify(ctx, e.m, r.ID, &paddock.VerifyResult{Hash: cs.Hash, Passed: true})
	evs := approvedEvents(t, e.m, r.ID)
	if len(evs) != 1 || evs[0]["auto"] != true || evs[0]["by"] != approval.AutoBy || evs[0]["rule"] != "auto" || evs[0]["policy"].(map[string]any)["rule"] != "auto" {
		t.Fatalf("approved events: %v", evs)
	}
	s, err := e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{Name: "A", Email: "a@example.com"})
	if err != nil || !strings.Contains(s.ApprovedBy, approval.AutoBy) || len(s.Approvals) != 1 || !s.Approvals[0].Auto {
		t.Fatalf("apply: %+v %v", s, err)
	}

	// Verified before it was submitted: approved at submit.
	r2, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "clone"})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(r2.Workspace.Root, "README.md"), []byte("early\n"), 0o644)
	cs2, err := e.m.Changes.ChangeSet(ctx, r2.ID)
	if err != nil {
		t.Fatal(err)
	}
	verified(t, e, r2.ID, cs2.Hash)
	if _, err := e.m.Changes.Submit(ctx, r2.ID); err != nil {
		t.Fatal(err)
	}
	if evs := approvedEvents(t, e.m, r2.ID); len(evs) != 1 || evs[0]["auto"] != true {
		t.Fatalf("approved at submit: %v", evs)
	}

	// A risky label, or more lines than MaxLines: a person must approve.
	for name, files := range map[string]map[string]string{
		"ci_config": {".github/workflows/ci.yml": "on: push\n"},
		"lines":     {"README.md": "1\n2\n3\n4\n5\n"},
	} {
		r, cs := submitted(t, e, ctx, files)
		verified(t, e, r.ID, cs.Hash)
		lifecycle.AfterVerify(ctx, e.m, r.ID, &paddock.VerifyResult{Hash: cs.Hash, Passed: true})
		if evs := approvedEvents(t, e.m, r.ID); len(evs) != 0 {
			t.Fatalf("%s: approved by the policy: %v", name, evs)
		}
		_, err := e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{Name: "A", Email: "a@example.com"})
		mustCode(t, err, paddock.CodeConflict) // not approved
		if s, err := e.m.Changes.Approve(ctx, r.ID, cs.Hash, "op"); err != nil || s.ApprovedBy != "op" {
			t.Fatalf("%s: a person's approval: %+v %v", name, s, err)
		}
	}
}

// TestPolicySelfThroughWorkAndForks: a principal that writes a run's
// files through its tools is the run's own, one that only reads them or
// verifies is not; and a fork's change set holds its parent's work, so
// the parent's principals are the fork's own too.
func TestPolicySelfThroughWorkAndForks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	people(t, e)
	withSandbox(t, e)
	ctx := context.Background()
	ann, bob := caller("ann", paddock.RoleAdmin), caller("bob", paddock.RoleReviewer)
	r := e.create(t, paddock.KindOverlay, "")
	if _, err := e.m.Broker.CallTool(ann, r.ID, "write", json.RawMessage(`{"path":"ann.txt","content":"ann's work\n"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Broker.CallTool(bob, r.ID, "read", json.RawMessage(`{"path":"ann.txt"}`)); err != nil {
		t.Fatal(err)
	}
	res, err := e.m.Forks.Fork(ctx, r.ID, paddock.ForkRequest{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	k := res.Runs[0].ID
	for _, id := range []string{r.ID, k} {
		cs, err := e.m.Changes.Submit(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.m.Changes.Approve(ann, id, cs.Hash, "ann")
		mustRule(t, err, approval.RuleSelfApproval)
		if s, err := e.m.Changes.Approve(bob, id, cs.Hash, "bob"); err != nil || s.ApprovedBy != "bob" {
			t.Fatalf("run %s: the reviewer who only read it: %+v %v", id, s, err)
		}
	}
}

// TestPolicyApproverMustStand: an approval counts at apply while its
// principal exists with the role it approved with.
func TestPolicyApproverMustStand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	people(t, e)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(tx paddock.Tx) error
	}{
		{"removed", func(tx paddock.Tx) error { return tx.Principals().DeletePrincipal(ctx, "ann") }},
		{"made a viewer", func(tx paddock.Tx) error {
			p, err := tx.Principals().Principal(ctx, "bob")
			if err != nil {
				return err
			}
			p.Role = paddock.RoleViewer
			return tx.Principals().UpdatePrincipal(ctx, p)
		}},
	} {
		who := "ann"
		if tc.name != "removed" {
			who = "bob"
		}
		r, cs := submitted(t, e, ctx, map[string]string{"README.md": tc.name + "\n"})
		if s, err := e.m.Changes.Approve(caller(who, paddock.RoleReviewer), r.ID, cs.Hash, who); err != nil || s.ApprovedBy != who {
			t.Fatalf("%s: approve: %+v %v", tc.name, s, err)
		}
		if err := e.m.Store.Update(ctx, tc.change); err != nil {
			t.Fatal(err)
		}
		_, err := e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{Name: "A", Email: "a@example.com"})
		if !paddock.IsCode(err, paddock.CodeForbidden) {
			t.Fatalf("%s: an apply on the approval of a principal %s: %v", tc.name, tc.name, err)
		}
	}
}
