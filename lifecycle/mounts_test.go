package lifecycle_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
)

// TestRunMounts: a run's mounts are host directories its view shows
// read-only at their own paths, a bin one first on its PATH; the daemon
// refuses one that would show a run its state, the project's checkout, a
// home directory's credentials, a system directory, or a path through a
// link, and makes nothing then.
func TestRunMounts(t *testing.T) {
	e := newEnv(t)
	p := e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	tools := filepath.Join(t.TempDir(), "tools")
	bin := filepath.Join(tools, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(tools), 0o755)
	os.WriteFile(filepath.Join(bin, "hello-tool"), []byte("#!/bin/sh\necho hello from the tool\n"), 0o755)
	r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "clone", Mounts: []string{bin}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "hello-tool; touch " + bin + "/x 2>/dev/null && echo WROTE"}})
	if err != nil || res.Stdout != "hello from the tool\n" {
		t.Fatalf("a tool on a mount: %v %+v", err, res)
	}
	if got, _ := e.m.Run(ctx, r.ID); got.Agent == nil || !strings.Contains(strings.Join(got.Agent.Mounts, " "), bin) {
		t.Fatalf("the run's definition does not keep its mounts: %+v", got.Agent)
	}

	home := filepath.Join(t.TempDir(), "someone")
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(bin, link)
	before, _ := e.m.Runs.Runs(ctx, paddock.RunFilter{Removed: true})
	for _, tc := range []struct{ name, mount, says string }{
		{"the daemon's state", filepath.Dir(e.m.WorkspacesDir), "daemon's state"},
		{"inside the state", e.m.ArtifactsDir, "daemon's state"},
		{"the project's checkout", p.Root, "checkout"},
		{"above the checkout", filepath.Dir(p.Root), "checkout"},
		{"the project's .git", filepath.Join(p.Root, ".git"), "checkout"},
		{"a home directory", home, ".ssh"},
		{"a system directory", "/usr/local", "system directories"},
		{"a link", link, "symbolic link"},
		{"a file", filepath.Join(bin, "hello-tool"), "not a directory"},
		{"relative", "tools/bin", "absolute"},
		{"the root", "/", "absolute"},
	} {
		_, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "clone", Mounts: []string{tc.mount}})
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s (%s): %v, want a refusal saying %q", tc.name, tc.mount, err, tc.says)
		}
	}
	if after, _ := e.m.Runs.Runs(ctx, paddock.RunFilter{Removed: true}); len(after) != len(before) {
		t.Fatalf("refused mounts made %d run(s)", len(after)-len(before))
	}
}
