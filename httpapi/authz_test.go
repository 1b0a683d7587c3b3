package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/ui"
)

// roleTable is who may call each route, written out: a admin, o
// orchestrator, r reviewer, v viewer; * anyone let in; +run: a run's own
// token too, on its own run. It is the policy as a person reads it; the
// test holds the route table to it.
var roleTable = map[string]string{
	"GET /healthz":                                "*",
	"GET /v1/openapi.json":                        "*",
	"GET /metrics":                                "a",
	"GET /v1/status":                              "aorv",
	"GET /v1/doctor":                              "aorv",
	"POST /v1/gc":                                 "a",
	"POST /v1/ui/login":                           "aorv",
	"GET /v1/bundle-key":                          "aorv",
	"GET /v1/queue":                               "aorv",
	"POST /v1/import":                             "a",
	"GET /v1/nodes":                               "aorv",
	"GET /v1/events/stream":                       "aorv",
	"POST /v1/projects":                           "a",
	"GET /v1/projects":                            "aorv",
	"GET /v1/projects/{name}":                     "aorv",
	"PATCH /v1/projects/{name}":                   "a",
	"DELETE /v1/projects/{name}":                  "a",
	"POST /v1/projects/{name}/unlock":             "a",
	"GET /v1/projects/{name}/manifest":            "aorv",
	"GET /v1/projects/{name}/checkout":            "aorv",
	"POST /v1/runs":                               "ao",
	"POST /v1/bootstrap":                          "ao",
	"GET /v1/runs":                                "aorv",
	"GET /v1/runs/{id}":                           "aorv+run",
	"DELETE /v1/runs/{id}":                        "ao",
	"POST /v1/runs/{id}/retain":                   "ao",
	"POST /v1/runs/{id}/reject":                   "aor",
	"POST /v1/runs/{id}/review":                   "ao",
	"POST /v1/runs/{id}/fork":                     "ao",
	"POST /v1/runs/{id}/checkpoint":               "ao+run",
	"POST /v1/runs/{id}/resume":                   "ao+run",
	"POST /v1/runs/{id}/adopt":                    "a",
	"GET /v1/runs/{id}/artifacts/{kind}":          "aorv+run",
	"GET /v1/runs/{id}/events":                    "aorv+run",
	"GET /v1/runs/{id}/events/stream":             "aorv+run",
	"GET /v1/runs/{id}/tools":                     "aorv+run",
	"POST /v1/runs/{id}/tools/{name}":             "ao+run",
	"POST /v1/runs/{id}/inbox":                    "ao",
	"POST /v1/runs/{id}/exec":                     "ao+run",
	"POST /v1/runs/{id}/exec/stream":              "ao+run",
	"POST /v1/runs/{id}/exec/attach":              "ao+run",
	"POST /v1/runs/{id}/jobs":                     "ao+run",
	"GET /v1/runs/{id}/jobs":                      "aorv+run",
	"GET /v1/runs/{id}/status":                    "aorv+run",
	"GET /v1/runs/{id}/jobs/{job}":                "aorv+run",
	"POST /v1/runs/{id}/jobs/{job}/cancel":        "ao+run",
	"GET /v1/runs/{id}/changeset":                 "aorv+run",
	"GET /v1/runs/{id}/changeset/diff":            "aorv",
	"GET /v1/runs/{id}/bundle":                    "aorv",
	"GET /v1/runs/{id}/changeset/blame":           "aorv",
	"POST /v1/runs/{id}/submit":                   "ao+run",
	"POST /v1/runs/{id}/approve":                  "ar",
	"POST /v1/runs/{id}/apply":                    "ar",
	"POST /v1/runs/{id}/undo":                     "ar",
	"POST /v1/runs/{id}/queue":                    "ar",
	"GET /v1/runs/{id}/queue":                     "aorv",
	"DELETE /v1/runs/{id}/queue":                  "ar",
	"POST /v1/runs/{id}/queue/undo":               "ar",
	"GET /v1/runs/{id}/capabilities":              "aorv+run",
	"POST /v1/runs/{id}/verify":                   "ao+run",
	"GET /v1/runs/{id}/requests":                  "aorv+run",
	"POST /v1/runs/{id}/requests":                 "ao+run",
	"POST /v1/runs/{id}/requests/{request}/grant": "ar",
	"POST /v1/runs/{id}/requests/{request}/deny":  "ar",
	"POST /v1/runs/{id}/mcp":                      "ao+run",
	"GET /v1/runs/{id}/mcp":                       "ao+run",
	"DELETE /v1/runs/{id}/mcp":                    "ao+run",
	"POST /v1/flows":                              "ao",
	"GET /v1/flows":                               "aorv",
	"GET /v1/flows/{flow}":                        "aorv",
	"POST /v1/runs/{id}/menu/{event}":             "aor+run",
	"GET /v1/whoami":                              "*",
	"POST /v1/principals":                         "a",
	"GET /v1/principals":                          "a",
	"GET /v1/principals/{name}":                   "a",
	"PATCH /v1/principals/{name}":                 "a",
	"DELETE /v1/principals/{name}":                "a",
	"POST /v1/tokens":                             "a",
	"GET /v1/tokens":                              "a",
	"DELETE /v1/tokens/{token}":                   "a",
	"GET /v1/agents":                              "aorv",
	"POST /v1/agents":                             "a",
	"GET /v1/agents/{name}":                       "aorv",
	"DELETE /v1/agents/{name}":                    "a",
}

// TestRolesOnEveryRoute calls every route as every role, unscoped, scoped
// to the route's project, and scoped to another project, and checks who
// is refused, and by which rule: the route × role × scope table.
func TestRolesOnEveryRoute(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.srv.Doctor = func(context.Context) *paddock.DoctorReport { return &paddock.DoctorReport{} }
	f.h = f.srv.TCPHandler()
	b, _ := fakeJobs{f.svc}.Bootstrap(context.Background(), paddock.BootstrapRequest{Project: "app"})
	inApp := b.Run.ID
	b, _ = fakeJobs{f.svc}.Bootstrap(context.Background(), paddock.BootstrapRequest{Project: "other"})
	inOther := b.Run.ID
	if len(roleTable) != len(Routes()) {
		t.Errorf("the table names %d routes, the server has %d", len(roleTable), len(Routes()))
	}
	for _, rt := range Routes() {
		want, ok := roleTable[rt.Method+" "+rt.Path]
		if !ok {
			t.Errorf("%s %s is not in the role table", rt.Method, rt.Path)
			continue
		}
		if got := strings.HasSuffix(want, "+run"); got != rt.RunToken {
			t.Errorf("%s %s: a run token reaches it: %v, the table says %v", rt.Method, rt.Path, rt.RunToken, got)
		}
		// Where the route is about one project: the path, ?project= or
		// the body names it.
		about := strings.Contains(rt.Path, "{id}") || strings.HasPrefix(rt.Path, "/v1/projects/{name}") || strings.Contains(rt.Path, "{flow}") ||
			slices.Contains([]string{"GET /v1/queue", "POST /v1/import", "POST /v1/runs", "POST /v1/bootstrap", "POST /v1/flows"}, rt.Method+" "+rt.Path)
		filtered := slices.Contains([]string{"GET /v1/projects", "GET /v1/runs", "GET /v1/flows", "GET /v1/events/stream", "POST /v1/ui/login"}, rt.Method+" "+rt.Path)
		for _, role := range paddock.Roles {
			allowed := want[0] == '*' || strings.ContainsRune(strings.TrimSuffix(want, "+run"), rune(role[0]))
			for _, scope := range []string{"", "app", "other"} {
				name := string(role)
				if scope != "" {
					name += "@app"
				}
				project, run := "app", inApp
				if scope == "other" {
					project, run = "other", inOther
				}
				path := strings.NewReplacer("{id}", run, "{name}", project, "{kind}", "task", "{job}", "j-1", "{request}", "q-1",
					"{flow}", "f-"+project, "{event}", "done", "{token}", "t1").Replace(rt.Path)
				if strings.HasPrefix(rt.Path, "/v1/principals/") || strings.HasPrefix(rt.Path, "/v1/agents/") {
					path = strings.Replace(path, project, "ann", 1)
				}
				body := ""
				if rt.Method != "GET" && rt.Method != "DELETE" {
					body = `{"project":"` + project + `"}`
					if !slices.Contains([]string{"/v1/runs", "/v1/bootstrap", "/v1/flows"}, rt.Path) {
						body = ""
					}
				}
				if about && !strings.Contains(rt.Path, "{") {
					if rt.Method == "GET" || rt.Path == "/v1/import" {
						path += "?project=" + project
					}
				}
				rule := callAs(t, f, rt.Method, path, body, name)
				var wantRule string
				switch {
				case !allowed:
					wantRule = "role"
				case want[0] == '*':
				case filtered, scope == "":
				case scope == "other" && about, !about:
					wantRule = "project_scope"
				}
				if rule != wantRule {
					t.Errorf("%s %s as %s: refused by %q, want %q", rt.Method, path, name, rule, wantRule)
				}
			}
		}
	}
}

// callAs calls path with principal name's token, and says which rule of
// who may call refused it ("" if none did: the call went on, to succeed
// or to fail for another reason).
func callAs(t *testing.T, f *fixture, method, path, body, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req := httptest.NewRequest(method, "http://127.0.0.1:4567"+path, strings.NewReader(body)).WithContext(ctx)
	req.Header.Set("Authorization", "Bearer "+fakeToken(name))
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	if rec.Code != 403 {
		return ""
	}
	var a answer
	json.Unmarshal(rec.Body.Bytes(), &a)
	if a.Error == nil {
		return ""
	}
	switch a.Error.Rule {
	case "role", "project_scope", "separation_of_duties", "ceiling":
		return string(a.Error.Rule)
	}
	return ""
}

// TestCallerRules: the callers the guard names (a local uid mapped to a
// principal, a principal's review page session, an unknown token) and
// the rules that look at the run: an orchestrator gives up a run only
// while nothing of it is submitted, and picks no menu item on a review
// run; a new run names a project of the caller's.
func TestCallerRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tcp := f.srv.TCPHandler()
	b, _ := fakeJobs{f.svc}.Bootstrap(context.Background(), paddock.BootstrapRequest{Project: "app"})
	submitted := b.Run.ID
	b, _ = fakeJobs{f.svc}.Bootstrap(context.Background(), paddock.BootstrapRequest{Project: "app"})
	review := b.Run.ID
	b, _ = fakeJobs{f.svc}.Bootstrap(context.Background(), paddock.BootstrapRequest{Project: "app"})
	fresh := b.Run.ID
	f.svc.mu.Lock()
	f.svc.runs[submitted].Review = "submitted"
	f.svc.runs[review].ReviewOf = &paddock.ReviewOf{Run: submitted, Hash: "h1"}
	f.svc.mu.Unlock()

	for _, tc := range []struct {
		who, method, path, body, rule string
	}{
		{"orchestrator", "POST", "/v1/runs/" + submitted + "/reject", "", "separation_of_duties"},
		{"orchestrator", "POST", "/v1/runs/" + fresh + "/reject", "", ""},
		{"reviewer", "POST", "/v1/runs/" + submitted + "/reject", "", ""},
		{"orchestrator", "POST", "/v1/runs/" + review + "/menu/approve", "", "separation_of_duties"},
		{"orchestrator", "POST", "/v1/runs/" + fresh + "/menu/done", "", ""},
		{"reviewer", "POST", "/v1/runs/" + review + "/menu/approve", "", ""},
		{"viewer", "POST", "/v1/runs/" + fresh + "/menu/done", "", "role"},
		{"orchestrator@app", "POST", "/v1/runs", `{"project":"other"}`, "project_scope"},
		{"orchestrator@app", "POST", "/v1/bootstrap", `{"project":"other","agent":{"name":"coder"},"task":"t"}`, "project_scope"},
		{"orchestrator@app", "POST", "/v1/flows", `{"workflow":"w","project":"other","task":"t"}`, "project_scope"},
		{"orchestrator@app", "POST", "/v1/runs", `{"project":"app"}`, ""},
		// Less confinement, or a session's limits, are an admin's to give.
		{"orchestrator", "POST", "/v1/runs/" + fresh + "/exec", `{"argv":["true"],"allow_degraded":true}`, "ceiling"},
		{"orchestrator", "POST", "/v1/runs/" + fresh + "/exec", `{"argv":["true"],"session":true}`, "ceiling"},
		{"orchestrator", "POST", "/v1/runs/" + fresh + "/jobs", `{"kind":"exec","exec":{"argv":["true"],"allow_degraded":true}}`, "ceiling"},
		{"admin", "POST", "/v1/runs/" + fresh + "/exec", `{"argv":["true"],"allow_degraded":true}`, ""},
	} {
		if got := callAs(t, &fixture{h: tcp}, tc.method, tc.path, tc.body, tc.who); got != tc.rule {
			t.Errorf("%s %s as %s: refused by %q, want %q", tc.method, tc.path, tc.who, got, tc.rule)
		}
	}

	tdo := func(method, path, body string, hdr ...string) answer { return doTCP(tcp, method, path, body, hdr...) }
	// A scoped principal's list of runs holds its projects' runs only.
	fakeJobs{f.svc}.Bootstrap(context.Background(), paddock.BootstrapRequest{Project: "other"})
	var listed []paddock.Run
	a := tdo("GET", "/v1/runs", "", "Authorization", "Bearer "+fakeToken("viewer@app"))
	json.Unmarshal(a.Data, &listed)
	inOther := func(r paddock.Run) bool { return r.Project == "other" }
	if a.status != 200 || len(listed) < 3 || slices.ContainsFunc(listed, inOther) {
		t.Fatalf("a scoped viewer's runs: %d %s", a.status, a.Data)
	}
	a = tdo("GET", "/v1/runs", "", "Authorization", "Bearer "+fakeToken("viewer"))
	if json.Unmarshal(a.Data, &listed); !slices.ContainsFunc(listed, inOther) {
		t.Fatalf("an unscoped viewer's runs: %s", a.Data)
	}

	// A token nobody made is unauthorized, and the answer does not echo it.
	a = tdo("GET", "/v1/runs", "", "Authorization", "Bearer pdk_tok_zz_secretvalue")
	if a.status != 401 || strings.Contains(a.Error.Message, "secretvalue") {
		t.Fatalf("an unknown token: %d %+v", a.status, a.Error)
	}

	// On the unix socket, uid 1000 is the viewer; another uid the operator.
	who := func(uid int) paddock.Caller {
		req := httptest.NewRequest("GET", "http://paddock/v1/whoami", nil)
		req = req.WithContext(context.WithValue(req.Context(), peerKey, uid))
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, req)
		var a struct{ Data paddock.Caller }
		json.Unmarshal(rec.Body.Bytes(), &a)
		return a.Data
	}
	if c := who(1000); c.Principal != "viewer" || c.Role != paddock.RoleViewer {
		t.Errorf("uid 1000: %+v", c)
	}
	if c := who(0); c.Principal != "" || c.Role != paddock.RoleAdmin {
		t.Errorf("uid 0: %+v", c)
	}

	// The review page: a session made for the reviewer acts as the
	// reviewer; its approvals name them.
	a = tdo("POST", "/v1/ui/login", "", "Authorization", "Bearer "+fakeToken("reviewer"))
	var login paddock.UILogin
	json.Unmarshal(a.Data, &login)
	code := login.URL[strings.Index(login.URL, "code=")+5:]
	v, ok := f.srv.UI.Redeem(code)
	if !ok || v.Who.Principal != "reviewer" {
		t.Fatalf("the login's session: %+v %v", v, ok)
	}
	f.svc.asked()
	cookie := ui.CookieName("127.0.0.1:7070") + "=" + v.ID
	a = tdo("POST", "/v1/runs/"+submitted+"/approve", `{"hash":"h1"}`, "Cookie", cookie, ui.CSRFHeader, v.CSRF)
	if got := f.svc.whats(); a.status != 200 || got != "Approve "+submitted+" h1 reviewer" {
		t.Fatalf("the reviewer's approve from the page: %d %+v, asked %q", a.status, a.Error, got)
	}
	// A viewer's session reads, and approves nothing.
	a = tdo("POST", "/v1/ui/login", "", "Authorization", "Bearer "+fakeToken("viewer"))
	json.Unmarshal(a.Data, &login)
	v, _ = f.srv.UI.Redeem(login.URL[strings.Index(login.URL, "code=")+5:])
	cookie = ui.CookieName("127.0.0.1:7070") + "=" + v.ID
	a = tdo("POST", "/v1/runs/"+submitted+"/approve", `{"hash":"h1"}`, "Cookie", cookie, ui.CSRFHeader, v.CSRF)
	if a.status != 403 || a.Error.Rule != "role" {
		t.Fatalf("the viewer's approve from the page: %d %+v", a.status, a.Error)
	}
}

// TestStreamEndsWithItsCredential: a principal's event stream ends once
// its token is revoked (or the principal removed): at the round after,
// not when the client chooses to go; the operator's stream goes on.
func TestStreamEndsWithItsCredential(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := httptest.NewServer(f.srv.TCPHandler())
	defer srv.Close()
	b, _ := fakeJobs{f.svc}.Bootstrap(context.Background(), paddock.BootstrapRequest{Project: "app"})
	id := b.Run.ID
	open := func(token string) (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/runs/"+id+"/events/stream", nil)
		req.Host = "127.0.0.1"
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("the stream: %v %v", resp, err)
		}
		return resp, cancel
	}
	viewer, cancelV := open(fakeToken("viewer"))
	defer cancelV()
	operator, cancelO := open("t0k3n")
	defer cancelO()
	f.svc.mu.Lock()
	f.svc.revoked["viewer"] = true
	f.svc.appendLocked(id, "tick")
	f.svc.mu.Unlock()
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(viewer.Body); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the revoked principal's stream ended with %v, want its end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked principal's stream goes on")
	}
	// The operator's is still open: it gets the next event.
	f.svc.mu.Lock()
	f.svc.appendLocked(id, "tock")
	f.svc.mu.Unlock()
	buf := make([]byte, 4096)
	got := ""
	for !strings.Contains(got, "tock") {
		n, err := operator.Body.Read(buf)
		got += string(buf[:n])
		if err != nil {
			t.Fatalf("the operator's stream ended: %v (%q)", err, got)
		}
	}
}
