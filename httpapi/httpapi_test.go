package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/lifecycle"
	"github.com/paddock-dev/paddock/sqlite"
	"github.com/paddock-dev/paddock/workspace"
)

type fixture struct {
	srv  *Server
	h    http.Handler
	repo string
	log  *bytes.Buffer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	g, err := gitx.New(ctx)
	if err != nil {
		t.Skipf("git unavailable: %v", err)
	}
	base := t.TempDir()
	s, err := sqlite.Open(ctx, filepath.Join(base, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ws := filepath.Join(base, "workspaces")
	os.Mkdir(ws, 0o700)
	logb := &bytes.Buffer{}
	logger := slog.New(slog.NewTextHandler(logb, nil))
	m, err := lifecycle.NewManager(ctx, lifecycle.Config{Store: s, Git: g, Providers: workspace.Providers(g, ws), WorkspacesDir: ws, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Manager: m, Logger: logger, Token: "t0k3n", Status: func() paddock.DaemonStatus { return paddock.DaemonStatus{PID: 42} }}
	return &fixture{srv: srv, h: srv.Handler(), repo: gittest.NewRepo(t, filepath.Join(base, "repo"), map[string]string{"a": "1"}), log: logb}
}

type answer struct {
	status int
	OK     bool            `json:"ok"`
	Data   json.RawMessage `json:"data"`
	Error  *paddock.Error  `json:"error"`
}

func (f *fixture) do(t *testing.T, h http.Handler, method, path, body string, hdr ...string) answer {
	t.Helper()
	req := httptest.NewRequest(method, "http://paddock"+path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var a answer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		t.Fatalf("%s %s: not an envelope: %q", method, path, rec.Body.String())
	}
	a.status = rec.Code
	if a.OK == (a.Error != nil) || (!a.OK && a.Data != nil) {
		t.Fatalf("%s %s: malformed envelope %q", method, path, rec.Body.String())
	}
	return a
}

func TestEnvelopeAndStatuses(t *testing.T) {
	f := newFixture(t)
	a := f.do(t, f.h, "POST", "/v1/projects", `{"path":"`+f.repo+`","name":"app"}`)
	if a.status != 201 || !a.OK {
		t.Fatalf("add project: %d %+v", a.status, a.Error)
	}
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               paddock.Code
	}{
		{"POST", "/v1/projects", `{"path":"` + f.repo + `","name":"app"}`, 409, paddock.CodeConflict},
		{"POST", "/v1/projects", `{"path":"/x","nmae":"typo"}`, 400, paddock.CodeBadRequest},
		{"POST", "/v1/projects", `{"path":"/x"}{"path":"/y"}`, 400, paddock.CodeBadRequest},
		{"POST", "/v1/projects", `[1,2]`, 400, paddock.CodeBadRequest},
		{"POST", "/v1/projects", `{"path":"` + strings.Repeat("x", MaxBody) + `"}`, 413, paddock.CodeTooLarge},
		{"GET", "/v1/projects/nope", "", 404, paddock.CodeNotFound},
		{"GET", "/v1/runs/r-none", "", 404, paddock.CodeNotFound},
		{"GET", "/v1/runs?all=maybe", "", 400, paddock.CodeBadRequest},
		{"GET", "/v1/nothing", "", 404, paddock.CodeNotFound},
		{"POST", "/v1/runs", `{"project":"app","base":"--exec=x"}`, 400, paddock.CodeBadRequest},
		{"POST", "/v1/projects/app/unlock", `{}`, 400, paddock.CodeBadRequest},
		{"PATCH", "/v1/projects/app", `{}`, 400, paddock.CodeBadRequest},
		{"PATCH", "/v1/projects/app", `{"allow_attributon":[]}`, 400, paddock.CodeBadRequest},
		{"PATCH", "/v1/projects/nope", `{"default_protect":true}`, 404, paddock.CodeNotFound},
	} {
		a := f.do(t, f.h, tc.method, tc.path, tc.body)
		if a.status != tc.status || a.Error == nil || a.Error.Code != tc.code {
			t.Errorf("%s %s: %d %+v, want %d %s", tc.method, tc.path, a.status, a.Error, tc.status, tc.code)
		}
	}
	a = f.do(t, f.h, "PATCH", "/v1/projects/app", `{"protect":["secrets/**"],"allow_attribution":["credit-trailer"]}`)
	var p paddock.Project
	json.Unmarshal(a.Data, &p)
	if a.status != 200 || len(p.AttributionAllow) != 1 || p.AttributionAllow[0] != "credit-trailer" || p.Protected[len(p.Protected)-1] != "secrets/**" {
		t.Fatalf("set project: %d %+v %s", a.status, a.Error, a.Data)
	}
	a = f.do(t, f.h, "POST", "/v1/runs", `{"project":"app"}`)
	var r paddock.Run
	json.Unmarshal(a.Data, &r)
	if a.status != 201 || r.State() != paddock.StateReady {
		t.Fatalf("create: %d %+v", a.status, a.Error)
	}
	a = f.do(t, f.h, "GET", "/v1/runs", "")
	if !strings.HasPrefix(string(a.Data), "[") {
		t.Fatalf("runs: %s", a.Data)
	}
	a = f.do(t, f.h, "GET", "/v1/status", "")
	if !strings.Contains(string(a.Data), `"pid":42`) {
		t.Fatalf("status: %s", a.Data)
	}
	// Empty lists are [] rather than null, for clients in any language.
	a = f.do(t, f.h, "POST", "/v1/gc", `{"dry_run":true}`)
	if string(a.Data) != "[]" {
		t.Fatalf("gc: %s", a.Data)
	}
}

func TestStatusTable(t *testing.T) {
	seen := map[int]bool{}
	for _, c := range paddock.Codes {
		s := Status(c)
		if s < 400 {
			t.Errorf("%s maps to %d", c, s)
		}
		seen[s] = true
	}
	if Status(paddock.CodeInternal) != 500 || Status("made-up") != 500 || len(seen) < 7 {
		t.Errorf("table: %v", seen)
	}
}

func TestGuards(t *testing.T) {
	f := newFixture(t)
	tcp := f.srv.TCPHandler()
	for _, tc := range []struct {
		name string
		h    http.Handler
		hdr  []string
		want int
	}{
		{"unix ok", f.h, nil, 200},
		{"unix origin", f.h, []string{"Origin", "http://evil.example"}, 403},
		{"unix referer", f.h, []string{"Referer", "http://evil.example/x"}, 403},
		{"tcp no token", tcp, nil, 403},
		{"tcp token", tcp, []string{"Authorization", "Bearer t0k3n"}, 200},
		{"tcp bad token", tcp, []string{"Authorization", "Bearer t0k3"}, 403},
	} {
		req := httptest.NewRequest("GET", "http://127.0.0.1:7070/v1/projects", nil)
		for i := 0; i+1 < len(tc.hdr); i += 2 {
			req.Header.Set(tc.hdr[i], tc.hdr[i+1])
		}
		rec := httptest.NewRecorder()
		tc.h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, rec.Code, tc.want)
		}
	}
	// A rebinding name is refused even with the token.
	req := httptest.NewRequest("GET", "http://evil.example:7070/v1/projects", nil)
	req.Header.Set("Authorization", "Bearer t0k3n")
	rec := httptest.NewRecorder()
	tcp.ServeHTTP(rec, req)
	if rec.Code != 403 {
		t.Errorf("foreign Host: %d", rec.Code)
	}
}

func TestInternalErrorsHideDetail(t *testing.T) {
	f := newFixture(t)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/x", nil)
	secret := errors.New("open /home/alice/.ssh/id_ed25519: permission denied")
	f.srv.fail(rec, req, secret)
	body := rec.Body.String()
	if rec.Code != 500 || strings.Contains(body, "alice") || !strings.Contains(body, "correlation id") {
		t.Fatalf("answer: %d %s", rec.Code, body)
	}
	var a answer
	json.Unmarshal(rec.Body.Bytes(), &a)
	id, _ := a.Error.Details["correlation_id"].(string)
	if id == "" || !strings.Contains(f.log.String(), id) || !strings.Contains(f.log.String(), "alice") {
		t.Fatalf("log lacks the detail or the id %q:\n%s", id, f.log)
	}
}

func TestEventsWait(t *testing.T) {
	f := newFixture(t)
	f.do(t, f.h, "POST", "/v1/projects", `{"path":"`+f.repo+`","name":"app"}`)
	var r paddock.Run
	json.Unmarshal(f.do(t, f.h, "POST", "/v1/runs", `{"project":"app"}`).Data, &r)
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		done <- f.do(t, f.h, "GET", "/v1/runs/"+r.ID+"/events?after="+itoa(r.LastSeq)+"&wait=20s", "")
	}()
	time.Sleep(100 * time.Millisecond)
	f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/retain", "")
	a := <-done
	var evs []paddock.Event
	json.Unmarshal(a.Data, &evs)
	if len(evs) == 0 || evs[0].Seq != r.LastSeq+1 || time.Since(start) > 10*time.Second {
		t.Fatalf("waited events: %s", a.Data)
	}
	for _, bad := range []string{"after=-1", "after=x", "wait=soon", "limit=-3"} {
		if a := f.do(t, f.h, "GET", "/v1/runs/"+r.ID+"/events?"+bad, ""); a.status != 400 {
			t.Errorf("%s: %d", bad, a.status)
		}
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestStrictJSON: a body that could be read two ways is refused, on the
// control routes and on a tool's arguments, naming the key, and nothing is
// written: a key twice (exactly or in another case, at any depth), a key
// spelled otherwise than its field, invalid UTF-8 or a lone surrogate.
func TestStrictJSON(t *testing.T) {
	f := newFixture(t)
	for body, key := range map[string]string{
		`{"path":"/a","path":"` + f.repo + `"}`:                     "path",
		`{"path":"/a","Path":"` + f.repo + `"}`:                     "Path",
		`{"PATH":"` + f.repo + `"}`:                                 "PATH",
		`{"path":"` + f.repo + "\xff" + `"}`:                        "path",
		`{"path":"` + f.repo + `\udc00"}`:                           "path",
		`{"path":"` + f.repo + `","protect":["a"],"Protect":["b"]}`: "Protect",
	} {
		a := f.do(t, f.h, "POST", "/v1/projects", body)
		if a.status != 400 || a.Error.Code != paddock.CodeBadRequest || a.Error.Details["key"] != key || !strings.Contains(a.Error.Message, key) {
			t.Errorf("%.60q: %d %+v, want bad_request naming %q", body, a.status, a.Error, key)
		}
	}
	if a := f.do(t, f.h, "POST", "/v1/projects", `{"path":"`+f.repo+`","name":"app"}`); a.status != 201 {
		t.Fatalf("add project: %d %+v", a.status, a.Error)
	}
	var r paddock.Run
	json.Unmarshal(f.do(t, f.h, "POST", "/v1/runs", `{"project":"app"}`).Data, &r)
	if a := f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/exec", `{"argv":["true"],"limits":{"procs":1,"Procs":9}}`); a.status != 400 || a.Error.Details["key"] != "limits.Procs" {
		t.Errorf("nested case-variant duplicate: %d %+v", a.status, a.Error)
	}
	before, _ := os.ReadDir(r.Workspace.Root)
	for body, key := range map[string]string{
		`{"path":"a.txt","Path":"b.txt","content":"x"}`:          "Path",
		`{"path":"a.txt","content":"x","content":"y"}`:           "content",
		`{"PATH":"a.txt","content":"x"}`:                         "PATH",
		`{"path":"a.txt","Content":"x"}`:                         "Content",
		`{"path":"bad` + "\xff" + `.txt","content":"x"}`:         "path",
		`{"path":"a.txt","content":"` + "\xc3\x28" + `"}`:        "content",
		`{"path":"a.txt","content":"\ud800"}`:                    "content",
		`{"path":"a.txt","content_base64":"eA==","content":"x"}`: "",
		`{"path":"a.txt","content_base64":"not base64!"}`:        "",
	} {
		a := f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/tools/write", body)
		if a.status != 400 || a.Error.Code != paddock.CodeBadRequest || (key != "" && a.Error.Details["key"] != key) {
			t.Errorf("write %.60q: %d %+v, want bad_request naming %q", body, a.status, a.Error, key)
		}
	}
	if after, _ := os.ReadDir(r.Workspace.Root); len(after) != len(before) {
		t.Errorf("a refused write left a file: %v", after)
	}
	a := f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/tools/edit", `{"path":"a","edits":[{"old_string":"1","new_string":"2","New_String":"3"}]}`)
	if a.status != 400 || a.Error.Details["key"] != "edits[0].New_String" {
		t.Errorf("edit with a nested case variant: %d %+v", a.status, a.Error)
	}
}

// TestEventStream: SSE with ids = seqs; a reconnect with Last-Event-ID
// resumes after it, so every event is seen once, in order.
func TestEventStream(t *testing.T) {
	f := newFixture(t)
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	f.do(t, f.h, "POST", "/v1/projects", `{"path":"`+f.repo+`","name":"app"}`)
	var r paddock.Run
	json.Unmarshal(f.do(t, f.h, "POST", "/v1/runs", `{"project":"app"}`).Data, &r)

	read := func(lastID string, want int) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/runs/"+r.ID+"/events/stream", nil)
		req.Host = "localhost"
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("content type %q", ct)
		}
		var ids []string
		buf := make([]byte, 1<<16)
		var acc string
		for len(ids) < want {
			n, err := resp.Body.Read(buf)
			acc += string(buf[:n])
			for {
				i := strings.Index(acc, "\n\n")
				if i < 0 {
					break
				}
				block := acc[:i]
				acc = acc[i+2:]
				for _, line := range strings.Split(block, "\n") {
					if id, ok := strings.CutPrefix(line, "id: "); ok {
						ids = append(ids, id)
					}
				}
			}
			if err != nil {
				break
			}
		}
		return ids
	}
	if ids := read("", 3); strings.Join(ids, ",") != "1,2,3" {
		t.Fatalf("first read: %v", ids)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/retain", "")
	}()
	if ids := read("3", 1); strings.Join(ids, ",") != "4" {
		t.Fatalf("resumed read: %v", ids)
	}
	if a := f.do(t, f.h, "GET", "/v1/runs/nope/events/stream", ""); a.status != 404 {
		t.Fatalf("unknown run: %d", a.status)
	}
}

// TestExpectSeq: an action that says which seq it saw is refused if the run
// moved on, and changes nothing.
func TestExpectSeq(t *testing.T) {
	f := newFixture(t)
	f.do(t, f.h, "POST", "/v1/projects", `{"path":"`+f.repo+`","name":"app"}`)
	var r paddock.Run
	json.Unmarshal(f.do(t, f.h, "POST", "/v1/runs", `{"project":"app"}`).Data, &r)
	stale := itoa(r.LastSeq - 1)
	for _, path := range []string{"/retain", "/reject", "/checkpoint", "/tools/write"} {
		body := ""
		if path == "/tools/write" {
			body = `{"path":"x.txt","content":"x"}`
		}
		a := f.do(t, f.h, "POST", "/v1/runs/"+r.ID+path+"?expect_seq="+stale, body)
		if a.status != 409 || a.Error.Details["last_seq"] == nil {
			t.Fatalf("%s with a stale seq: %d %+v", path, a.status, a.Error)
		}
	}
	var now paddock.Run
	json.Unmarshal(f.do(t, f.h, "GET", "/v1/runs/"+r.ID, "").Data, &now)
	if now.LastSeq != r.LastSeq || now.State() != paddock.StateReady {
		t.Fatalf("a refused action changed the run: %d %s", now.LastSeq, now.State())
	}
	if _, err := os.Stat(filepath.Join(r.Workspace.Root, "x.txt")); err == nil {
		t.Fatal("a refused tool call wrote")
	}
	if a := f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/retain?expect_seq="+itoa(r.LastSeq), ""); a.status != 200 {
		t.Fatalf("with the right seq: %d %+v", a.status, a.Error)
	}
	if a := f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/retain?expect_seq=x", ""); a.status != 400 {
		t.Fatalf("a bad expect_seq: %d", a.status)
	}
}

// TestOpenAPIMatchesRoutes: the checked-in document describes every route
// and no route that does not exist.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	s := &Server{}
	s.routes()
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi.json: %v", err)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	registered := map[string]bool{}
	for _, p := range s.patterns {
		registered[p] = true
		if !documented[p] {
			t.Errorf("route %s is not in openapi.json", p)
		}
	}
	for d := range documented {
		if !registered[d] {
			t.Errorf("openapi.json describes %s, which is not a route", d)
		}
	}
	f := newFixture(t)
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest("GET", "http://paddock/v1/openapi.json", nil))
	if rec.Code != 200 || !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("GET /v1/openapi.json: %d", rec.Code)
	}
}

// TestBootstrapAndRunTokens: a bootstrap returns a run and its token; the
// token reaches that run's agent-side routes only.
func TestBootstrapAndRunTokens(t *testing.T) {
	f := newFixture(t)
	f.srv.Manager.ArtifactsDir = t.TempDir()
	tcp := f.srv.TCPHandler()
	op := []string{"Authorization", "Bearer t0k3n"}
	call := func(method, path, body string, hdr []string) answer {
		req := httptest.NewRequest(method, "http://127.0.0.1:7070"+path, strings.NewReader(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		tcp.ServeHTTP(rec, req)
		var a answer
		json.Unmarshal(rec.Body.Bytes(), &a)
		a.status = rec.Code
		return a
	}
	call("POST", "/v1/projects", `{"path":"`+f.repo+`","name":"app"}`, op)
	boot := func() paddock.BootstrapResult {
		a := call("POST", "/v1/bootstrap", `{"project":"app","agent":{"name":"coder","workspace":"write"},"task":"fix the bug","inputs":["a"]}`, op)
		if a.status != 201 {
			t.Fatalf("bootstrap: %d %+v", a.status, a.Error)
		}
		var b paddock.BootstrapResult
		json.Unmarshal(a.Data, &b)
		return b
	}
	b1, b2 := boot(), boot()
	if !strings.HasPrefix(b1.Token, "pdk_run_") || b1.Run.ID == b2.Run.ID {
		t.Fatalf("bootstrap results: %+v %+v", b1, b2)
	}
	agent := []string{"Authorization", "Bearer " + b1.Token}
	for _, tc := range []struct {
		method, path, body string
		want               int
		code               paddock.Code
	}{
		{"GET", "/v1/runs/" + b1.Run.ID, "", 200, ""},
		{"GET", "/v1/runs/" + b1.Run.ID + "/artifacts/task", "", 200, ""},
		{"POST", "/v1/runs/" + b1.Run.ID + "/tools/write", `{"path":"x.txt","content":"x"}`, 200, ""},
		{"GET", "/v1/runs/" + b2.Run.ID, "", 403, paddock.CodeRunMismatch},
		{"POST", "/v1/runs/" + b2.Run.ID + "/tools/read", `{"path":"a"}`, 403, paddock.CodeRunMismatch},
		{"POST", "/v1/runs/" + b1.Run.ID + "/approve", `{"hash":"x"}`, 403, paddock.CodeForbidden},
		{"POST", "/v1/runs/" + b1.Run.ID + "/apply", `{}`, 403, paddock.CodeForbidden},
		{"POST", "/v1/runs/" + b1.Run.ID + "/retain", ``, 403, paddock.CodeForbidden},
		{"DELETE", "/v1/runs/" + b1.Run.ID, ``, 403, paddock.CodeForbidden},
		{"GET", "/v1/runs", "", 403, paddock.CodeForbidden},
		{"PATCH", "/v1/projects/app", `{"allow_attribution":["co-author-trailer"]}`, 403, paddock.CodeForbidden},
		{"POST", "/v1/bootstrap", `{}`, 403, paddock.CodeForbidden},
		{"POST", "/v1/runs/" + b1.Run.ID + "/exec", `{"argv":["true"],"allow_degraded":true}`, 403, paddock.CodeForbidden},
		{"POST", "/v1/runs/" + b1.Run.ID + "/exec/stream", `{"argv":["true"],"allow_degraded":true}`, 403, paddock.CodeForbidden},
		{"POST", "/v1/runs/" + b1.Run.ID + "/exec", `{"argv":["true"],"net":"host"}`, 403, paddock.CodeForbidden},
		{"POST", "/v1/runs/" + b1.Run.ID + "/jobs", `{"kind":"exec","exec":{"argv":["true"],"net":"allow=example.com"}}`, 403, paddock.CodeForbidden},
	} {
		a := call(tc.method, tc.path, tc.body, agent)
		if a.status != tc.want || (tc.code != "" && (a.Error == nil || a.Error.Code != tc.code)) {
			t.Errorf("%s %s with the run's token: %d %+v, want %d %s", tc.method, tc.path, a.status, a.Error, tc.want, tc.code)
		}
	}
	if a := call("GET", "/v1/runs/"+b1.Run.ID, "", []string{"Authorization", "Bearer pdk_run_forged"}); a.status != 403 {
		t.Errorf("forged token: %d", a.status)
	}
	// A run made without a bootstrap has no task.
	var plain paddock.Run
	json.Unmarshal(call("POST", "/v1/runs", `{"project":"app"}`, op).Data, &plain)
	if a := call("GET", "/v1/runs/"+plain.ID+"/artifacts/task", "", op); a.status != 409 || a.Error.Code != paddock.CodeNotBootstrapped {
		t.Errorf("task of a run never bootstrapped: %d %+v", a.status, a.Error)
	}
	if a := call("GET", "/v1/runs/"+b1.Run.ID+"/artifacts/logs", "", op); a.Error == nil || a.Error.Code != paddock.CodeConflict {
		t.Errorf("logs: %+v", a.Error)
	}
	for _, bad := range []string{`{"project":"app","agent":{"name":"Bad Name"},"task":"x"}`, `{"project":"app","agent":{"name":"a"},"task":""}`,
		`{"project":"app","agent":{"name":"a"},"task":"x","inputs":["../etc"]}`, `{"project":"app","agent":{"name":"a","workspace":"admin"},"task":"x"}`} {
		if a := call("POST", "/v1/bootstrap", bad, op); a.status != 400 {
			t.Errorf("%s: %d", bad, a.status)
		}
	}
}

// TestAnswersPassTheRunsFunnel: an answer about a run masks the run's
// declared secrets whatever produced it; what an agent's token sends is
// recorded masked.
func TestAnswersPassTheRunsFunnel(t *testing.T) {
	f := newFixture(t)
	const v = "s3cr3t-value-42"
	f.srv.Manager.Secret = func(name string) (string, bool) { return v, name == "API_TOKEN" }
	f.do(t, f.h, "POST", "/v1/projects", `{"path":"`+f.repo+`"}`)
	a := f.do(t, f.h, "POST", "/v1/runs", `{"project":"repo","kind":"clone","secrets":["API_TOKEN"]}`)
	var r paddock.Run
	if err := json.Unmarshal(a.Data, &r); err != nil || r.ID == "" {
		t.Fatalf("create: %d %s %+v", a.status, a.Data, a.Error)
	}
	a = f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/checkpoint", `{"reason":"saving `+v+`"}`)
	recorded, _ := f.srv.Manager.Events(context.Background(), r.ID, 0, 0)
	evs, _ := json.Marshal(recorded)
	if !a.OK || strings.Contains(string(a.Data), v) || !strings.Contains(string(a.Data), "saving [REDACTED:API_TOKEN]") ||
		strings.Contains(string(evs), v) {
		t.Fatalf("checkpoint: %s\nrecorded: %s", a.Data, evs)
	}
	// Whatever an answer holds, it leaves masked.
	req := httptest.NewRequest("GET", "http://paddock/v1/runs/"+r.ID, nil)
	req.SetPathValue("id", r.ID)
	rec := httptest.NewRecorder()
	writeData(f.srv.runFunnel(rec, req), 200, map[string]string{"echo": "a " + v})
	if got := rec.Body.String(); strings.Contains(got, v) || !strings.Contains(got, "a [REDACTED:API_TOKEN]") {
		t.Fatalf("the funnel let through: %s", got)
	}
}
