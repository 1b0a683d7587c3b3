package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/tools"
	"github.com/paddock-dev/paddock/ui"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The API's tests serve fakes of its services (fake_test.go): what they
// hold is the API's side (routes, reach, statuses, envelopes, hardening,
// streams); what the manager does with a call is lifecycle's to test.

type fixture struct {
	srv *Server
	// svc is what the fakes share: the runs, and the record of every
	// call to any of them.
	svc *fakeState
	h   http.Handler
	log *bytes.Buffer
}

// newFixture serves every service, each a fake.
func newFixture(t *testing.T) *fixture { return newFixtureOf(t, serveAll) }

// newFixtureOf serves only the fakes serve gives the server: a test of one
// concern builds only its own. The others' fields stay nil, so a route of
// theirs reached by mistake panics.
func newFixtureOf(t *testing.T, serve func(*Server, *fakeState)) *fixture {
	t.Helper()
	logb := &bytes.Buffer{}
	logger := slog.New(slog.NewTextHandler(logb, nil))
	svc := newFakeState()
	srv := &Server{Logger: logger, Token: "t0k3n", Status: func() paddock.DaemonStatus { return paddock.DaemonStatus{PID: 42} }}
	serve(srv, svc)
	srv.MCP = fakeMCP{svc}
	srv.UI = ui.NewSessions()
	srv.UIAddr = func(context.Context) (string, error) { return "127.0.0.1:4567", nil }
	return &fixture{srv: srv, svc: svc, h: srv.Handler(), log: logb}
}

// fakeMCP stands for the daemon's MCP server: it records the request as a
// call (so a test sees whether it was reached, and as whom) and echoes the
// body back, as a message stream would carry what a call answered.
type fakeMCP struct{ svc *fakeState }

func (m fakeMCP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.svc.record(r.Context(), "MCP", r.Method, r.PathValue("id"))
	switch r.Method {
	case "DELETE":
		w.WriteHeader(http.StatusNoContent)
	case "GET":
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("event: message\ndata: {}\n\n"))
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}
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

// newRun makes a run through the API.
func (f *fixture) newRun(t *testing.T) paddock.Run {
	t.Helper()
	var r paddock.Run
	a := f.do(t, f.h, "POST", "/v1/runs", `{"project":"app"}`)
	if err := json.Unmarshal(a.Data, &r); err != nil || r.ID == "" {
		t.Fatalf("create: %d %s %+v", a.status, a.Data, a.Error)
	}
	f.svc.asked()
	return r
}

func TestEnvelopeAndStatuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.do(t, f.h, "POST", "/v1/projects", `{"path":"/src/app","name":"app"}`)
	if a.status != 201 || !a.OK || f.svc.whats() != "AddProject /src/app app" {
		t.Fatalf("add project: %d %+v", a.status, a.Error)
	}
	// What the API refuses itself never reaches the service.
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               paddock.Code
	}{
		{"POST", "/v1/projects", `{"path":"/x","nmae":"typo"}`, 400, paddock.CodeBadRequest},
		{"POST", "/v1/projects", `{"path":"/x"}{"path":"/y"}`, 400, paddock.CodeBadRequest},
		{"POST", "/v1/projects", `[1,2]`, 400, paddock.CodeBadRequest},
		{"POST", "/v1/projects", `{"path":"` + strings.Repeat("x", MaxBody) + `"}`, 413, paddock.CodeTooLarge},
		{"GET", "/v1/runs?all=maybe", "", 400, paddock.CodeBadRequest},
		{"GET", "/v1/nothing", "", 404, paddock.CodeNotFound},
		{"PUT", "/v1/projects", "", 404, paddock.CodeNotFound},
		{"PATCH", "/v1/projects/app", `{"allow_attributon":[]}`, 400, paddock.CodeBadRequest},
		{"POST", "/v1/runs/r-1/apply", `{"three_way":true}`, 400, paddock.CodeBadRequest},
		{"POST", "/v1/runs/r-1/apply", `{"to":"worktree","branch":"b"}`, 400, paddock.CodeBadRequest},
		{"POST", "/v1/runs/r-1/apply", `{"to":"moon"}`, 400, paddock.CodeBadRequest},
	} {
		a := f.do(t, f.h, tc.method, tc.path, tc.body)
		if a.status != tc.status || a.Error == nil || a.Error.Code != tc.code {
			t.Errorf("%s %s: %d %+v, want %d %s", tc.method, tc.path, a.status, a.Error, tc.status, tc.code)
		}
		if asked := f.svc.whats(); asked != "" {
			t.Errorf("%s %s: the service was asked %s", tc.method, tc.path, asked)
		}
	}
	// What the service refuses comes back in the envelope with its code's
	// status (the manager's own refusals are lifecycle's tests).
	for _, c := range paddock.Codes {
		f.svc.fail = paddock.Errorf(c, "refused")
		a := f.do(t, f.h, "GET", "/v1/projects/app", "")
		if a.status != Status(c) || a.Error == nil || a.Error.Code != c {
			t.Errorf("%s: %d %+v, want %d", c, a.status, a.Error, Status(c))
		}
	}
	f.svc.fail = nil
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
	f.svc.asked()
	a = f.do(t, f.h, "POST", "/v1/gc", `{"dry_run":true}`)
	if string(a.Data) != "[]" || f.svc.whats() != "GC true" {
		t.Fatalf("gc: %s", a.Data)
	}
}

// TestEveryRoute: each route of the table, called as a client calls it,
// asks the service what it says (path values, body, the caller) and
// answers with the route's status.
func TestEveryRoute(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.srv.Doctor = func(context.Context) *paddock.DoctorReport { return &paddock.DoctorReport{} }
	f.srv.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "paddock_up 1\n") })
	// One node of a cluster: every run is its own, nothing is forwarded.
	f.srv.Cluster = &fakeCluster{svc: f.svc, self: paddock.Node{ID: "n0", State: paddock.NodeAlive}}
	f.h = f.srv.Handler()
	b, _ := fakeJobs{f.svc}.Bootstrap(context.Background(), paddock.BootstrapRequest{Project: "app"})
	id := b.Run.ID
	f.svc.asked()
	run := "/v1/runs/" + id
	covered := map[string]bool{}
	// What a success that made something answers; the rest answer 200.
	made := map[string]int{"POST /v1/projects": 201, "POST /v1/runs": 201, "POST /v1/bootstrap": 201, "POST /v1/runs/{id}/jobs": 202,
		"POST /v1/runs/{id}/requests": 201, "POST /v1/agents": 201, "DELETE /v1/runs/{id}/mcp": 204, "POST /v1/runs/{id}/review": 201, "POST /v1/runs/{id}/fork": 201, "POST /v1/flows": 201, "POST /v1/ui/login": 201, "POST /v1/import": 201, "POST /v1/runs/{id}/queue": 201, "POST /v1/principals": 201, "POST /v1/tokens": 201,
		"POST /v1/runs/{id}/exec/attach": 101}
	for _, tc := range []struct{ method, path, body, asks string }{
		{"GET", "/healthz", "", ""},
		{"GET", "/v1/openapi.json", "", ""},
		{"GET", "/v1/whoami", "", ""},
		{"POST", "/v1/principals", `{"name":"ann","role":"reviewer","projects":["app"]}`, "AddPrincipal ann reviewer [app] unknown"},
		{"GET", "/v1/principals", "", "Principals"},
		{"GET", "/v1/principals/ann", "", "Principal ann"},
		{"PATCH", "/v1/principals/ann", `{"role":"viewer"}`, "SetPrincipal ann viewer unknown"},
		{"DELETE", "/v1/principals/ann", "", "RemovePrincipal ann unknown"},
		{"POST", "/v1/tokens", `{"principal":"ann","expires":"30d"}`, "CreateToken ann 30d unknown"},
		{"GET", "/v1/tokens?principal=ann", "", "Tokens ann"},
		{"DELETE", "/v1/tokens/t1", "", "RevokeToken t1 unknown"},
		{"GET", "/metrics", "", ""},
		{"GET", "/v1/status", "", ""},
		{"GET", "/v1/doctor", "", ""},
		{"POST", "/v1/gc", `{}`, "GC false"},
		{"POST", "/v1/ui/login", "", ""},
		{"GET", "/v1/bundle-key", "", "BundleKey"},
		{"POST", "/v1/import?project=app&kind=clone&trust=ed25519+K&untrusted=true", "TAR", "Import app clone [ed25519 K] true TAR"},
		{"GET", run + "/bundle", "", "Run " + id + "; Bundle " + id},
		{"GET", "/v1/queue?project=app&all=true", "", "Queue app true"},
		{"GET", run + "/changeset/blame?hash=h1", "", "Blame " + id + " h1"},
		{"POST", run + "/approve", `{"hash":"h1","hunks":[1,3]}`, "ApproveHunks " + id + " h1 [1 3] unknown"},
		{"POST", run + "/queue", `{"branch":"main","accept":"t"}`, "QueueAdd " + id + " main t unknown"},
		{"GET", run + "/queue", "", "QueueEntry " + id},
		{"DELETE", run + "/queue", "", "QueueRemove " + id + " unknown"},
		{"POST", run + "/queue/undo", "", "QueueUndo " + id + " unknown"},
		{"POST", "/v1/projects", `{"path":"/src/app","name":"app"}`, "AddProject /src/app app"},
		{"GET", "/v1/projects", "", "Projects"},
		{"GET", "/v1/projects/app", "", "Project app"},
		{"PATCH", "/v1/projects/app", `{"protect":["a"]}`, "SetProject app unknown [a]"},
		{"DELETE", "/v1/projects/app", "", "RemoveProject app"},
		{"POST", "/v1/projects/app/unlock", `{"force":true}`, "Unlock app unknown true"},
		{"POST", "/v1/runs", `{"project":"app","secrets":["K"]}`, "Create app [K]"},
		{"POST", "/v1/bootstrap", `{"project":"app","agent":{"name":"coder"},"task":"fix"}`, "Bootstrap app coder fix"},
		{"GET", "/v1/runs?project=app&all=true", "", "Runs app true"},
		{"GET", run, "", "Run " + id},
		{"DELETE", run, "", "Remove " + id},
		{"POST", run + "/retain", "", "Retain " + id},
		{"POST", run + "/review", `{"agent":"strict"}`, "Review " + id + " strict"},
		{"POST", run + "/fork", `{"count":3}`, "Fork " + id + " 3"},
		{"POST", run + "/reject", "", "Reject " + id},
		{"POST", run + "/checkpoint", `{"reason":"lunch"}`, "Checkpoint " + id + " lunch"},
		{"POST", run + "/checkpoint", ``, "Checkpoint " + id + " requested by unknown"},
		{"POST", run + "/resume", "", "Resume " + id},
		{"POST", run + "/adopt", "", "Adopt " + id + " unknown"},
		{"GET", "/v1/nodes", "", "Nodes"},
		{"GET", "/v1/events/stream", "", ""},
		{"GET", run + "/artifacts/task", "", "Artifact " + id + " task"},
		{"GET", run + "/events?after=1&limit=2", "", "Events " + id + " 1 2"},
		{"GET", run + "/events/stream", "", "Events " + id + " 0 1"},
		{"GET", run + "/tools", "", "Tools " + id},
		{"POST", run + "/tools/read", `{"path":"a"}`, "CallTool " + id + ` read {"path":"a"}`},
		{"POST", run + "/tools/list", ``, "CallTool " + id + ` list {}`},
		{"POST", run + "/inbox?name=n.txt", "hello", fmt.Sprint("Deliver ", id, " n.txt hello ", tools.DefaultInboxLimits.MaxFile)},
		{"POST", run + "/exec", `{"argv":["true"]}`, "Exec " + id + " [true] "},
		{"POST", run + "/exec/stream", `{"argv":["true"]}`, "ExecStream " + id + " [true] "},
		{"POST", run + "/exec/attach", `{"argv":["true"]}`, "ExecAttach " + id + " [true]  none"},
		{"POST", run + "/jobs", `{"kind":"exec","exec":{"argv":["true"]}}`, "StartJob " + id + " exec"},
		{"GET", run + "/jobs", "", "Jobs " + id},
		{"GET", run + "/status", "", "JobStatus " + id},
		{"GET", run + "/jobs/j-1", "", "Job " + id + " j-1"},
		{"POST", run + "/jobs/j-1/cancel", "", "CancelJob " + id + " j-1"},
		{"GET", run + "/changeset", "", "ChangeSet " + id},
		{"GET", run + "/changeset/diff?hash=h1", "", "ChangeSetDiff " + id + " h1"},
		{"POST", run + "/submit", `{"expect_hash":"h1"}`, "SubmitExpecting " + id + " h1"},
		{"POST", run + "/approve", `{"hash":"h1"}`, "Approve " + id + " h1 unknown"},
		{"POST", run + "/apply", `{"branch":"b","author_name":"A","author_email":"a@x"}`, "Apply " + id + " b A a@x"},
		{"POST", run + "/apply", `{"to":"worktree","three_way":true}`, "ApplyToWorktree " + id + " true"},
		{"POST", run + "/undo", "", "Undo " + id},
		{"GET", run + "/capabilities", "", "Capabilities " + id},
		{"POST", run + "/verify", `{"checks":["test"]}`, "Verify " + id + " [test]"},
		{"GET", run + "/requests", "", "AccessRequests " + id},
		{"POST", run + "/requests", `{"kind":"command","command":["go","vet"],"reason":"lint"}`, "RequestAccess " + id + " command"},
		{"POST", run + "/requests/q-1/grant", `{"note":"ok"}`, "DecideAccess " + id + " q-1 true unknown"},
		{"POST", run + "/requests/q-1/deny", "", "DecideAccess " + id + " q-1 false unknown"},
		{"POST", run + "/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Run " + id + "; MCP POST " + id},
		{"GET", run + "/mcp", "", "Run " + id + "; MCP GET " + id},
		{"DELETE", run + "/mcp", "", "Run " + id + "; MCP DELETE " + id},
		{"POST", "/v1/flows", `{"workflow":"task-with-review","project":"app","task":"fix"}`, "StartFlow task-with-review app fix"},
		{"GET", "/v1/flows?project=app", "", "Flows app"},
		{"GET", "/v1/flows/f-1", "", "Flow f-1"},
		{"POST", run + "/menu/done", `{"head":"h"}`, "PickEvent " + id + " done h"},
		{"GET", "/v1/agents", "", "Agents"},
		{"GET", "/v1/projects/app/manifest", "", "ProjectManifest app"},
		{"GET", "/v1/projects/app/checkout", "", "ProjectCheckout app"},
		{"POST", "/v1/agents", `{"file":"t.toml","source":"name = \"t\""}`, "AddAgent t.toml"},
		{"GET", "/v1/agents/t", "", "Agent t"},
		{"DELETE", "/v1/agents/t", "", "RemoveAgent t"},
	} {
		req := httptest.NewRequest(tc.method, "http://paddock"+tc.path, strings.NewReader(tc.body))
		if strings.HasSuffix(tc.path, "/stream") && tc.method == "GET" {
			ctx, cancel := context.WithCancel(req.Context())
			cancel() // the stream's first look, then its end
			req = req.WithContext(ctx)
		}
		rec := httptest.NewRecorder()
		if strings.HasSuffix(tc.path, "/exec/attach") {
			a := attach(t, f.h, tc.path, tc.body) // a recorder cannot be switched over
			a.send(paddock.FrameEOF, "")
			a.end()
			rec.Code = a.status
		} else {
			f.h.ServeHTTP(rec, req)
		}
		_, pattern := routeMux().Handler(req)
		want, ok := made[pattern]
		if !ok {
			want = http.StatusOK
		}
		if rec.Code != want {
			t.Errorf("%s %s: %d, want %d (%s): %s", tc.method, tc.path, rec.Code, want, pattern, rec.Body)
		}
		if asked := f.svc.whats(); asked != tc.asks {
			t.Errorf("%s %s asked %q, want %q", tc.method, tc.path, asked, tc.asks)
		}
		covered[pattern] = true
	}
	for _, rt := range Routes() {
		if !covered[rt.Method+" "+rt.Path] {
			t.Errorf("route %s %s is not called here", rt.Method, rt.Path)
		}
	}
}

// routeMux matches a request to its route's pattern, as the server does.
func routeMux() *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range Routes() {
		mux.HandleFunc(rt.Method+" "+rt.Path, func(http.ResponseWriter, *http.Request) {})
	}
	return mux
}

// TestExecStream: the output as it comes, then the result without it; an
// error before the command is an envelope, one after ends the stream.
func TestExecStream(t *testing.T) {
	t.Parallel()
	f := newFixtureOf(t, func(s *Server, st *fakeState) { s.Broker = fakeBroker{st} })
	r := f.svc.newRun("app", nil)
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest("POST", "http://paddock/v1/runs/"+r.ID+"/exec/stream", strings.NewReader(`{"argv":["true"]}`)))
	if ct := rec.Header().Get("Content-Type"); rec.Code != 200 || ct != "application/x-ndjson" {
		t.Fatalf("exec stream: %d %s", rec.Code, ct)
	}
	var got []string
	dec := json.NewDecoder(rec.Body)
	for {
		var line StreamLine
		if dec.Decode(&line) != nil {
			break
		}
		switch {
		case line.Result != nil:
			got = append(got, fmt.Sprintf("result %q %q", line.Result.Stdout, line.Result.Stderr))
		default:
			got = append(got, line.Stream+" "+string(line.Data))
		}
	}
	if strings.Join(got, "; ") != `stdout out; stderr err; result "" ""` {
		t.Fatalf("lines: %q", got)
	}
	if a := f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/exec/stream", `{"argv":"true"}`); a.status != 400 {
		t.Fatalf("a bad request: %d", a.status)
	}
	f.svc.asked()
	f.svc.fail = errors.New("open /home/alice/x: denied")
	rec = httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest("POST", "http://paddock/v1/runs/"+r.ID+"/exec/stream", strings.NewReader(`{"argv":["true"]}`)))
	var line StreamLine
	if json.NewDecoder(rec.Body).Decode(&line); line.Error == nil || line.Error.Code != paddock.CodeInternal || strings.Contains(line.Error.Message, "alice") {
		t.Fatalf("a failed command: %+v", line.Error)
	}
}

func TestStatusTable(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
		{"tcp no token", tcp, nil, 401},
		{"tcp token", tcp, []string{"Authorization", "Bearer t0k3n"}, 200},
		{"tcp bad token", tcp, []string{"Authorization", "Bearer t0k3"}, 401},
		{"tcp not bearer", tcp, []string{"Authorization", "Basic dDBrM246"}, 401},
		{"tcp unknown run token", tcp, []string{"Authorization", "Bearer pdk_run_forged"}, 401},
		{"unix bad token", f.h, []string{"Authorization", "Bearer t0k3"}, 401},
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
		// A credential missing or not known is 401, says how to
		// authenticate (RFC 9110 11.6.1) and carries the envelope's error.
		var a answer
		json.Unmarshal(rec.Body.Bytes(), &a)
		challenge := rec.Header().Get("WWW-Authenticate")
		if tc.want == 401 && (!strings.HasPrefix(challenge, "Bearer") || a.OK || a.Error == nil || a.Error.Code != paddock.CodeUnauthorized) {
			t.Errorf("%s: WWW-Authenticate %q, error %+v", tc.name, challenge, a.Error)
		}
		if tc.want != 401 && challenge != "" {
			t.Errorf("%s: %d with WWW-Authenticate %q", tc.name, rec.Code, challenge)
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
	// The health check needs no token; the rest of the guard still holds.
	for _, tc := range []struct {
		host, origin string
		want         int
	}{{"127.0.0.1:7070", "", 200}, {"evil.example:7070", "", 403}, {"127.0.0.1:7070", "http://evil.example", 403}} {
		req := httptest.NewRequest("GET", "http://"+tc.host+"/healthz", nil)
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		rec := httptest.NewRecorder()
		tcp.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("healthz on %s %s: %d, want %d", tc.host, tc.origin, rec.Code, tc.want)
		}
	}
}

func TestInternalErrorsHideDetail(t *testing.T) {
	t.Parallel()
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
	// So is a service's error on a route.
	f.svc.fail = secret
	if a := f.do(t, f.h, "GET", "/v1/projects", ""); a.status != 500 || strings.Contains(a.Error.Message, "alice") || a.Error.Details["correlation_id"] == nil {
		t.Fatalf("a route's internal error: %d %+v", a.status, a.Error)
	}
}

func TestEventsWait(t *testing.T) {
	t.Parallel()
	f := newFixtureOf(t, func(s *Server, st *fakeState) { s.Runs = fakeRuns{st} })
	r := f.newRun(t)
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
	if asked := f.svc.whats(); !strings.Contains(asked, "WaitEvents "+r.ID+" "+itoa(r.LastSeq)+" 0") {
		t.Fatalf("asked: %s", asked)
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
// asked of the service: a key twice (exactly or in another case, at any
// depth), a key spelled otherwise than its field, invalid UTF-8 or a lone
// surrogate. (A tool's own reading of its arguments is tools' test.)
func TestStrictJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const repo = "/src/app"
	for body, key := range map[string]string{
		`{"path":"/a","path":"` + repo + `"}`:                     "path",
		`{"path":"/a","Path":"` + repo + `"}`:                     "Path",
		`{"PATH":"` + repo + `"}`:                                 "PATH",
		`{"path":"` + repo + "\xff" + `"}`:                        "path",
		`{"path":"` + repo + `\udc00"}`:                           "path",
		`{"path":"` + repo + `","protect":["a"],"Protect":["b"]}`: "Protect",
	} {
		a := f.do(t, f.h, "POST", "/v1/projects", body)
		if a.status != 400 || a.Error.Code != paddock.CodeBadRequest || a.Error.Details["key"] != key || !strings.Contains(a.Error.Message, key) {
			t.Errorf("%.60q: %d %+v, want bad_request naming %q", body, a.status, a.Error, key)
		}
	}
	r := f.newRun(t)
	if a := f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/exec", `{"argv":["true"],"limits":{"procs":1,"Procs":9}}`); a.status != 400 || a.Error.Details["key"] != "limits.Procs" {
		t.Errorf("nested case-variant duplicate: %d %+v", a.status, a.Error)
	}
	for body, key := range map[string]string{
		`{"path":"a.txt","Path":"b.txt","content":"x"}`:   "Path",
		`{"path":"a.txt","content":"x","content":"y"}`:    "content",
		`{"path":"bad` + "\xff" + `.txt","content":"x"}`:  "path",
		`{"path":"a.txt","content":"` + "\xc3\x28" + `"}`: "content",
		`{"path":"a.txt","content":"\ud800"}`:             "content",
		`["a.txt"]`:                                       "",
		`{"path":"a.txt"`:                                 "",
	} {
		a := f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/tools/write", body)
		if a.status != 400 || a.Error.Code != paddock.CodeBadRequest || (key != "" && a.Error.Details["key"] != key) {
			t.Errorf("write %.60q: %d %+v, want bad_request naming %q", body, a.status, a.Error, key)
		}
	}
	a := f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/tools/edit", `{"path":"a","edits":[{"old_string":"1","new_string":"2","New_String":"3"}]}`)
	if a.status != 400 || a.Error.Details["key"] != "edits[0].New_String" {
		t.Errorf("edit with a nested case variant: %d %+v", a.status, a.Error)
	}
	if asked := f.svc.whats(); asked != "" {
		t.Errorf("a refused body reached the service: %s", asked)
	}
}

// TestEventStream: SSE with ids = seqs; a reconnect with Last-Event-ID
// resumes after it, so every event is seen once, in order.
func TestEventStream(t *testing.T) {
	t.Parallel()
	f := newFixtureOf(t, func(s *Server, st *fakeState) { s.Runs = fakeRuns{st} })
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	r := f.newRun(t)

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
	if a := f.do(t, f.h, "GET", "/v1/runs/"+r.ID+"/events/stream?after=x", ""); a.status != 400 {
		t.Fatalf("a bad after: %d", a.status)
	}
}

// TestExpectSeq: an action that says which seq it saw carries it to the
// service, which refuses it if the run moved on (lifecycle's
// TestExpectSeq holds the manager to that); a GET carries none.
func TestExpectSeq(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.newRun(t)
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
		calls := f.svc.asked()
		if len(calls) != 1 || calls[0].expect == nil || calls[0].expect.Run != r.ID || itoa(calls[0].expect.Seq) != stale {
			t.Fatalf("%s: the service was asked %+v", path, calls)
		}
	}
	var now paddock.Run
	json.Unmarshal(f.do(t, f.h, "GET", "/v1/runs/"+r.ID+"?expect_seq="+stale, "").Data, &now)
	if calls := f.svc.asked(); len(calls) != 1 || calls[0].expect != nil {
		t.Fatalf("a GET carried an expectation: %+v", calls)
	}
	if now.LastSeq != r.LastSeq || now.State() != paddock.StateReady {
		t.Fatalf("a refused action changed the run: %d %s", now.LastSeq, now.State())
	}
	if a := f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/retain?expect_seq="+itoa(r.LastSeq), ""); a.status != 200 {
		t.Fatalf("with the right seq: %d %+v", a.status, a.Error)
	}
	f.svc.asked()
	if a := f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/retain?expect_seq=x", ""); a.status != 400 || f.svc.whats() != "" {
		t.Fatalf("a bad expect_seq: %d", a.status)
	}
}

// TestRouteTableServesTheDocument: no route is in the table twice, and the
// document is served (openapi_test.go holds it to the table, operation by
// operation).
func TestRouteTableServesTheDocument(t *testing.T) {
	t.Parallel()
	registered := map[string]bool{}
	for _, rt := range Routes() {
		p := rt.Method + " " + rt.Path
		if registered[p] {
			t.Errorf("route %s is in the table twice", p)
		}
		registered[p] = true
	}
	f := newFixture(t)
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest("GET", "http://paddock/v1/openapi.json", nil))
	if rec.Code != 200 || !bytes.Equal(rec.Body.Bytes(), openAPI) {
		t.Fatalf("GET /v1/openapi.json: %d", rec.Code)
	}
}

// TestRunTokenReach: what a run's token reaches is the agent's side of its
// run, exactly these routes; deciding about a run (approve, apply, reject,
// retain, rm) and everything beyond the run stay with the operator.
func TestRunTokenReach(t *testing.T) {
	t.Parallel()
	want := []string{
		"GET /v1/runs/{id}", "GET /v1/runs/{id}/events", "GET /v1/runs/{id}/events/stream",
		"GET /v1/runs/{id}/tools", "POST /v1/runs/{id}/tools/{name}", "POST /v1/runs/{id}/exec",
		"POST /v1/runs/{id}/exec/stream", "POST /v1/runs/{id}/exec/attach", "GET /v1/runs/{id}/changeset", "POST /v1/runs/{id}/submit",
		"GET /v1/runs/{id}/artifacts/{kind}", "POST /v1/runs/{id}/checkpoint", "POST /v1/runs/{id}/resume",
		"POST /v1/runs/{id}/jobs", "GET /v1/runs/{id}/jobs", "GET /v1/runs/{id}/jobs/{job}", "GET /v1/runs/{id}/status",
		"POST /v1/runs/{id}/jobs/{job}/cancel",
		// The agent's control tools: it may ask, never grant.
		"GET /v1/runs/{id}/capabilities", "POST /v1/runs/{id}/verify",
		"GET /v1/runs/{id}/requests", "POST /v1/runs/{id}/requests",
		// MCP over HTTP: the same calls, one protocol.
		"POST /v1/runs/{id}/mcp", "GET /v1/runs/{id}/mcp", "DELETE /v1/runs/{id}/mcp",
		// The flow's menu: an agent picks from it, never starts a flow.
		"POST /v1/runs/{id}/menu/{event}",
	}
	var got []string
	for _, rt := range Routes() {
		if rt.RunToken {
			got = append(got, rt.Method+" "+rt.Path)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("a run's token reaches\n%q\nwant\n%q", got, want)
	}
}

// TestBootstrapAndRunTokens: a bootstrap returns a run and its token; the
// token reaches that run's agent-side routes only, as the run's agent.
func TestBootstrapAndRunTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tcp := f.srv.TCPHandler()
	op := []string{"Authorization", "Bearer t0k3n"}
	call := func(method, path, body string, hdr []string) answer { return doTCP(tcp, method, path, body, hdr...) }
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
	f.svc.asked()
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
		{"POST", "/v1/runs/" + b1.Run.ID + "/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 200, ""},
		{"POST", "/v1/runs/" + b2.Run.ID + "/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 403, paddock.CodeRunMismatch},
		{"POST", "/v1/runs/" + b1.Run.ID + "/approve", `{"hash":"x"}`, 403, paddock.CodeForbidden},
		{"POST", "/v1/runs/" + b1.Run.ID + "/apply", `{}`, 403, paddock.CodeForbidden},
		{"POST", "/v1/runs/" + b1.Run.ID + "/retain", ``, 403, paddock.CodeForbidden},
		{"DELETE", "/v1/runs/" + b1.Run.ID, ``, 403, paddock.CodeForbidden},
		{"GET", "/v1/runs/" + b1.Run.ID + "/changeset/diff", ``, 403, paddock.CodeForbidden},
		{"POST", "/v1/runs/" + b1.Run.ID + "/inbox?name=x", `x`, 403, paddock.CodeForbidden},
		{"GET", "/v1/runs", "", 403, paddock.CodeForbidden},
		{"GET", "/v1/status", "", 403, paddock.CodeForbidden},
		{"PATCH", "/v1/projects/app", `{"allow_attribution":["co-author-trailer"]}`, 403, paddock.CodeForbidden},
		{"POST", "/v1/bootstrap", `{}`, 403, paddock.CodeForbidden},
		{"POST", "/v1/runs/" + b1.Run.ID + "/exec", `{"argv":["true"],"allow_degraded":true}`, 403, paddock.CodeForbidden},
		{"POST", "/v1/runs/" + b1.Run.ID + "/exec/stream", `{"argv":["true"],"allow_degraded":true}`, 403, paddock.CodeForbidden},
	} {
		a := call(tc.method, tc.path, tc.body, agent)
		if a.status != tc.want || (tc.code != "" && (a.Error == nil || a.Error.Code != tc.code)) {
			t.Errorf("%s %s with the run's token: %d %+v, want %d %s", tc.method, tc.path, a.status, a.Error, tc.want, tc.code)
		}
		calls := f.svc.asked()
		if tc.want == 403 && len(calls) != 0 {
			t.Errorf("%s %s: a refused token reached the service: %+v", tc.method, tc.path, calls)
		}
		for _, c := range calls {
			if !c.agent {
				t.Errorf("%s %s: the call is not marked as the agent's", tc.method, tc.path)
			}
		}
	}
	// The network is passed on as asked, and the call marked as the
	// agent's: the service holds an agent to its definition's ceiling
	// (lifecycle's TestNetworkByDefaultOnEveryPath).
	call("POST", "/v1/runs/"+b1.Run.ID+"/exec", `{"argv":["true"]}`, agent)
	call("POST", "/v1/runs/"+b1.Run.ID+"/exec", `{"argv":["true"],"net":"host"}`, op)
	if asked := f.svc.whats(); asked != "Exec "+b1.Run.ID+" [true] ; Exec "+b1.Run.ID+" [true] host" {
		t.Errorf("exec nets: %s", asked)
	}
	// A token no run has is no credential (401); a valid one beyond its
	// run is refused above (403).
	if a := call("GET", "/v1/runs/"+b1.Run.ID, "", []string{"Authorization", "Bearer pdk_run_forged"}); a.status != 401 || a.Error == nil || a.Error.Code != paddock.CodeUnauthorized {
		t.Errorf("forged token: %d %+v", a.status, a.Error)
	}
	// An operator's client acting for the agent (paddock mcp) says so.
	f.svc.asked()
	call("GET", "/v1/runs/"+b1.Run.ID, "", append([]string{paddock.AgentHeader, "1"}, op...))
	call("GET", "/v1/runs/"+b1.Run.ID, "", op)
	if calls := f.svc.asked(); len(calls) != 2 || !calls[0].agent || calls[1].agent {
		t.Errorf("agent marks: %+v", calls)
	}
	// A run made without a bootstrap has no task.
	var plain paddock.Run
	json.Unmarshal(call("POST", "/v1/runs", `{"project":"app"}`, op).Data, &plain)
	if a := call("GET", "/v1/runs/"+plain.ID+"/artifacts/task", "", op); a.status != 409 || a.Error.Code != paddock.CodeNotBootstrapped {
		t.Errorf("task of a run never bootstrapped: %d %+v", a.status, a.Error)
	}
}

// TestAnswersPassTheRunsFunnel: an answer about a run masks the run's
// declared secrets whatever produced it, the diff's stream included.
func TestAnswersPassTheRunsFunnel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const v = "s3cr3t-value-42"
	r := f.newRun(t)
	f.svc.secret[r.ID] = "API_TOKEN=" + v
	a := f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/checkpoint", `{"reason":"saving `+v+`"}`)
	if !a.OK || strings.Contains(string(a.Data), v) || !strings.Contains(string(a.Data), "saving [REDACTED:API_TOKEN]") {
		t.Fatalf("checkpoint: %s", a.Data)
	}
	f.svc.fail = paddock.Errorf(paddock.CodeConflict, "cannot: %s", v)
	if a := f.do(t, f.h, "POST", "/v1/runs/"+r.ID+"/retain", ""); strings.Contains(a.Error.Message, v) {
		t.Fatalf("an error let through: %+v", a.Error)
	}
	f.svc.fail = nil
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest("GET", "http://paddock/v1/runs/"+r.ID+"/changeset/diff", nil))
	if got := rec.Body.String(); rec.Code != 200 || strings.Contains(got, v) || !strings.Contains(got, "[REDACTED:API_TOKEN]") || rec.Header().Get(paddock.ChangeSetHashHeader) != "h1" {
		t.Fatalf("diff: %d %q", rec.Code, got)
	}
	// An MCP answer, written by the MCP server, passes it too.
	rec = httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest("POST", "http://paddock/v1/runs/"+r.ID+"/mcp", strings.NewReader(`{"echo":"a `+v+`"}`)))
	if got := rec.Body.String(); rec.Code != 200 || strings.Contains(got, v) || !strings.Contains(got, "a [REDACTED:API_TOKEN]") {
		t.Fatalf("mcp: %d %q", rec.Code, got)
	}
	// Whatever an answer holds, it leaves masked.
	req := httptest.NewRequest("GET", "http://paddock/v1/runs/"+r.ID, nil)
	req.SetPathValue("id", r.ID)
	rec = httptest.NewRecorder()
	writeData(f.srv.base().runFunnel(rec, req), 200, map[string]string{"echo": "a " + v})
	if got := rec.Body.String(); strings.Contains(got, v) || !strings.Contains(got, "a [REDACTED:API_TOKEN]") {
		t.Fatalf("the funnel let through: %s", got)
	}
}

// observed is an Observer that keeps what it is told.
type observed struct {
	mu       sync.Mutex
	requests []string
}

func (o *observed) Request(method, route string, code int, streamed bool, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requests = append(o.requests, fmt.Sprintf("%s %s %d %v", method, route, code, streamed))
}

func (o *observed) Forwarded(time.Duration, error) {}

// TestObserver: each answered request is observed by its route's pattern
// (never the run id in its path) and its status; /metrics is the
// operator's, not a run token's.
func TestObserver(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	obs := &observed{}
	f.srv.Observer = obs
	f.srv.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "paddock_up 1\n") })
	f.h = f.srv.Handler()
	b, _ := fakeJobs{f.svc}.Bootstrap(context.Background(), paddock.BootstrapRequest{Project: "app"})
	for _, path := range []string{"/v1/runs/" + b.Run.ID, "/v1/runs/nope/events?limit=x", "/metrics"} {
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, httptest.NewRequest("GET", "http://paddock"+path, nil))
	}
	want := []string{"GET /v1/runs/{id} 200 false", "GET /v1/runs/{id}/events 400 false", "GET /metrics 200 true"}
	if fmt.Sprint(obs.requests) != fmt.Sprint(want) {
		t.Errorf("observed %q, want %q", obs.requests, want)
	}
	req := httptest.NewRequest("GET", "http://paddock/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+b.Token)
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("a run's token on /metrics: %d, want 403: %s", rec.Code, rec.Body)
	}
}

// TestTraceParentOnlyFromTheOperator: an operator's (an orchestrator's)
// traceparent makes the request's span its child; an agent's, on its run's
// socket or with its run's token, does not (an agent may not choose what
// is sampled, nor put paddock's spans in a trace of its own choosing):
// its span is a root, linked to the caller's.
func TestTraceParentOnlyFromTheOperator(t *testing.T) {
	f := newFixture(t)
	rec := tracetest.NewSpanRecorder()
	f.srv.Tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	b, _ := fakeJobs{f.svc}.Bootstrap(context.Background(), paddock.BootstrapRequest{Project: "app"})
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, c := range []struct {
		name    string
		h       http.Handler
		token   string
		child   bool
		wantRun string
	}{
		{"the operator's socket", f.srv.Handler(), "", true, b.Run.ID},
		{"a run's token", f.srv.Handler(), b.Token, false, b.Run.ID},
		{"the run's own socket", f.srv.RunHandler(b.Run.ID), "", false, b.Run.ID},
	} {
		req := httptest.NewRequest("GET", "http://paddock/v1/runs/"+b.Run.ID, nil)
		req.Header.Set("traceparent", parent)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		w := httptest.NewRecorder()
		c.h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", c.name, w.Code, w.Body)
		}
		spans := rec.Ended()
		sp := spans[len(spans)-1]
		isChild := sp.Parent().SpanID().String() == "00f067aa0ba902b7" && sp.SpanContext().TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736"
		linked := len(sp.Links()) == 1 && sp.Links()[0].SpanContext.SpanID().String() == "00f067aa0ba902b7"
		if isChild != c.child || (!c.child && (!linked || sp.Parent().IsValid())) {
			t.Errorf("%s: span %q parent %v links %d, want child=%v", c.name, sp.Name(), sp.Parent().SpanID(), len(sp.Links()), c.child)
		}
		var run string
		for _, a := range sp.Attributes() {
			if a.Key == "paddock.run_id" {
				run = a.Value.AsString()
			}
		}
		if sp.Name() != "GET /v1/runs/{id}" || run != c.wantRun {
			t.Errorf("%s: span %q run %q", c.name, sp.Name(), run)
		}
	}
}

// doTCP calls h as a loopback TCP listener's client would, with hdr's
// name, value pairs as headers.
func doTCP(h http.Handler, method, path, body string, hdr ...string) answer {
	req := httptest.NewRequest(method, "http://127.0.0.1:7070"+path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var a answer
	json.Unmarshal(rec.Body.Bytes(), &a)
	a.status = rec.Code
	return a
}
