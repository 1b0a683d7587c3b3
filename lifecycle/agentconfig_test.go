package lifecycle_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine/confinetest"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestAgentConfigNeverApplied: agent and editor configuration the shell
// made under any spelling (case, depth, look-alikes, invisible characters,
// trailing dots) is in the change set, labelled, and refuses the apply, to a
// branch and into the working tree, as the exact names do; the project is
// left as it was. The ordinary names beside them are applied, and what runs
// code or steers agents is labelled.
func TestAgentConfigNeverApplied(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	e.m.Identity = gitx.Identity{Name: "A", Email: "a@example.com"}
	write := func(ws, p string) {
		t.Helper()
		full := filepath.Join(ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("echo planted\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before, lines := gittest.TreeDigest(t, e.repo)
	for _, n := range confinetest.Protected {
		r := e.create(t, paddock.KindClone, "")
		write(r.Workspace.Root, n.Path)
		write(r.Workspace.Root, "ordinary.txt")
		cs, err := e.m.Changes.Submit(ctx, r.ID)
		if err != nil {
			t.Fatalf("%q: %v", n.Path, err)
		}
		var entry *paddock.ChangeEntry
		for i := range cs.Entries {
			if cs.Entries[i].Path == n.Path {
				entry = &cs.Entries[i]
			}
		}
		if entry == nil || entry.Blocked == "" || !slices.Contains(entry.Risks, "agent_config") {
			t.Errorf("%q (%s): entry %+v, want it labelled and never applied", n.Path, n.Why, entry)
			continue
		}
		if _, err := e.m.Changes.Approve(ctx, r.ID, cs.Hash, "a"); err != nil {
			t.Fatal(err)
		}
		_, err = e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{})
		mustCode(t, err, paddock.CodeForbidden)
		_, err = e.m.Changes.ApplyToWorktree(ctx, r.ID, false)
		mustCode(t, err, paddock.CodeForbidden)
	}
	gittest.RequireIdentical(t, e.repo, before, lines)

	// The names beside them, and those only labelled, are applied.
	r := e.create(t, paddock.KindClone, "")
	for _, n := range confinetest.Allowed {
		write(r.Workspace.Root, n.Path)
	}
	for _, p := range append(append([]string{}, confinetest.RunsCode...), confinetest.AgentInstructions...) {
		write(r.Workspace.Root, p)
	}
	cs, err := e.m.Changes.Submit(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	risks := map[string][]string{}
	for _, en := range cs.Entries {
		if en.Blocked != "" {
			t.Errorf("%s blocked: %s", en.Path, en.Blocked)
		}
		risks[en.Path] = en.Risks
	}
	for _, p := range confinetest.RunsCode {
		if !slices.Contains(risks[p], "runs_code") {
			t.Errorf("%s: risks %v, want runs_code", p, risks[p])
		}
	}
	for _, p := range confinetest.AgentInstructions {
		if !slices.Contains(risks[p], "agent_instructions") {
			t.Errorf("%s: risks %v, want agent_instructions", p, risks[p])
		}
	}
	if _, err := e.m.Changes.Approve(ctx, r.ID, cs.Hash, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Changes.ApplyToWorktree(ctx, r.ID, false); err != nil {
		t.Fatal(err)
	}
	for _, n := range confinetest.Allowed {
		if _, err := os.Lstat(filepath.Join(e.repo, n.Path)); err != nil {
			t.Errorf("%q not applied: %v", n.Path, err)
		}
	}
}

// TestChangeSetReadsTheBaseAndTheProject: a run's change set compares its
// names with the base's (read from git for a clone, from the overlay's
// lower layer for an overlay) and reads the .envrc files direnv runs: the
// base's, and the project work tree's own untracked one. What they source
// is labelled agent_config and never applied; a name that is the base's
// README.md but for case is labelled name_collision.
func TestChangeSetReadsTheBaseAndTheProject(t *testing.T) {
	t.Parallel()
	for _, kind := range []paddock.WorkspaceKind{paddock.KindClone, paddock.KindOverlay} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			gittest.Commit(t, e.repo, "direnv", map[string]string{
				"scripts/env.sh": "export A=1\n", "svc/.envrc": "source ./local.sh\n", "svc/local.sh": "export B=1\n",
			})
			// The project's own .envrc, which is not in the base.
			if err := os.WriteFile(filepath.Join(e.repo, ".envrc"), []byte("source scripts/env.sh\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			e.project(t)
			if kind == paddock.KindOverlay {
				withSandbox(t, e)
			}
			r := e.create(t, kind, "")
			for p, content := range map[string]string{"scripts/env.sh": "curl x | sh\n", "svc/local.sh": "curl x | sh\n", "readme.md": "x\n", "ok.txt": "x\n"} {
				args, _ := json.Marshal(map[string]string{"path": p, "content": content})
				if _, err := e.m.Broker.CallTool(ctx, r.ID, "write", args); err != nil {
					t.Fatalf("write %s: %v", p, err)
				}
			}
			cs, err := e.m.Changes.ChangeSet(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]paddock.ChangeEntry{}
			for _, en := range cs.Entries {
				got[en.Path] = en
			}
			for p, by := range map[string]string{"scripts/env.sh": "sourced by the project's .envrc", "svc/local.sh": "sourced by the base's svc/.envrc"} {
				if en := got[p]; !slices.Contains(en.Risks, "agent_config") || !strings.Contains(en.Blocked, by) {
					t.Errorf("%s: %+v, want agent_config, %s", p, en, by)
				}
			}
			if en := got["readme.md"]; !slices.Contains(en.Risks, "name_collision") || !strings.Contains(en.Notes["name_collision"], "README.md (in the base)") {
				t.Errorf("readme.md: %+v, want a collision with the base's README.md", en)
			}
			if en := got["ok.txt"]; len(en.Risks) != 0 || en.Blocked != "" {
				t.Errorf("ok.txt: %+v", en)
			}
		})
	}
}
