package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
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
	cli(t, home, "approve", id, "--hash", "sha256:deadbeef").wantCode(t, exitConflict, "not the submitted")
	cli(t, home, "approve", id).wantCode(t, exitUsage, "--hash")
	if out := cli(t, home, "approve", id, "--hash", cs.Hash).must(t).out; !strings.Contains(out, "approved") {
		t.Fatal(out)
	}
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
