package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestAnyBytesSurvive: a change set is bytes. Names and contents that are
// not UTF-8, CRLF, a file without a final newline, NUL bytes, a name with
// a control character survive submit, approve, apply to a branch and into
// the working tree, and undo, byte for byte.
func TestAnyBytesSurvive(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	os.MkdirAll(home, 0o700)
	os.WriteFile(filepath.Join(home, "paddock.toml"), []byte("apply_name = \"Ada\"\napply_email = \"ada@example.com\"\n"), 0o600)
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	// The branch apply adds objects to .git; the working tree is compared
	// after it, as the worktree apply and its undo find it.
	var before string
	var beforeLines []string
	want := map[string]string{
		"caf\xe9.txt":   "caf\xe9\r\nno final newline",
		"d\xff/n\x01ul": "a\x00b\x00\xfe",
		"crlf.txt":      "one\r\ntwo\r\n",
		"README.md":     "hello\r\n\xe9t\xe9",
	}
	var script strings.Builder
	script.WriteString("set -e\nmkdir -p \"$(printf 'd\\377')\"\n")
	for name, content := range want {
		script.WriteString("printf '" + octalBytes(content) + "' > \"$(printf '" + octalBytes(name) + "')\"\n")
	}
	freeze := func() string {
		id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
		if r := cli(t, home, "exec", id, "--", "sh", "-c", script.String()); r.code != 0 {
			t.Fatalf("exec: %d %s", r.code, r.err)
		}
		cs := decode[*paddock.ChangeSet](t, cli(t, home, "diff", id, "--json"))
		if len(cs.Entries) != len(want) {
			t.Fatalf("entries: %+v", cs.Entries)
		}
		cli(t, home, "submit", id, "--expect-hash", cs.Hash).must(t)
		cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
		return id
	}
	id := freeze()
	cli(t, home, "apply", id).must(t)
	for name, content := range want {
		out, err := exec.Command("git", "-C", repo, "show", "paddock/"+id+":"+name).Output()
		if err != nil || string(out) != content {
			t.Fatalf("branch: %q: %q %v, want %q", name, out, err, content)
		}
	}
	exec.Command("git", "-C", repo, "branch", "-D", "paddock/"+id).Run()
	before, beforeLines = gittest.TreeDigest(t, repo)
	id = freeze()
	cli(t, home, "apply", id, "--to", "worktree").must(t)
	for name, content := range want {
		if b, err := os.ReadFile(filepath.Join(repo, name)); err != nil || string(b) != content {
			t.Fatalf("worktree: %q: %q %v, want %q", name, b, err, content)
		}
	}
	cli(t, home, "undo", id).must(t)
	gittest.RequireIdentical(t, repo, before, beforeLines)
	var ev []*paddock.Event
	for _, line := range strings.Split(strings.TrimSpace(cli(t, home, "events", id, "--json").must(t).out), "\n") {
		var e paddock.Event
		if json.Unmarshal([]byte(line), &e) == nil {
			ev = append(ev, &e)
		}
	}
	if len(ev) == 0 {
		t.Fatal("no events")
	}
}

// octalBytes writes s as printf escapes.
func octalBytes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteString("\\" + strings.TrimLeft(string([]byte{'0' + s[i]>>6, '0' + (s[i]>>3)&7, '0' + s[i]&7}), ""))
	}
	return b.String()
}

// TestFailedApplyIsRecorded: an apply that does not happen is an event of
// the run and a line in the daemon's log, with the reason.
func TestFailedApplyIsRecorded(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	os.MkdirAll(home, 0o700)
	os.WriteFile(filepath.Join(home, "paddock.toml"), []byte("apply_name = \"Ada\"\napply_email = \"ada@example.com\"\n"), 0o600)
	repo := newRepo(t, filepath.Join(base, "src", "app"), 1)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "tool", id, "write", "--arg", "path=x.txt", "--arg", "content=x").must(t)
	cs := decode[*paddock.ChangeSet](t, cli(t, home, "diff", id, "--json"))
	cli(t, home, "submit", id, "--expect-hash", cs.Hash).must(t)
	cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
	// The branch it would make exists already: the apply is refused.
	gittest.Git(t, repo, "branch", "paddock/"+id)
	cli(t, home, "apply", id).wantCode(t, exitConflict, "already exists")
	out := cli(t, home, "events", id, "--json").must(t).out
	if !strings.Contains(out, `"changeset.apply_failed"`) || !strings.Contains(out, "already exists") {
		t.Fatalf("no apply_failed event with the reason:\n%s", out)
	}
	logb, _ := os.ReadFile(filepath.Join(home, "test-daemon.log"))
	if !strings.Contains(string(logb), "apply failed") {
		t.Fatal("no log line for the failed apply")
	}
}
