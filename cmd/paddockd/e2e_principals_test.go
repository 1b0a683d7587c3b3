package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/postgres/pgtest"
)

// principals adds, through the operator's client, an orchestrator
// service, two reviewers and a viewer, and gives each a token; the
// viewer's lasts two seconds.
// valExpires is how long the viewer's token lasts.
const valExpires = 8 * time.Second

func principals(t *testing.T, op *client.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	tokens := map[string]string{}
	for _, p := range []paddock.PrincipalRequest{
		{Name: "ci-bot", Kind: paddock.PrincipalService, Role: paddock.RoleOrchestrator},
		{Name: "ann@example.com", Role: paddock.RoleReviewer},
		{Name: "bob@example.com", Role: paddock.RoleReviewer, Projects: []string{"app"}},
		{Name: "val", Role: paddock.RoleViewer},
	} {
		if _, err := op.AddPrincipal(ctx, p); err != nil {
			t.Fatalf("add %s: %v", p.Name, err)
		}
		req := paddock.TokenRequest{Principal: p.Name}
		if p.Name == "val" {
			// Long enough for the calls made with it on a loaded machine
			// (2 s expired before the first, under CI's load).
			req.Expires = valExpires.String()
		}
		tok, err := op.CreateToken(ctx, req)
		if err != nil || !strings.HasPrefix(tok.Secret, "pdk_tok_"+tok.ID+"_") {
			t.Fatalf("token for %s: %+v %v", p.Name, tok, err)
		}
		tokens[p.Name] = tok.Secret
	}
	return tokens
}

// wantRule fails unless err is code's, refused by rule.
func wantRule(t *testing.T, what string, err error, code paddock.Code, rule string) {
	t.Helper()
	var pe *paddock.Error
	if !paddock.IsCode(err, code) || (rule != "" && (!asError(err, &pe) || string(pe.Rule) != rule)) {
		t.Fatalf("%s: %v, want %s by rule %q", what, err, code, rule)
	}
}

func asError(err error, pe **paddock.Error) bool {
	e, ok := err.(*paddock.Error)
	if ok {
		*pe = e
	}
	return ok
}

// TestPrincipalsDecide: on one daemon, an orchestrator's token creates
// and submits a run and cannot approve it; the project's team policy asks
// two reviewers for a CI file, so one reviewer's approval does not apply
// it and a second one's does; the applied commit and the events name
// both. A revoked token, and an expired one, are refused at their next
// call; no token is ever in the daemon's log, the run's events or an
// error.
func TestPrincipalsDecide(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	d := startDaemon(t, home, "--listen", "127.0.0.1:0")
	ctx := context.Background()
	op := client.Unix(filepath.Join(home, "paddock.sock"))
	repo := newRepo(t, filepath.Join(base, "src", "app"), 3)
	if _, err := op.AddProject(ctx, paddock.AddProjectRequest{Path: repo, Name: "app"}); err != nil {
		t.Fatal(err)
	}
	if _, err := op.SetProject(ctx, "app", paddock.SetProjectRequest{ApprovalPolicy: paddock.TeamApprovalPolicy()}); err != nil {
		t.Fatal(err)
	}
	tokens := principals(t, op)
	as := func(name string) *client.Client { return client.TCP(d.info.Listen, tokens[name]) }
	valUntil := time.Now().Add(valExpires) // the token was made before now
	bot, ann, bob, val := as("ci-bot"), as("ann@example.com"), as("bob@example.com"), as("val")
	var errs []string

	// The orchestrator makes a run, writes a CI file into it, submits.
	r, err := bot.Create(ctx, paddock.CreateRunRequest{Project: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bot.CallTool(ctx, r.ID, "write", map[string]any{"path": ".github/workflows/ci.yml", "content": "on: push\n"}); err != nil {
		t.Fatal(err)
	}
	cs, err := bot.Submit(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	// It cannot approve its own work, nor apply it, nor add principals.
	_, err = bot.Approve(ctx, r.ID, cs.Hash)
	wantRule(t, "the orchestrator's approve", err, paddock.CodeForbidden, "role")
	errs = append(errs, err.Error())
	_, err = bot.Apply(ctx, r.ID, paddock.ApplyRequest{})
	wantRule(t, "the orchestrator's apply", err, paddock.CodeForbidden, "role")
	_, err = bot.AddPrincipal(ctx, paddock.PrincipalRequest{Name: "mallory", Role: paddock.RoleAdmin})
	wantRule(t, "the orchestrator's principal add", err, paddock.CodeForbidden, "role")
	// A viewer reads, and decides nothing.
	if _, err := val.ChangeSet(ctx, r.ID); err != nil {
		t.Fatalf("the viewer's read: %v", err)
	}
	_, err = val.Approve(ctx, r.ID, cs.Hash)
	wantRule(t, "the viewer's approve", err, paddock.CodeForbidden, "role")

	// One reviewer: recorded, not enough for a CI file.
	s, err := ann.Approve(ctx, r.ID, cs.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if s.ApprovedBy != "" || s.Policy == nil || s.Policy.Met || s.Policy.Need != 2 || s.Policy.Have != 1 {
		t.Fatalf("one reviewer's approval: %+v %+v", s, s.Policy)
	}
	_, err = ann.Apply(ctx, r.ID, paddock.ApplyRequest{})
	if !paddock.IsCode(err, paddock.CodeForbidden) && !paddock.IsCode(err, paddock.CodeConflict) {
		t.Fatalf("an apply with one of two approvals: %v", err)
	}
	errs = append(errs, err.Error())
	// The same reviewer again counts once.
	if s, err = ann.Approve(ctx, r.ID, cs.Hash); err != nil || s.Policy.Have != 1 {
		t.Fatalf("the same reviewer twice: %+v %v", s, err)
	}
	// A second reviewer meets the policy; either applies.
	if s, err = bob.Approve(ctx, r.ID, cs.Hash); err != nil || !s.Policy.Met {
		t.Fatalf("the second reviewer's approval: %+v %v", s, err)
	}
	if s, err = ann.Apply(ctx, r.ID, paddock.ApplyRequest{}); err != nil || !strings.Contains(s.ApprovedBy, "bob@example.com") {
		t.Fatalf("the apply: %+v %v", s, err)
	}
	msg, err := exec.Command("git", "-C", repo, "log", "-1", "--format=%B", "paddock/"+r.ID).Output()
	if err != nil || !strings.Contains(string(msg), "ann@example.com") || !strings.Contains(string(msg), "bob@example.com") {
		t.Fatalf("the applied commit's message: %q %v", msg, err)
	}
	evs, err := op.Events(ctx, r.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	approvers := map[string]bool{}
	var evJSON strings.Builder
	for _, e := range evs {
		evJSON.Write(e.Data)
		var data struct {
			Principal string `json:"principal"`
		}
		json.Unmarshal(e.Data, &data)
		switch e.Type {
		case paddock.EventRunCreated:
			if data.Principal != "ci-bot" {
				t.Errorf("run.created names principal %q, want ci-bot", data.Principal)
			}
		case paddock.EventApproved:
			approvers[data.Principal] = true
		}
	}
	if !approvers["ann@example.com"] || !approvers["bob@example.com"] || len(approvers) != 2 {
		t.Errorf("the approved events name %v, want ann and bob", approvers)
	}

	// Revoked: refused at the next call. Expired: the same.
	list, err := op.Tokens(ctx, "bob@example.com")
	if err != nil || len(list) != 1 {
		t.Fatalf("bob's tokens: %+v %v", list, err)
	}
	if _, err := op.RevokeToken(ctx, list[0].ID); err != nil {
		t.Fatal(err)
	}
	_, err = bob.Runs(ctx, paddock.RunFilter{Project: "app"})
	wantRule(t, "a revoked token", err, paddock.CodeUnauthorized, "")
	errs = append(errs, err.Error())
	time.Sleep(time.Until(valUntil) + 100*time.Millisecond)
	_, err = val.ChangeSet(ctx, r.ID)
	wantRule(t, "an expired token", err, paddock.CodeUnauthorized, "")
	errs = append(errs, err.Error())
	// A token that was never made, with a known id, is refused alike.
	forged := "pdk_tok_" + list[0].ID + "_" + strings.Repeat("a", 52)
	_, err = client.TCP(d.info.Listen, forged).Runs(ctx, paddock.RunFilter{})
	wantRule(t, "a forged token", err, paddock.CodeUnauthorized, "")

	// No token in the log, the events or an error.
	d.stop()
	logb, _ := os.ReadFile(filepath.Join(home, "test-daemon.log"))
	for name, tok := range tokens {
		secret := tok[strings.LastIndexByte(tok, '_')+1:]
		for where, text := range map[string]string{"the daemon's log": string(logb), "the events": evJSON.String(), "the errors": strings.Join(errs, "\n")} {
			if strings.Contains(text, secret) {
				t.Errorf("%s's token is in %s", name, where)
			}
		}
	}
}

// TestPrincipalsAcrossNodes: principals and tokens live in the shared
// store. A token made on one node admits on the other; a call for a run
// forwarded to the node that holds it carries its principal, whose role
// is checked there again; a token revoked on one node is refused at once
// on the other.
func TestPrincipalsAcrossNodes(t *testing.T) {
	base := t.TempDir()
	url := pgtest.Need(t).URL(t, base)
	var ds []*daemon
	for _, id := range []string{"n1", "n2"} {
		ds = append(ds, startDaemon(t, filepath.Join(base, id), "--store", url, "--node-id", id, "--node-lease", "2s", "--listen", "127.0.0.1:0"))
	}
	ctx := context.Background()
	op1 := client.Unix(filepath.Join(base, "n1", "paddock.sock"))
	op2 := client.Unix(filepath.Join(base, "n2", "paddock.sock"))
	repo := newRepo(t, filepath.Join(base, "src", "app"), 3)
	if _, err := op1.AddProject(ctx, paddock.AddProjectRequest{Path: repo, Name: "app"}); err != nil {
		t.Fatal(err)
	}
	tokens := principals(t, op1)
	r, err := client.TCP(ds[1].info.Listen, tokens["ci-bot"]).Create(ctx, paddock.CreateRunRequest{Project: "app"})
	if err != nil {
		t.Fatalf("the orchestrator's create through n2: %v", err)
	}
	// Through the node that does not hold the run: forwarded, and judged
	// there as the principal it is.
	via := ds[0]
	if r.Node == "n1" {
		via = ds[1]
	}
	bot := client.TCP(via.info.Listen, tokens["ci-bot"])
	if _, err := bot.CallTool(ctx, r.ID, "write", map[string]any{"path": "a.txt", "content": "a\n"}); err != nil {
		t.Fatalf("a forwarded write: %v", err)
	}
	cs, err := bot.Submit(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bot.Approve(ctx, r.ID, cs.Hash)
	wantRule(t, "a forwarded approve by the orchestrator", err, paddock.CodeForbidden, "role")
	ann := client.TCP(via.info.Listen, tokens["ann@example.com"])
	s, err := ann.Approve(ctx, r.ID, cs.Hash)
	if err != nil || s.ApprovedBy != "ann@example.com" {
		t.Fatalf("a forwarded approve by a reviewer: %+v %v", s, err)
	}
	evs, _ := op1.Events(ctx, r.ID, 0, 1000)
	found := false
	for _, e := range evs {
		found = found || (e.Type == paddock.EventApproved && strings.Contains(string(e.Data), `"principal":"ann@example.com"`))
	}
	if !found {
		t.Errorf("no approved event names ann")
	}

	// Revoked on n2, refused on n1 at its next call; a removed
	// principal's likewise.
	list, err := op2.Tokens(ctx, "ann@example.com")
	if err != nil || len(list) != 1 {
		t.Fatalf("%+v %v", list, err)
	}
	if _, err := op2.RevokeToken(ctx, list[0].ID); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		_, err = client.TCP(d.info.Listen, tokens["ann@example.com"]).Runs(ctx, paddock.RunFilter{Project: "app"})
		wantRule(t, fmt.Sprintf("a revoked token on %s", d.info.Node), err, paddock.CodeUnauthorized, "")
	}
	if _, err := op2.RemovePrincipal(ctx, "val"); err != nil {
		t.Fatal(err)
	}
	_, err = client.TCP(ds[0].info.Listen, tokens["val"]).Runs(ctx, paddock.RunFilter{Project: "app"})
	wantRule(t, "a removed principal's token on n1", err, paddock.CodeUnauthorized, "")
}

// TestSharedSocket: serve --shared-socket opens a second unix socket to a
// group's members. A member whose uid is mapped to a principal is that
// principal there; a member whose uid is mapped to none is refused, never
// taken for the operator. The clients are curl, run as those uids.
func TestSharedSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the clients run as other uids")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("needs curl")
	}
	base := t.TempDir()
	dir, err := os.MkdirTemp("", "paddock-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	sock := filepath.Join(dir, "paddock.sock")
	home := filepath.Join(base, "home")
	d := startDaemon(t, home, "--shared-socket", sock, "--shared-socket-group", "nogroup")
	if d.info.SharedSocket != sock {
		t.Fatalf("daemon.json says shared socket %q", d.info.SharedSocket)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("the shared socket: %v %v", fi.Mode(), err)
	}
	op := client.Unix(filepath.Join(home, "paddock.sock"))
	uid := 65534
	if _, err := op.AddPrincipal(context.Background(), paddock.PrincipalRequest{Name: "ann", Role: paddock.RoleReviewer, UID: &uid}); err != nil {
		t.Fatal(err)
	}
	whoami := func(uid uint32) string {
		cmd := exec.Command(curl, "-s", "--unix-socket", sock, "http://paddock/v1/whoami")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: 65534}}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("curl as uid %d: %v", uid, err)
		}
		return string(out)
	}
	if got := whoami(65534); !strings.Contains(got, `"principal":"ann"`) || !strings.Contains(got, `"role":"reviewer"`) {
		t.Errorf("a mapped member: %s", got)
	}
	if got := whoami(65533); !strings.Contains(got, `"code":"unauthorized"`) || !strings.Contains(got, "uid 65533 is no principal's") {
		t.Errorf("an unmapped member: %s", got)
	}
}
