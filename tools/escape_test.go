package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// escapeCase is one path an agent might use to get out of its workspace.
type escapeCase struct {
	name string
	path func(f *fixture) string
	// self: the path names a link or hard link inside the workspace, so
	// tools that act on the link itself (stat, delete, move, and write,
	// which replaces it) may succeed; they must still not reach outside.
	self bool
	// root: the case needs root (mknod).
	root bool
}

func p(s string) func(*fixture) string { return func(*fixture) string { return s } }

var escapeCases = []escapeCase{
	{name: "dotdot", path: p("../outside/secret.txt")},
	{name: "dotdot chain", path: p("../../../../../../../../etc/passwd")},
	{name: "dotdot after inside dir", path: p("sub/deep/../../../outside/secret.txt")},
	{name: "absolute", path: p("/etc/passwd")},
	{name: "absolute outside", path: func(f *fixture) string { return f.outside + "/secret.txt" }},
	{name: "sibling prefix relative", path: p("../ws-evil/secret")},
	{name: "sibling prefix absolute", path: func(f *fixture) string { return f.evil + "/secret" }},
	{name: "sibling prefix no slash", path: func(f *fixture) string { return f.ws + "-evil/secret" }},
	{name: "symlink file out", path: p("link-file"), self: true},
	{name: "symlink absolute out", path: p("link-abs"), self: true},
	{name: "symlink dir out", path: p("link-dir/secret.txt")},
	{name: "symlink dir out, new file", path: p("link-dir/newfile")},
	{name: "symlink to sibling", path: p("evil-link/secret")},
	{name: "symlink chain out", path: p("chain1"), self: true},
	{name: "dangling out", path: p("dangling"), self: true},
	{name: "loop", path: p("loop"), self: true},
	{name: "absolute but inside", path: p("abs-inside"), self: true},
	{name: "proc self root link", path: p("proc-root/etc/passwd")},
	{name: "proc self cwd link", path: p("proc-cwd/x")},
	{name: "proc self root absolute", path: p("/proc/self/root/etc/passwd")},
	{name: "NUL byte", path: p("a.txt\x00../../etc/passwd")},
	{name: "very long", path: p(strings.Repeat("a/", 3000) + "x")},
	{name: "very long component", path: p(strings.Repeat("x", 300))},
	{name: "fifo", path: p("fifo"), self: true},
	{name: "device", path: p("dev"), self: true, root: true},
	{name: "hard link to outside", path: p("hardlink"), self: true},
}

// op is one tool call built around a path.
type op struct {
	tool string
	args func(path string) map[string]any
	// onSelf: this call acts on a link itself rather than through it.
	onSelf bool
}

var ops = []op{
	{tool: "read", args: func(p string) map[string]any { return map[string]any{"path": p} }},
	{tool: "read", args: func(p string) map[string]any { return map[string]any{"path": p, "byte_offset": 0} }},
	{tool: "write", args: func(p string) map[string]any { return map[string]any{"path": p, "content": "pwned"} }, onSelf: true},
	{tool: "edit", args: func(p string) map[string]any {
		return map[string]any{"path": p, "old_string": secret, "new_string": "pwned"}
	}},
	{tool: "glob", args: func(p string) map[string]any { return map[string]any{"pattern": "**", "path": p} }},
	{tool: "grep", args: func(p string) map[string]any { return map[string]any{"pattern": "SECRET", "path": p} }},
	{tool: "list", args: func(p string) map[string]any { return map[string]any{"path": p} }},
	{tool: "stat", args: func(p string) map[string]any { return map[string]any{"path": p} }, onSelf: true},
	{tool: "move", args: func(p string) map[string]any { return map[string]any{"from": p, "to": "moved"} }, onSelf: true},
	{tool: "move", args: func(p string) map[string]any { return map[string]any{"from": "a.txt", "to": p, "overwrite": true} }, onSelf: true},
	{tool: "delete", args: func(p string) map[string]any { return map[string]any{"path": p, "recursive": true} }, onSelf: true},
}

// TestEscapes runs every escape case through every tool: each call either
// fails with a structured refusal, or (acting on a link inside the workspace
// itself) succeeds without reaching outside. Nothing outside ever changes and
// no answer carries outside content.
func TestEscapes(t *testing.T) {
	for _, ec := range escapeCases {
		for i, o := range ops {
			t.Run(ec.name+"/"+o.tool+string(rune('0'+i)), func(t *testing.T) {
				if ec.root && os.Geteuid() != 0 {
					if os.Getenv("CI") == "true" {
						t.Fatal("needs root to make a device node, and CI runs as root: a skip here would hide a gap")
					}
					t.Skip("needs root to make a device node")
				}
				f := newFixture(t)
				before := f.outsideDigest(t)
				path := ec.path(f)
				done := make(chan struct{})
				var res any
				var err error
				go func() { res, err = f.call(t, o.tool, o.args(path)); close(done) }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("the call blocked")
				}
				if err == nil && !(ec.self && o.onSelf) {
					t.Fatalf("succeeded: %+v", res)
				}
				if err != nil {
					pe, ok := err.(*paddock.Error)
					if !ok || pe.Code == paddock.CodeInternal || pe.Message == "" {
						t.Fatalf("not a structured refusal: %#v", err)
					}
					if strings.Contains(pe.Message, f.base) {
						t.Fatalf("the refusal leaks a host path: %s", pe.Message)
					}
				}
				if leaks(res) {
					t.Fatalf("the answer carries outside content: %+v", res)
				}
				if after := f.outsideDigest(t); after != before {
					t.Fatal("something outside the workspace changed")
				}
				if _, err := os.Lstat(filepath.Join(f.outside, "newfile")); err == nil {
					t.Fatal("a file was created outside")
				}
			})
		}
	}
}

// TestPatternsStayInside: glob and grep refuse a pattern that leaves the
// workspace rather than answer an empty list, which reads as "nothing
// there" (issue #29 item 10).
func TestPatternsStayInside(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"glob", map[string]any{"pattern": "../../**/*"}},
		{"glob", map[string]any{"pattern": "/etc/*"}},
		{"glob", map[string]any{"pattern": "a/../../x"}},
		{"grep", map[string]any{"pattern": "x", "glob": "../outside/*"}},
	} {
		_, err := f.call(t, c.tool, c.args)
		pe, ok := err.(*paddock.Error)
		if !ok || pe.Code != paddock.CodeForbidden || pe.Rule != "outside_workspace" {
			t.Errorf("%s %v: %v, want forbidden, outside_workspace", c.tool, c.args, err)
		}
	}
	if _, err := f.call(t, "glob", map[string]any{"pattern": "**/..x"}); err != nil {
		t.Errorf("a name that only starts with .. is inside: %v", err)
	}
}

// TestRefusalsAreStructured checks the details an agent gets back.
func TestRefusalsAreStructured(t *testing.T) {
	f := newFixture(t)
	_, err := f.call(t, "read", map[string]any{"path": "../outside/secret.txt"})
	pe := err.(*paddock.Error)
	if pe.Code != paddock.CodeForbidden || pe.Rule != "outside_workspace" ||
		pe.Details["path"] != "../outside/secret.txt" || pe.Details["hint"] == "" {
		t.Fatalf("refusal = %+v", pe)
	}
	_, err = f.call(t, "write", map[string]any{"path": ".git/hooks/pre-commit", "content": "x"})
	pe = err.(*paddock.Error)
	if pe.Code != paddock.CodeForbidden || pe.Rule != "protected_path" {
		t.Fatalf("refusal = %+v", pe)
	}
}
