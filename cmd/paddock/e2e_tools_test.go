package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
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
