package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/tools"
)

// TestToolsEndToEnd drives the working tools, access modes and the inbox
// through the CLI against a real daemon.
func TestToolsEndToEnd(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 5)
	d := startDaemon(t, home, "--listen", "127.0.0.1:0")
	cli(t, home, "project", "add", repo, "--protect", "secrets/**").must(t)

	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	out := cli(t, home, "tool", id, "write", "--arg", "path=src/new.go", "--arg", "content=package src\n").must(t).out
	var w tools.WriteResult
	if err := json.Unmarshal([]byte(out), &w); err != nil || !w.Created {
		t.Fatalf("write: %s", out)
	}
	var rr tools.ReadResult
	json.Unmarshal([]byte(cli(t, home, "tool", id, "read", "--args", `{"path":"src/new.go"}`).must(t).out), &rr)
	if rr.Content != "package src\n" {
		t.Fatalf("read back: %+v", rr)
	}
	var gr tools.GrepResult
	json.Unmarshal([]byte(cli(t, home, "tool", id, "grep", "--arg", "pattern=package", "--arg", "literal=true").must(t).out), &gr)
	if gr.FilesMatched < 5 {
		t.Fatalf("grep: %+v", gr)
	}
	cli(t, home, "tool", id, "read", "--arg", "path=../../../etc/passwd").wantCode(t, exitForbidden, "rule: outside_workspace")
	cli(t, home, "tool", id, "write", "--arg", "path=secrets/key", "--arg", "content=x").wantCode(t, exitForbidden, "protected")
	cli(t, home, "tool", id, "write", "--arg", "path=.git/hooks/pre-commit", "--arg", "content=x").wantCode(t, exitForbidden, "protected")
	cli(t, home, "tool", id, "read", "--arg", "path=nope").wantCode(t, exitNotFound, "no such file")
	cli(t, home, "tool", id, "read", "--arg", "nopath").wantCode(t, exitUsage, "key=value")
	// A key given twice is refused here as the daemon would, not dropped.
	cli(t, home, "tool", id, "write", "--args", `{"path":"twice.txt","path":"src/new.go","content":"x"}`).wantCode(t, exitUsage, `duplicate key "path"`)
	cli(t, home, "tool", id, "write", "--args", `{"path":"twice.txt","Path":"src/new.go","content":"x"}`).wantCode(t, exitUsage, `duplicate key "Path"`)
	cli(t, home, "tool", id, "write", "--args", `{"PATH":"src/new.go","content":"x"}`).wantCode(t, exitUsage, `spelled "path"`)
	cli(t, home, "tool", id, "teleport").wantCode(t, exitNotFound, "no tool")
	if list := cli(t, home, "tools", id).must(t).out; !strings.Contains(list, "write") || !strings.Contains(list, "grep") {
		t.Fatalf("tools: %s", list)
	}

	// Every call is an event, without contents.
	evs := decodeLines(t, cli(t, home, "events", id, "--json").must(t).out)
	calls := 0
	for _, e := range evs {
		if e.Type == "tool.call" {
			calls++
			if bytes.Contains(e.Data, []byte("package src")) {
				t.Fatalf("event carries contents: %s", e.Data)
			}
		}
	}
	if calls != 9 { // the duplicate keys never left the CLI; the PATH call was refused by the daemon
		t.Fatalf("%d tool.call events, want 9", calls)
	}

	// A read run and a none run.
	ro := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--access", "read").must(t).out)
	cli(t, home, "tool", ro, "write", "--arg", "path=x", "--arg", "content=y").wantCode(t, exitForbidden, "only read")
	cli(t, home, "tool", ro, "read", "--arg", "path=README.md").must(t)
	if list := cli(t, home, "tools", ro).must(t).out; strings.Contains(list, "write") {
		t.Fatalf("read run offered: %s", list)
	}
	none := decode[*paddock.Run](t, cli(t, home, "create", "-p", "app", "--access", "none", "--json"))
	if none.Workspace != nil {
		t.Fatalf("none run has a workspace: %+v", none.Workspace)
	}
	cli(t, home, "tool", none.ID, "read", "--arg", "path=README.md").wantCode(t, exitForbidden, "no workspace")
	if show := cli(t, home, "show", none.ID).must(t).out; !strings.Contains(show, "access:") || !strings.Contains(show, "none") {
		t.Fatalf("show none: %s", show)
	}

	// The inbox, through the CLI and over HTTP for the 413.
	note := filepath.Join(base, "note.txt")
	os.WriteFile(note, []byte("look at this\n"), 0o644)
	if out := cli(t, home, "inbox", id, note).must(t).out; !strings.Contains(out, ".paddock/inbox/note.txt") {
		t.Fatalf("inbox: %s", out)
	}
	exe := filepath.Join(base, "tool.png")
	os.WriteFile(exe, []byte("\x7fELF\x02\x01\x01\x00\x00\x00"), 0o644)
	cli(t, home, "inbox", id, exe).wantCode(t, exitUsage, "not accepted")
	tok, _ := os.ReadFile(filepath.Join(home, "token"))
	req, _ := http.NewRequest("POST", "http://"+d.info.Listen+"/v1/runs/"+id+"/inbox?name=big.txt", bytes.NewReader(bytes.Repeat([]byte("a"), 11<<20)))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized upload: %d", resp.StatusCode)
	}
	r := decode[*paddock.Run](t, cli(t, home, "show", id, "--json"))
	if _, err := os.Stat(filepath.Join(r.Workspace.Root, ".paddock/inbox/big.txt")); !os.IsNotExist(err) {
		t.Fatal("an oversized upload was written")
	}
}

// TestToolsListsEveryOfferedTool: paddock tools RUN lists every tool the
// run's capabilities offer, control tools (exec, verify, diff, submit,
// capabilities, plan, request_access) too, each with what it does, the
// verb that calls it and its narrowing; a working tool with its schema.
// (internal/paddockcli's TestToolsDescribesEveryTool holds the CLI's table
// to every tool a definition may name.)
func TestToolsListsEveryOfferedTool(t *testing.T) {
	working := map[string]bool{}
	for _, w := range tools.Offered(paddock.AccessWrite) {
		working[w.Name] = true
	}
	// As paddock tools --json lists a tool.
	type offeredTool struct {
		Name        string          `json:"name"`
		Kind        string          `json:"kind"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"input_schema,omitempty"`
		Via         string          `json:"via"`
	}

	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 1)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	def := filepath.Join(base, "tester.toml")
	os.WriteFile(def, []byte(testerTOML), 0o644)
	cli(t, home, "agent", "add", def).must(t)
	for _, tc := range []struct {
		create []string
		has    []string
	}{
		{[]string{"create", "-p", "app"}, []string{"write", "exec", "verify", "diff", "submit", "capabilities", "plan", "request_access"}},
		{[]string{"create", "-p", "app", "--access", "read"}, []string{"read", "capabilities", "plan", "request_access"}},
		{[]string{"create", "-p", "app", "--agent", "tester"}, []string{"read", "exec", "capabilities"}},
	} {
		id := strings.TrimSpace(cli(t, home, tc.create...).must(t).out)
		caps := decode[paddock.Capabilities](t, cli(t, home, "capabilities", id, "--json"))
		list := decode[[]offeredTool](t, cli(t, home, "tools", id, "--json"))
		var want, got []string
		for _, c := range caps.Tools {
			want = append(want, c.Name)
		}
		for _, o := range list {
			got = append(got, o.Name)
			switch {
			case o.Description == "" || o.Via == "":
				t.Errorf("%v: %s is listed without what it does or its verb: %+v", tc.create, o.Name, o)
			case working[o.Name] && (o.Kind != "working" || len(o.Schema) == 0):
				t.Errorf("%v: working tool %s: %+v", tc.create, o.Name, o)
			case !working[o.Name] && o.Kind != "control":
				t.Errorf("%v: control tool %s: %+v", tc.create, o.Name, o)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: paddock tools lists %v; the run is offered %v", tc.create, got, want)
		}
		for _, name := range tc.has {
			if !slices.Contains(got, name) && caps.Unavailable[name] == "" {
				t.Errorf("%v: paddock tools does not list %s: %v", tc.create, name, got)
			}
		}
		// The text: a line a tool, its narrowing on it.
		out := cli(t, home, "tools", id).must(t).out
		for _, name := range got {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s`).MatchString(out) {
				t.Errorf("%v: the text lists no %s:\n%s", tc.create, name, out)
			}
		}
		if tc.create[len(tc.create)-1] == "tester" && !regexp.MustCompile(`(?m)^exec\s.*paddock exec `+id+` -- CMD….*allow "echo", "go test"$`).MatchString(out) {
			t.Errorf("tester's exec line does not say its verb and narrowing:\n%s", out)
		}
	}
}
