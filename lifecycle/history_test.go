package lifecycle_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestCreateIsFlatInHistory: making an overlay run costs git the same work
// in a repository of 60,000 commits as in one of 5 with the same files.
// Work is counted, not timed: the git commands the create runs and the
// objects they read from packs (GIT_TRACE_PACK_ACCESS logs every one).
// Checking the repository's identity by walking its history read all
// 60,000 commits on every create.
func TestCreateIsFlatInHistory(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a repository of 60,000 commits")
	}
	shallowCmds, shallowObjs := createWork(t, 5)
	deepCmds, deepObjs := createWork(t, 60000)
	t.Logf("5 commits: %d objects read by %q", shallowObjs, shallowCmds)
	t.Logf("60,000 commits: %d objects read by %q", deepObjs, deepCmds)
	if !slices.Equal(shallowCmds, deepCmds) {
		t.Errorf("git commands differ with history depth:\n5:      %q\n60,000: %q", shallowCmds, deepCmds)
	}
	// Object counts may differ by a delta chain; a walk differs by 60,000.
	if deepObjs > shallowObjs+50 {
		t.Errorf("create read %d objects at 60,000 commits, %d at 5: it walks the history", deepObjs, shallowObjs)
	}
	for _, c := range deepCmds {
		if strings.HasPrefix(c, "rev-list") || strings.HasPrefix(c, "log") {
			t.Errorf("create runs git %s, a history walk", c)
		}
	}
}

// createWork declares a repository of commits commits (20 files) as a
// project and returns the git commands, without their hardening options,
// and the count of pack objects read by making one overlay run at a base
// whose snapshot exists.
func createWork(t *testing.T, commits int) (cmds []string, objects int) {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git unavailable")
	}
	base := t.TempDir()
	e := &env{state: filepath.Join(base, "state"), db: filepath.Join(base, "state", "state.db"), repo: filepath.Join(base, "src", "my app")}
	if err := gittest.History(e.repo, commits, 20); err != nil {
		t.Fatal(err)
	}
	cmdLog, packLog := filepath.Join(base, "commands"), filepath.Join(base, "pack-access")
	wrapper := filepath.Join(base, "git")
	script := fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' \"$*\" >> '%s'\nGIT_TRACE_PACK_ACCESS='%s' exec '%s' \"$@\"\n", cmdLog, packLog, real)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	e.open(t, &gitx.Git{Path: wrapper})
	e.project(t)
	withSandbox(t, e) // its first overlay run builds the base's snapshot
	os.Remove(cmdLog)
	os.Remove(packLog)

	r, err := e.m.Runs.Create(context.Background(), paddock.CreateRunRequest{Project: "my-app", Kind: "overlay"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.m.Runs.Reject(context.Background(), r.ID)
	b, err := os.ReadFile(cmdLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		cmds = append(cmds, gitCommand(line))
	}
	if b, err := os.ReadFile(packLog); err == nil {
		objects = strings.Count(string(b), "\n")
	}
	return cmds, objects
}

// gitCommand strips the runner's "-c key=value" and "--no-pager" options
// from a logged command line, and object names, which differ between
// repositories.
func gitCommand(line string) string {
	f := strings.Fields(line)
	var out []string
	for i := 0; i < len(f); i++ {
		switch {
		case f[i] == "-c":
			i++
		case f[i] == "--no-pager":
		case len(f[i]) >= 40 && strings.Trim(f[i], "0123456789abcdef") == "":
			out = append(out, "SHA")
		default:
			out = append(out, f[i])
		}
	}
	return strings.Join(out, " ")
}

// TestCreateRefusesAReplacedRepository: a project root that came to hold
// another .git, even a clone of the same history, is not the repository
// that was declared, and no run is made from it.
func TestCreateRefusesAReplacedRepository(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	e.create(t, paddock.KindClone, "")
	if err := os.Rename(e.repo, e.repo+".old"); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, filepath.Dir(e.repo), "clone", "--quiet", "--no-hardlinks", e.repo+".old", e.repo)
	_, err := e.m.Runs.Create(context.Background(), paddock.CreateRunRequest{Project: "my-app", Kind: "clone"})
	mustCode(t, err, paddock.CodeConflict)
	if !strings.Contains(err.Error(), "different repository") {
		t.Fatalf("error = %v", err)
	}
	os.RemoveAll(e.repo)
	if err := os.Rename(e.repo+".old", e.repo); err != nil {
		t.Fatal(err)
	}
	e.create(t, paddock.KindClone, "")
}
