package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/lifecycle"
	"github.com/paddock-dev/paddock/tools"
)

func toolEvents(t *testing.T, m *lifecycle.Manager, id string) []tools.Outcome {
	t.Helper()
	evs, _ := m.Runs.Events(context.Background(), id, 0, 0)
	var out []tools.Outcome
	for _, e := range evs {
		if e.Type == paddock.EventToolCall {
			var o tools.Outcome
			json.Unmarshal(e.Data, &o)
			out = append(out, o)
		}
	}
	return out
}

func TestToolCallsAreRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	r := e.create(t, paddock.KindClone, "")
	res, err := e.m.Broker.CallTool(ctx, r.ID, "write", json.RawMessage(`{"path":"notes/todo.md","content":"secret plan"}`))
	if err != nil {
		t.Fatal(err)
	}
	if w := res.(*tools.WriteResult); !w.Created {
		t.Fatalf("write: %+v", w)
	}
	if b, _ := os.ReadFile(filepath.Join(r.Workspace.Root, "notes/todo.md")); string(b) != "secret plan" {
		t.Fatal("not written to the workspace")
	}
	_, err = e.m.Broker.CallTool(ctx, r.ID, "read", json.RawMessage(`{"path":"../../../etc/passwd"}`))
	mustCode(t, err, paddock.CodeForbidden)
	_, err = e.m.Broker.CallTool(ctx, r.ID, "frobnicate", nil)
	mustCode(t, err, paddock.CodeNotFound)
	got, _ := e.m.Run(ctx, r.ID)
	if got.State() != paddock.StateActive {
		t.Fatalf("a tool call should make the run active; it is %s", got.State())
	}
	outs := toolEvents(t, e.m, r.ID)
	if len(outs) != 3 || !outs[0].OK || outs[0].Bytes != 11 || outs[1].OK || outs[1].Rule != "outside_workspace" || outs[2].Code != paddock.CodeNotFound {
		t.Fatalf("outcomes: %+v", outs)
	}
	evs, _ := e.m.Runs.Events(ctx, r.ID, 0, 0)
	for _, ev := range evs {
		if bytes.Contains(ev.Data, []byte("secret plan")) {
			t.Fatalf("an event carries file contents: %s", ev.Data)
		}
	}
	// A checkpointed run must resume first; a rejected one takes no more work.
	e.m.Runs.Checkpoint(ctx, r.ID, "test")
	_, err = e.m.Broker.CallTool(ctx, r.ID, "read", json.RawMessage(`{"path":"README.md"}`))
	mustCode(t, err, paddock.CodeConflict)
	e.m.Runs.Reject(ctx, r.ID)
	_, err = e.m.Broker.CallTool(ctx, r.ID, "read", json.RawMessage(`{"path":"README.md"}`))
	mustCode(t, err, paddock.CodeConflict)
}

func TestAccessModes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	ro, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Access: "read"})
	if err != nil || ro.Access != paddock.AccessRead || ro.Workspace == nil {
		t.Fatalf("read run: %+v %v", ro, err)
	}
	offered, _ := e.m.Broker.Tools(ctx, ro.ID)
	for _, tl := range offered {
		if tl.Writes {
			t.Fatalf("read run offered %s", tl.Name)
		}
	}
	if _, err := e.m.Broker.CallTool(ctx, ro.ID, "read", json.RawMessage(`{"path":"README.md"}`)); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"write", "edit", "move", "delete"} {
		_, err := e.m.Broker.CallTool(ctx, ro.ID, w, json.RawMessage(`{"path":"README.md","content":"x"}`))
		mustCode(t, err, paddock.CodeForbidden)
	}
	if b, _ := os.ReadFile(filepath.Join(ro.Workspace.Root, "README.md")); string(b) != "hello\n" {
		t.Fatal("a read run changed its workspace")
	}

	none, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Access: "none"})
	if err != nil || none.Workspace != nil || none.Access != paddock.AccessNone {
		t.Fatalf("none run: %+v %v", none, err)
	}
	if ts, _ := e.m.Broker.Tools(ctx, none.ID); len(ts) != 0 {
		t.Fatalf("none run offered %d tools", len(ts))
	}
	_, err = e.m.Broker.CallTool(ctx, none.ID, "read", json.RawMessage(`{"path":"README.md"}`))
	mustCode(t, err, paddock.CodeForbidden)
	_, err = e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Access: "none", Kind: "clone"})
	mustCode(t, err, paddock.CodeBadRequest)
	_, err = e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Access: "admin"})
	mustCode(t, err, paddock.CodeBadRequest)
	if entries, _ := filepath.Glob(filepath.Join(e.m.WorkspacesDir, none.ID+"*")); len(entries) != 0 {
		t.Fatalf("a none run made a workspace: %v", entries)
	}
	_, err = e.m.Runs.Retain(ctx, none.ID)
	mustCode(t, err, paddock.CodeConflict)
	if r, err := e.m.Runs.Remove(ctx, none.ID); err != nil || r.RemovedAt.IsZero() {
		t.Fatalf("rm none run: %v", err)
	}
	if f, _ := e.m.GC(ctx, false); len(f) != 0 {
		t.Fatalf("gc on none run: %+v", f)
	}
}

func TestProjectPolicyReachesTools(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.m.Projects.AddProject(ctx, paddock.AddProjectRequest{Path: e.repo, Protect: []string{"docs/**"}})
	if err != nil {
		t.Fatal(err)
	}
	r := e.create(t, paddock.KindClone, "")
	for _, p := range []string{"docs/new.md", ".envrc", ".git/config"} {
		_, err := e.m.Broker.CallTool(ctx, r.ID, "write", json.RawMessage(`{"path":"`+p+`","content":"x"}`))
		mustCode(t, err, paddock.CodeForbidden)
	}
	_, err = e.m.Projects.AddProject(ctx, paddock.AddProjectRequest{Path: e.repo, Name: "bad", Protect: []string{"[oops"}})
	mustCode(t, err, paddock.CodeBadRequest)
}

func TestInboxDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	r := e.create(t, paddock.KindClone, "")
	res, err := e.m.Broker.Deliver(ctx, r.ID, "report.txt", strings.NewReader("hello inbox\n"), tools.DefaultInboxLimits)
	if err != nil || res.Path != ".paddock/inbox/report.txt" || res.MIME != "text/plain" {
		t.Fatalf("deliver: %+v %v", res, err)
	}
	got, err := e.m.Broker.CallTool(ctx, r.ID, "read", json.RawMessage(`{"path":".paddock/inbox/report.txt"}`))
	if err != nil || got.(*tools.ReadResult).Content != "hello inbox\n" {
		t.Fatalf("agent reads the inbox: %v", err)
	}
	// The agent itself cannot write there.
	_, err = e.m.Broker.CallTool(ctx, r.ID, "write", json.RawMessage(`{"path":".paddock/inbox/x.txt","content":"x"}`))
	mustCode(t, err, paddock.CodeForbidden)
}

// TestToolResultsAreRedacted: what a tool returns passes the funnel: a
// credential in a file the agent reads is masked, in read and in grep.
func TestToolResultsAreRedacted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	r := e.create(t, paddock.KindClone, "")
	key := "AKIAIOSFODNN7EXAMPLE"
	os.WriteFile(filepath.Join(r.Workspace.Root, "config.env"), []byte("AWS_ACCESS_KEY_ID="+key+"\n"), 0o644)
	res, err := e.m.Broker.CallTool(ctx, r.ID, "read", json.RawMessage(`{"path":"config.env"}`))
	if err != nil {
		t.Fatal(err)
	}
	rr := res.(*tools.ReadResult)
	if strings.Contains(rr.Content, key) || !strings.Contains(rr.Content, "[REDACTED:aws_access_key]") {
		t.Fatalf("read: %q", rr.Content)
	}
	res, err = e.m.Broker.CallTool(ctx, r.ID, "grep", json.RawMessage(`{"pattern":"AWS_ACCESS"}`))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res); bytes.Contains(b, []byte(key)) {
		t.Fatalf("grep: %s", b)
	}
}
