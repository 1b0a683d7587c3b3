package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestBlameAndPartialApproval: each hunk of a change set names the tool
// call or command that wrote it (an edit, a command run through a shell, a
// write), with its event seq; a person approves two of its three hunks,
// and the branch an apply makes holds exactly those: the left-out hunk's
// lines are as the base has them.
func TestBlameAndPartialApproval(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, repo := reviewDaemon(t)
	lines := ""
	for i := 1; i <= 30; i++ {
		lines += fmt.Sprintf("line %d\n", i)
	}
	gittest.Commit(t, repo, "a long file", map[string]string{"long.txt": lines})
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "tool", id, "edit", "--arg", "path=long.txt", "--arg", "old_string=line 3\n", "--arg", "new_string=line three\n").must(t)
	cli(t, home, "exec", id, "--", "sh", "-c", `sed -i 's/^line 25$/line twenty-five/' long.txt`).must(t)
	cli(t, home, "tool", id, "write", "--arg", "path=new.txt", "--arg", "content=fresh\n").must(t)
	// A command that changes what an earlier call wrote takes those lines over.
	cli(t, home, "exec", id, "--", "sh", "-c", `sed -i 's/^fresh$/fresher/' new.txt`).must(t)

	b := decode[paddock.Blame](t, cli(t, home, "diff", id, "--blame", "--json"))
	if len(b.Hunks) != 3 {
		t.Fatalf("hunks: %+v", b.Hunks)
	}
	want := map[int]string{1: "edit long.txt", 2: "exec: sh -c sed -i 's/^line 25$/line twenty-five/' long.txt", 3: "exec: sh -c sed -i 's/^fresh$/fresher/' new.txt"}
	for _, h := range b.Hunks {
		if len(h.Seqs) != 1 || b.Sources[h.Seqs[0]].What != want[h.N] || h.Seqs[0] == 0 {
			t.Errorf("hunk %d (%s) comes from %v: %+v", h.N, h.Path, h.Seqs, b.Sources)
		}
	}
	out := cli(t, home, "diff", id, "--blame").must(t).out
	for _, s := range []string{"### hunk 1 ← #", "edit long.txt", "### hunk 3 ← #", "+line three", "+fresher"} {
		if !strings.Contains(out, s) {
			t.Fatalf("diff --blame lacks %q:\n%s", s, out)
		}
	}

	cs := decode[paddock.ChangeSet](t, cli(t, home, "submit", id, "--json"))
	cli(t, home, "approve", id, "--hash", cs.Hash, "--hunks", "9").wantCode(t, exitUsage, "hunks 1 to 3")
	cli(t, home, "approve", id, "--hash", cs.Hash, "--hunks", "").wantCode(t, exitUsage, "--hunks is empty")
	// Blame numbers the submitted change set, whatever the workspace did since.
	cli(t, home, "exec", id, "--", "sh", "-c", `sed -i 's/^line 1$/line one/' long.txt`).must(t)
	if b := decode[paddock.Blame](t, cli(t, home, "diff", id, "--blame", "--json")); b.Hash != cs.Hash || len(b.Hunks) != 3 {
		t.Fatalf("blame after the workspace moved on: %s, %d hunks", b.Hash, len(b.Hunks))
	}
	out = cli(t, home, "approve", id, "--hash", cs.Hash, "--hunks", "1,3").must(t).out
	if !strings.Contains(out, "approved hunks 1,3 of "+cs.Hash) || !strings.Contains(out, "+line three") || strings.Contains(out, "twenty-five") {
		t.Fatalf("approve --hunks:\n%s", out)
	}
	// The submitted change set's blame still numbers all three.
	if b := decode[paddock.Blame](t, cli(t, home, "diff", id, "--blame", "--hash", cs.Hash, "--json")); len(b.Hunks) != 3 {
		t.Fatalf("blame of the submitted change set: %+v", b.Hunks)
	}
	cli(t, home, "apply", id, "--to", "branch=partial").must(t)
	got := gittest.Git(t, repo, "show", "partial:long.txt")
	if !strings.Contains(got, "line three\n") || !strings.Contains(got, "line 25\n") || strings.Contains(got, "twenty-five") {
		t.Fatalf("the branch's long.txt:\n%s", got)
	}
	if got := gittest.Git(t, repo, "show", "partial:new.txt"); got != "fresher" {
		t.Fatalf("the branch's new.txt: %q", got)
	}
	ev := cli(t, home, "events", id, "--json").must(t).out
	if !strings.Contains(ev, `"part_of":"`+cs.Hash+`"`) {
		t.Fatalf("the approval does not say what it was part of:\n%s", ev)
	}
}

// TestBlameOfACloneRun: a clone's workspace is a whole tree, walked by
// stat after a command and read only where a write tool wrote: the hunks
// of a write and of a command are each theirs, a file put back as the
// base has it (by a command, by a write) leaves no hunk, and a deletion is
// the command's.
func TestBlameOfACloneRun(t *testing.T) {
	t.Parallel() // its own daemon and state
	home, _ := reviewDaemon(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "clone").must(t).out)
	cli(t, home, "tool", id, "write", "--arg", "path=new.txt", "--arg", "content=fresh\n").must(t)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf 'hello, clone\n' > README.md; rm pkg00/file0000.go`).must(t)
	cli(t, home, "exec", id, "--", "sh", "-c", `printf 'x\n' > pkg01/file0001.go; git checkout -q -- pkg01/file0001.go 2>/dev/null || printf 'package p\n// 1\n' > pkg01/file0001.go`).must(t)
	cli(t, home, "tool", id, "write", "--arg", "path=pkg01/file0001.go", "--arg", "content=package q\n").must(t)
	cli(t, home, "tool", id, "write", "--arg", "path=pkg03/file0003.go", "--arg", "content=package q\n").must(t)
	cli(t, home, "tool", id, "write", "--arg", "path=pkg01/file0001.go", "--arg", "content=package p\n// 1\n").must(t)
	b := decode[paddock.Blame](t, cli(t, home, "diff", id, "--blame", "--json"))
	by := map[string]string{}
	for _, h := range b.Hunks {
		if len(h.Seqs) != 1 || h.Seqs[0] == 0 {
			t.Fatalf("hunk %d (%s) comes from %v", h.N, h.Path, h.Seqs)
		}
		by[h.Path] = b.Sources[h.Seqs[0]].What
	}
	want := map[string]string{"new.txt": "write new.txt", "pkg03/file0003.go": "write pkg03/file0003.go", "README.md": "exec: sh -c printf 'hello, clone\\n' > README.md; rm pkg00/file0000.go", "pkg00/file0000.go": "exec: sh -c printf 'hello, clone\\n' > README.md; rm pkg00/file0000.go"}
	if fmt.Sprint(by) != fmt.Sprint(want) {
		t.Fatalf("blame of a clone run:\n got %v\nwant %v", by, want)
	}
}
