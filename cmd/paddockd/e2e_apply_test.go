package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestApproveAndApply drives the whole loop through the CLI: an agent's
// commands change the workspace, a person reviews the change set, approves
// its hash, and paddock commits it to a new branch of the project.
func TestApproveAndApply(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	os.MkdirAll(home, 0o700)
	os.WriteFile(filepath.Join(home, "paddock.toml"), []byte("apply_name = \"Ada Reviewer\"\napply_email = \"ada@example.com\"\n"), 0o600)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	before, lines := gittest.TreeDigest(t, repo)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", "echo changed > README.md && mkdir -p src && echo 'package src' > src/new.go && echo AKIAIOSFODNN7EXAMPLE > leak.txt").must(t)

	diff := cli(t, home, "diff", id).must(t).out
	for _, want := range []string{"modify", "README.md", "create", "src/new.go", "+changed", "secret", "[REDACTED:aws_access_key]"} {
		if !strings.Contains(diff, want) {
			t.Fatalf("diff misses %q:\n%s", want, diff)
		}
	}
	if strings.Contains(diff, "AKIAIOSFODNN7EXAMPLE") {
		t.Fatal("the diff shows a credential unmasked")
	}
	var cs paddock.ChangeSet
	json.Unmarshal([]byte(cli(t, home, "submit", id, "--json").must(t).out), &cs)
	if len(cs.Entries) != 3 || !strings.HasPrefix(cs.Hash, "sha256:") {
		t.Fatalf("submitted: %+v", cs)
	}
	gittest.RequireIdentical(t, repo, before, lines) // nothing reached the project yet
	cli(t, home, "apply", id).wantCode(t, exitConflict, "not approved")
	// A wrong hash is refused without telling the right one: approval is
	// not copy and paste from an error message.
	wrong := cli(t, home, "approve", id, "--hash", "sha256:"+strings.Repeat("ab", 32))
	wrong.wantCode(t, exitConflict, "differs")
	if !strings.Contains(wrong.err, "paddock diff "+id) || strings.Contains(wrong.err+wrong.out, strings.TrimPrefix(cs.Hash, "sha256:")) {
		t.Fatalf("a wrong hash's refusal tells the right one, or not how to review:\n%s", wrong.err)
	}
	cli(t, home, "approve", id, "--hash", "sha256:deadbeef").wantCode(t, exitUsage, "64 hex digits")
	cli(t, home, "approve", id).wantCode(t, exitUsage, "--hash")
	// Without its prefix, and in upper case, it is the same hash.
	bare := strings.ToUpper(strings.TrimPrefix(cs.Hash, "sha256:"))
	if out := cli(t, home, "approve", id, "--hash", bare).must(t).out; !strings.Contains(out, "approved") || !strings.Contains(out, cs.Hash) {
		t.Fatal(out)
	}
	cli(t, home, "apply", id, "--3way").wantCode(t, exitUsage, "--to worktree")
	out := cli(t, home, "apply", id).must(t).out
	if !strings.Contains(out, "refs/heads/paddock/"+id) {
		t.Fatalf("apply: %s", out)
	}
	if got := gittest.Git(t, repo, "show", "paddock/"+id+":README.md"); got != "changed" {
		t.Fatalf("the branch holds %q", got)
	}
	if author := gittest.Git(t, repo, "log", "-1", "--format=%an", "paddock/"+id); author != "Ada Reviewer" {
		t.Fatalf("author %q", author)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "README.md")); string(b) != "hello\n" {
		t.Fatal("apply touched the user's working tree")
	}
	cli(t, home, "apply", id).wantCode(t, exitConflict, "applied already")
	evs := cli(t, home, "events", id).must(t).out
	for _, want := range []string{"changeset.submitted", "changeset.approved", "changeset.applied"} {
		if !strings.Contains(evs, want) {
			t.Fatalf("events miss %s:\n%s", want, evs)
		}
	}
}

// TestApplyThreeWay: the user edited a file the agent changed too; apply
// --to worktree refuses, and --3way merges both edits into the working tree.
func TestApplyThreeWay(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	text := "one\ntwo\nthree\nfour\n"
	os.WriteFile(filepath.Join(repo, "notes.txt"), []byte(text), 0o644)
	gittest.Commit(t, repo, "notes", nil)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sed", "-i", "s/four/FOUR (agent)/", "notes.txt").must(t)
	var cs paddock.ChangeSet
	json.Unmarshal([]byte(cli(t, home, "submit", id, "--json").must(t).out), &cs)
	cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
	os.WriteFile(filepath.Join(repo, "notes.txt"), []byte(strings.Replace(text, "one", "ONE (user)", 1)), 0o644)
	cli(t, home, "apply", id, "--to", "worktree").wantCode(t, exitConflict, "--3way")
	cli(t, home, "apply", id, "--to", "worktree", "--3way").must(t)
	if b, _ := os.ReadFile(filepath.Join(repo, "notes.txt")); string(b) != "ONE (user)\ntwo\nthree\nFOUR (agent)\n" {
		t.Fatalf("merged: %q", b)
	}
}

// TestKillDuringWorktreeApply stops the daemon with SIGKILL at every step of
// an apply into a working tree (a test hook), restarts it, and checks that
// the project is byte-identical either to before or to fully applied; then
// the same at every step of an undo of it. The change set holds every kind
// of change, type changes included (a link, a file and a directory each
// becoming something else).
func TestKillDuringWorktreeApply(t *testing.T) {
	base := t.TempDir()
	template := newRepo(t, filepath.Join(base, "template"), 4)
	os.WriteFile(filepath.Join(template, "old.txt"), []byte("old\n"), 0o644)
	os.WriteFile(filepath.Join(template, "gone.txt"), []byte("gone\n"), 0o644)
	os.WriteFile(filepath.Join(template, "tolink.txt"), []byte("to link\n"), 0o644)
	os.WriteFile(filepath.Join(template, "todir.txt"), []byte("to dir\n"), 0o644)
	os.MkdirAll(filepath.Join(template, "dirtofile", "sub"), 0o755)
	os.WriteFile(filepath.Join(template, "dirtofile", "x.txt"), []byte("x\n"), 0o644)
	os.WriteFile(filepath.Join(template, "dirtofile", "sub", "y.txt"), []byte("y\n"), 0o644)
	os.Symlink("pkg00", filepath.Join(template, "lnk"))
	gittest.Commit(t, template, "more", nil)
	os.Chmod(filepath.Join(template, "dirtofile", "sub"), 0o700) // an undo makes it again as it was
	edits := func(ws string) {
		os.WriteFile(filepath.Join(ws, "README.md"), []byte("new readme\n"), 0o644)
		os.WriteFile(filepath.Join(ws, "old.txt"), []byte("changed\n"), 0o755)
		os.Remove(filepath.Join(ws, "gone.txt"))
		os.MkdirAll(filepath.Join(ws, "a/b"), 0o755)
		os.WriteFile(filepath.Join(ws, "a/b/new.go"), []byte("package b\n"), 0o644)
		os.WriteFile(filepath.Join(ws, "top.txt"), []byte("top\n"), 0o644)
		os.Symlink("README.md", filepath.Join(ws, "link"))
		// Type changes: file → link, file → directory, directory → file,
		// link → directory.
		os.Remove(filepath.Join(ws, "tolink.txt"))
		os.Symlink("README.md", filepath.Join(ws, "tolink.txt"))
		os.Remove(filepath.Join(ws, "todir.txt"))
		os.MkdirAll(filepath.Join(ws, "todir.txt"), 0o755)
		os.WriteFile(filepath.Join(ws, "todir.txt", "in.txt"), []byte("in\n"), 0o644)
		os.RemoveAll(filepath.Join(ws, "dirtofile"))
		os.WriteFile(filepath.Join(ws, "dirtofile"), []byte("a file now\n"), 0o644)
		os.Remove(filepath.Join(ws, "lnk"))
		os.MkdirAll(filepath.Join(ws, "lnk"), 0o755)
		os.WriteFile(filepath.Join(ws, "lnk", "post-checkout"), []byte("#!/bin/sh\n"), 0o755)
	}
	copyRepo := func(name string) string {
		dst := filepath.Join(base, name)
		if out, err := exec.Command("cp", "-a", template, dst).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		return dst
	}
	// The reference: the same apply, uninterrupted.
	home := filepath.Join(base, "home")
	cur := startDaemon(t, home)
	ref := copyRepo("reference")
	cli(t, home, "project", "add", ref).must(t)
	before, beforeLines := gittest.TreeDigest(t, ref)
	prepare := func(proj string) string {
		id := strings.TrimSpace(cli(t, home, "create", "-p", proj, "--kind", "clone").must(t).out)
		run := decode[*paddock.Run](t, cli(t, home, "show", id, "--json"))
		edits(run.Workspace.Root)
		var cs paddock.ChangeSet
		json.Unmarshal([]byte(cli(t, home, "submit", id, "--json").must(t).out), &cs)
		cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
		return id
	}
	id := prepare("reference")
	cli(t, home, "apply", id, "--to", "worktree").must(t)
	after, _ := gittest.TreeDigest(t, ref)
	cli(t, home, "undo", id).must(t)
	if got, lines := gittest.TreeDigest(t, ref); got != before {
		a, b := gittest.DiffLines(beforeLines, lines)
		t.Fatalf("the undo does not give the project back:\n %v\n %v", a, b)
	}

	// verb is "apply" or "undo": the daemon is killed at step k of it.
	killAt := func(verb string, k int) bool {
		proj := fmt.Sprintf("p-%s-%d", verb, k)
		repo := copyRepo(proj)
		cli(t, home, "project", "add", repo, "--name", proj).must(t)
		id := prepare(proj)
		args := []string{"apply", id, "--to", "worktree"}
		if verb == "undo" {
			cli(t, home, "apply", id, "--to", "worktree").must(t)
			args = []string{"undo", id}
		}
		cur.stop()
		t.Setenv("PADDOCK_TEST_APPLY_CRASH_AT", fmt.Sprint(k))
		cur = startDaemon(t, home)
		r := cli(t, home, args...)
		crashed := r.code != 0
		t.Setenv("PADDOCK_TEST_APPLY_CRASH_AT", "")
		cur.stop() // reaps the killed daemon, or stops the one that finished
		cur = startDaemon(t, home)
		got, lines := gittest.TreeDigest(t, repo)
		switch {
		case !crashed && got == map[string]string{"apply": after, "undo": before}[verb]:
			t.Logf("%s step %d is past the last: done without a kill", verb, k)
		case got == before:
			t.Logf("killed at %s step %d: the project is as before the apply", verb, k)
		case got == after:
			t.Logf("killed at %s step %d: the project is as applied", verb, k)
		default:
			a, b := gittest.DiffLines(beforeLines, lines)
			t.Fatalf("killed at %s step %d: the project is neither as before nor fully applied:\n %v\n %v", verb, k, a, b)
		}
		// The project lock the killed apply held is free again.
		for _, p := range decode[[]*paddock.Project](t, cli(t, home, "project", "ls", "--json")) {
			if p.Name == proj && p.Lock != nil {
				t.Fatalf("killed at %s step %d: the project lock is still held by %s", verb, k, p.Lock.RunID)
			}
		}
		// No staged file of the apply or the undo is left anywhere in the project.
		filepath.Walk(repo, func(p string, fi os.FileInfo, err error) error {
			if err == nil && strings.Contains(fi.Name(), ".paddock-") {
				t.Fatalf("killed at %s step %d: left %s", verb, k, p)
			}
			return nil
		})
		return crashed
	}
	for _, verb := range []string{"apply", "undo"} {
		steps := 0
		for k := 1; killAt(verb, k); k++ {
			steps = k
		}
		if steps < 12 {
			t.Fatalf("only %d crash points of the %s were exercised", steps, verb)
		}
		t.Logf("%d crash points of the %s exercised", steps, verb)
	}
}

// TestLargeDiff: a diff larger than an answer carries is left out of the
// change set's JSON and streamed whole, masked, by paddock diff; --patch
// gives exactly the diff, which git apply takes. The size limits set in
// paddock.toml refuse a larger file, naming it.
func TestLargeDiff(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	os.MkdirAll(home, 0o700)
	os.WriteFile(filepath.Join(home, "paddock.toml"), []byte("changeset_max_file = \"8MiB\"\n"), 0o600)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", "head -c 4800000 /dev/urandom | base64 > big.txt && echo AKIAIOSFODNN7EXAMPLE > leak.txt").must(t)
	sum := strings.Fields(cli(t, home, "exec", id, "--", "sha256sum", "big.txt").must(t).out)[0]

	var cs paddock.ChangeSet
	if err := json.Unmarshal([]byte(cli(t, home, "diff", id, "--json").must(t).out), &cs); err != nil {
		t.Fatal(err)
	}
	if !cs.DiffOmitted || cs.Diff != "" || cs.DiffSize <= paddock.InlineDiff || len(cs.Entries) != 2 {
		t.Fatalf("diff --json: omitted %t, %d bytes inline, size %d, %d entries", cs.DiffOmitted, len(cs.Diff), cs.DiffSize, len(cs.Entries))
	}
	human := cli(t, home, "diff", id).must(t).out
	if !strings.Contains(human, "create") || !strings.Contains(human, "+++ b/big.txt") || len(human) < int(cs.DiffSize) ||
		!strings.Contains(human, "[REDACTED:aws_access_key]") || strings.Contains(human, "AKIAIOSFODNN7EXAMPLE") {
		t.Fatalf("diff: %d bytes, masked %t", len(human), strings.Contains(human, "[REDACTED"))
	}
	patch := cli(t, home, "diff", id, "--patch").must(t).out
	if !strings.HasPrefix(patch, "diff --git") || strings.Contains(patch, "AKIAIOSFODNN7EXAMPLE") {
		t.Fatalf("--patch: %.200q", patch)
	}
	check := filepath.Join(base, "check")
	gittest.Git(t, "", "clone", "-q", repo, check)
	apply := exec.Command("git", "apply", "-")
	apply.Dir, apply.Stdin = check, strings.NewReader(patch)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s", err, out)
	}
	out, _ := exec.Command("sha256sum", filepath.Join(check, "big.txt")).Output()
	if got := strings.Fields(string(out)); len(got) == 0 || got[0] != sum {
		t.Fatalf("git apply of --patch gives big.txt %v, the workspace has %s", got, sum)
	}
	cli(t, home, "diff", id, "--stat", "--patch").wantCode(t, exitUsage, "patch")

	// Frozen, the diff is kept whole beside the change set: the artifact
	// answer refuses to carry it and names the stream, which gives it.
	var sub paddock.ChangeSet
	json.Unmarshal([]byte(cli(t, home, "submit", id, "--json").must(t).out), &sub)
	op := client.Unix(filepath.Join(home, "paddock.sock"))
	_, err := op.Artifact(context.Background(), id, "diff")
	if !paddock.IsCode(err, paddock.CodeTooLarge) || !strings.Contains(err.Error(), "/changeset/diff?hash="+sub.Hash) {
		t.Fatalf("the diff artifact: %v", err)
	}
	var frozen strings.Builder
	if h, err := op.CopyDiff(context.Background(), id, sub.Hash, &frozen); err != nil || h != sub.Hash || int64(frozen.Len()) < sub.DiffSize {
		t.Fatalf("the frozen diff: %v, hash %s, %d bytes of %d", err, h, frozen.Len(), sub.DiffSize)
	}

	cli(t, home, "exec", id, "--", "sh", "-c", "head -c 9000000 /dev/urandom > huge.bin").must(t)
	cli(t, home, "diff", id, "--stat").wantCode(t, exitUsage, "huge.bin is 9000000 bytes, over the change set's file limit of 8388608")
}
