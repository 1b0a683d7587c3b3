package lifecycle_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestApplyAuthorFromGitConfig: with no apply_name or apply_email, an apply
// is authored by the user's git identity, the project's own configuration
// first; each field the operator names wins, and a change to any of them is
// seen by the next apply.
func TestApplyAuthorFromGitConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	home := t.TempDir()
	e.m.GitUser = gitx.UserConfigFor(home, "", "")
	e.project(t)
	apply := func() (string, error) {
		t.Helper()
		r := e.create(t, paddock.KindClone, "")
		os.WriteFile(filepath.Join(r.Workspace.Root, "new.txt"), []byte(r.ID+"\n"), 0o644)
		cs, err := e.m.Changes.Submit(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Changes.Approve(ctx, r.ID, cs.Hash, "ada"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{}); err != nil {
			return "", err
		}
		return gittest.Git(t, e.repo, "log", "-1", "--format=%an <%ae> / %cn <%ce>", "paddock/"+r.ID), nil
	}

	_, err := apply()
	mustCode(t, err, paddock.CodeBadRequest)

	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = Ada Lovelace\n\temail = ada@example.com\n"), 0o644)
	if got, err := apply(); err != nil || got != "Ada Lovelace <ada@example.com> / Ada Lovelace <ada@example.com>" {
		t.Fatalf("from the global configuration: %q, %v", got, err)
	}
	gittest.Git(t, e.repo, "config", "user.email", "ada@project.example")
	if got, err := apply(); err != nil || got != "Ada Lovelace <ada@project.example> / Ada Lovelace <ada@project.example>" {
		t.Fatalf("with the project's email: %q, %v", got, err)
	}
	e.m.SetIdentity(gitx.Identity{Name: "Operator"})
	if got, err := apply(); err != nil || got != "Operator <ada@project.example> / Operator <ada@project.example>" {
		t.Fatalf("with the operator's name: %q, %v", got, err)
	}
}
