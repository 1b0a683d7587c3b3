package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/paddock-dev/paddock/httpapi/apiclient"
)

// validating holds every exchange of a client to the OpenAPI document: each
// request is validated against its operation before it is sent, and each
// answer against the operation's responses, by kin-openapi's validator.
type validating struct {
	t      *testing.T
	next   http.RoundTripper
	router routers.Router
	mu     sync.Mutex
	called []string // operationIds, in order
}

func (v *validating) RoundTrip(req *http.Request) (*http.Response, error) {
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		v.t.Errorf("%s %s: no operation in the document: %v", req.Method, req.URL.Path, err)
		return v.next.RoundTrip(req)
	}
	v.mu.Lock()
	v.called = append(v.called, route.Operation.OperationID)
	v.mu.Unlock()
	var body []byte
	if req.Body != nil {
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	check := req.Clone(req.Context())
	check.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateRequest(req.Context(), in); err != nil {
		v.t.Errorf("%s: the request does not follow the document: %v", route.Operation.OperationID, err)
	}
	resp, err := v.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	if err := openapi3filter.ValidateResponse(req.Context(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(answer)),
	}); err != nil {
		v.t.Errorf("%s: the answer (%d) does not follow the document: %v\n%.2000s", route.Operation.OperationID, resp.StatusCode, err, answer)
	}
	return resp, nil
}

// whole checks that a typed answer exists and that its body decodes into
// the generated type with no field left over: the document names every
// field the daemon sends.
func whole[T any](t *testing.T, op string, status int, body []byte, got *T) *T {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: %d, no typed answer: %.2000s", op, status, body)
	}
	var v T
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Errorf("%s: the answer does not decode whole into the generated type: %v\n%.2000s", op, err, body)
	}
	return got
}

func deref[T any](p *T) (v T) {
	if p != nil {
		v = *p
	}
	return v
}

// TestGeneratedClient drives a real daemon through the client oapi-codegen
// generated from the document the daemon serves (package apiclient), with
// kin-openapi validating every request and answer against that document.
func TestGeneratedClient(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 1)
	d := startDaemon(t, home)
	ctx := context.Background()
	unix := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", filepath.Join(home, "paddock.sock"))
	}}
	defer unix.CloseIdleConnections()

	// The document, as the daemon serves it, is valid OpenAPI 3.
	plain, err := apiclient.NewClientWithResponses("http://paddock", apiclient.WithHTTPClient(&http.Client{Transport: unix}))
	if err != nil {
		t.Fatal(err)
	}
	served, err := plain.GetOpenAPIWithResponse(ctx)
	if err != nil || served.StatusCode() != 200 {
		t.Fatalf("getOpenAPI: %v %v", served, err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(served.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("the served document is not valid OpenAPI 3: %v", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	v := &validating{t: t, next: unix, router: router}
	c, err := apiclient.NewClientWithResponses("http://paddock", apiclient.WithHTTPClient(&http.Client{Transport: v}))
	if err != nil {
		t.Fatal(err)
	}

	st, err := c.GetStatusWithResponse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := whole(t, "getStatus", st.StatusCode(), st.Body, st.JSON200); deref(s.Data.Pid) != d.info.PID {
		t.Errorf("getStatus: pid %v, want %d", s.Data.Pid, d.info.PID)
	}

	name := "app"
	ap, err := c.AddProjectWithResponse(ctx, apiclient.AddProjectJSONRequestBody{Path: repo, Name: &name})
	if err != nil {
		t.Fatal(err)
	}
	if p := whole(t, "addProject", ap.StatusCode(), ap.Body, ap.JSON201); deref(p.Data.Name) != "app" || ap.StatusCode() != 201 {
		t.Errorf("addProject: %d %s", ap.StatusCode(), ap.Body)
	}
	lp, err := c.ListProjectsWithResponse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ps := deref(whole(t, "listProjects", lp.StatusCode(), lp.Body, lp.JSON200).Data); len(ps) != 1 || deref(ps[0].Root) == "" {
		t.Errorf("listProjects: %s", lp.Body)
	}
	pc, err := c.GetProjectCheckoutWithResponse(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	if s := whole(t, "getProjectCheckout", pc.StatusCode(), pc.Body, pc.JSON200).Data; s == nil || deref(s.Root) == "" || s.Uncommitted == nil || *s.Uncommitted != 0 {
		t.Errorf("getProjectCheckout: %s", pc.Body)
	}

	cmd := []string{"sh", "-c", "true"}
	bs, err := c.BootstrapWithResponse(ctx, apiclient.BootstrapJSONRequestBody{Project: "app", Task: "say hello",
		Agent: &apiclient.AgentDefinition{Name: "greeter", Command: &cmd}})
	if err != nil {
		t.Fatal(err)
	}
	b := whole(t, "bootstrap", bs.StatusCode(), bs.Body, bs.JSON201).Data
	if b == nil || b.Run == nil || deref(b.Run.Id) == "" || deref(b.Token) == "" {
		t.Fatalf("bootstrap: %d %s", bs.StatusCode(), bs.Body)
	}
	id := *b.Run.Id
	gr, err := c.GetRunWithResponse(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r := whole(t, "getRun", gr.StatusCode(), gr.Body, gr.JSON200).Data; deref(r.Id) != id || r.Workspace == nil || r.Workspace.State == nil {
		t.Errorf("getRun: %s", gr.Body)
	}
	ga, err := c.GetArtifactWithResponse(ctx, id, apiclient.GetArtifactParamsKindTask)
	if err != nil {
		t.Fatal(err)
	}
	if a := whole(t, "getArtifact", ga.StatusCode(), ga.Body, ga.JSON200).Data; deref(a.Kind) != "task" {
		t.Errorf("getArtifact: %s", ga.Body)
	}

	// A command and a tool call: the answers carry what the sandbox
	// enforced and what the tool read.
	ex, err := c.ExecWithResponse(ctx, id, nil, apiclient.ExecJSONRequestBody{Argv: []string{"sh", "-c", "echo hello > hello.txt; echo done"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := whole(t, "exec", ex.StatusCode(), ex.Body, ex.JSON200).Data; deref(r.ExitCode) != 0 || deref(r.Stdout) != "done\n" || r.Enforcement == nil {
		t.Errorf("exec: %s", ex.Body)
	}
	ct, err := c.CallToolWithResponse(ctx, id, "read", nil, apiclient.CallToolJSONRequestBody{"path": "hello.txt"})
	if err != nil {
		t.Fatal(err)
	}
	whole(t, "callTool", ct.StatusCode(), ct.Body, ct.JSON200)
	lt, err := c.ListToolsWithResponse(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	whole(t, "listTools", lt.StatusCode(), lt.Body, lt.JSON200)

	// A job: started, listed, read and cancelled.
	sj, err := c.StartJobWithResponse(ctx, id, apiclient.StartJobJSONRequestBody{Kind: apiclient.StartJobJSONBodyKindExec,
		Exec: &apiclient.ExecRequest{Argv: []string{"sleep", "60"}}})
	if err != nil {
		t.Fatal(err)
	}
	j := whole(t, "startJob", sj.StatusCode(), sj.Body, sj.JSON202).Data
	if j == nil || deref(j.State) != apiclient.JobStateRunning || sj.StatusCode() != 202 {
		t.Fatalf("startJob: %d %s", sj.StatusCode(), sj.Body)
	}
	lj, err := c.ListJobsWithResponse(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if js := deref(whole(t, "listJobs", lj.StatusCode(), lj.Body, lj.JSON200).Data); len(js) != 1 || deref(js[0].Id) != *j.Id {
		t.Errorf("listJobs: %s", lj.Body)
	}
	gj, err := c.GetJobWithResponse(ctx, id, *j.Id)
	if err != nil {
		t.Fatal(err)
	}
	if g := whole(t, "getJob", gj.StatusCode(), gj.Body, gj.JSON200).Data; deref(g.Id) != *j.Id || g.CreatedAt == nil {
		t.Errorf("getJob: %s", gj.Body)
	}
	cj, err := c.CancelJobWithResponse(ctx, id, *j.Id)
	if err != nil {
		t.Fatal(err)
	}
	if g := whole(t, "cancelJob", cj.StatusCode(), cj.Body, cj.JSON200).Data; deref(g.State) == apiclient.JobStateRunning || g.EndedAt == nil {
		t.Errorf("cancelJob: %s", cj.Body)
	}

	// The change set, submitted, approved and applied to a branch.
	cs, err := c.GetChangeSetWithResponse(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	set := whole(t, "getChangeSet", cs.StatusCode(), cs.Body, cs.JSON200).Data
	if set == nil || set.Entries == nil || len(*set.Entries) != 1 || (*set.Entries)[0].Path == nil || *(*set.Entries)[0].Path != "hello.txt" {
		t.Fatalf("getChangeSet: %s", cs.Body)
	}
	sb, err := c.SubmitWithResponse(ctx, id, nil, apiclient.SubmitJSONRequestBody{ExpectHash: set.Hash})
	if err != nil {
		t.Fatal(err)
	}
	if s := whole(t, "submit", sb.StatusCode(), sb.Body, sb.JSON200).Data; deref(s.Hash) != *set.Hash {
		t.Fatalf("submit: %s", sb.Body)
	}
	av, err := c.ApproveWithResponse(ctx, id, nil, apiclient.ApproveJSONRequestBody{Hash: *set.Hash})
	if err != nil {
		t.Fatal(err)
	}
	if s := whole(t, "approve", av.StatusCode(), av.Body, av.JSON200).Data; s.ApprovedAt == nil {
		t.Errorf("approve: %s", av.Body)
	}
	branch, author, email := "paddock/generated-client", "Tester", "tester@example.com"
	al, err := c.ApplyWithResponse(ctx, id, nil, apiclient.ApplyJSONRequestBody{Branch: &branch, AuthorName: &author, AuthorEmail: &email})
	if err != nil {
		t.Fatal(err)
	}
	if s := whole(t, "apply", al.StatusCode(), al.Body, al.JSON200).Data; s.AppliedAt == nil || deref(s.AppliedTo) == "" {
		t.Errorf("apply: %s", al.Body)
	}

	after := 0
	le, err := c.ListEventsWithResponse(ctx, id, &apiclient.ListEventsParams{After: &after})
	if err != nil {
		t.Fatal(err)
	}
	if evs := deref(whole(t, "listEvents", le.StatusCode(), le.Body, le.JSON200).Data); len(evs) < 5 {
		t.Errorf("listEvents: %s", le.Body)
	}
	dry := true
	gc, err := c.GcWithResponse(ctx, apiclient.GcJSONRequestBody{DryRun: &dry})
	if err != nil {
		t.Fatal(err)
	}
	whole(t, "gc", gc.StatusCode(), gc.Body, gc.JSON200)

	// A refusal decodes into the error envelope.
	nf, err := c.GetRunWithResponse(ctx, "r-00000000")
	if err != nil {
		t.Fatal(err)
	}
	if f := whole(t, "getRun", nf.StatusCode(), nf.Body, nf.JSONDefault); nf.StatusCode() != 404 || f.Error.Code != apiclient.ErrorCodeNotFound {
		t.Errorf("getRun of no run: %d %s", nf.StatusCode(), nf.Body)
	}

	for _, op := range []string{"getStatus", "addProject", "listProjects", "getProjectCheckout", "bootstrap", "getRun", "getArtifact", "exec", "callTool",
		"startJob", "listJobs", "getJob", "cancelJob", "getChangeSet", "submit", "approve", "apply", "listEvents", "gc"} {
		if !slices.Contains(v.called, op) {
			t.Errorf("%s was not called through the validator", op)
		}
	}
}
