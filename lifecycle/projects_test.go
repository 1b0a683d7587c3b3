package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
)

// TestSetProject: a project's settings change while it has runs, the runs
// follow them at once, and the change is recorded on them and logged.
func TestSetProject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	logs := &lockedBuffer{}
	e.m.Logger = slog.New(slog.NewTextHandler(logs, nil))
	ctx := context.Background()
	e.project(t)
	r := e.create(t, paddock.KindClone, "")
	write := func(path, content string) error {
		args, _ := json.Marshal(map[string]string{"path": path, "content": content})
		_, err := e.m.Broker.CallTool(ctx, r.ID, "write", args)
		return err
	}
	if err := write("secrets/a.txt", "x"); err != nil {
		t.Fatal(err)
	}

	p, err := e.m.Projects.SetProject(ctx, "my-app", "ada", paddock.SetProjectRequest{Protect: []string{"secrets/**"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Protected, "secrets/**") || !slices.Contains(p.Protected, ".envrc") {
		t.Fatalf("protected = %v, want the default list and secrets/**", p.Protected)
	}
	mustCode(t, write("secrets/b.txt", "x"), paddock.CodeForbidden)

	// The lint follows the rules the project allows now.
	os.WriteFile(filepath.Join(r.Workspace.Root, "notes.md"), []byte("Co-Authored-By: Claude <noreply@anthropic.com>\n"), 0o644)
	_, err = e.m.Changes.Submit(ctx, r.ID)
	mustCode(t, err, paddock.CodeAttributionLeak)
	rules := []string{"co-author-trailer"}
	if p, err = e.m.Projects.SetProject(ctx, "my-app", "ada", paddock.SetProjectRequest{AllowAttribution: &rules}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Protected, "secrets/**") {
		t.Fatalf("setting the rules changed the protected paths: %v", p.Protected)
	}
	if _, err := e.m.Changes.Submit(ctx, r.ID); err != nil {
		t.Fatalf("submit with the rule allowed: %v", err)
	}

	// Back to the defaults; none allowed.
	none := []string{}
	if p, err = e.m.Projects.SetProject(ctx, "my-app", "bob", paddock.SetProjectRequest{DefaultProtect: true, AllowAttribution: &none}); err != nil {
		t.Fatal(err)
	}
	if p.Protected != nil || len(p.AttributionAllow) != 0 {
		t.Fatalf("project = %+v, want the defaults", p)
	}

	// Recorded on the live run, with who, and logged.
	evs, _ := e.m.Runs.Events(ctx, r.ID, 0, 0)
	var by []string
	for _, ev := range evs {
		if ev.Type == paddock.EventProjectSettings {
			var d struct{ By string }
			json.Unmarshal(ev.Data, &d)
			by = append(by, d.By)
		}
	}
	if strings.Join(by, ",") != "ada,ada,bob" {
		t.Fatalf("settings events by %v, want ada,ada,bob", by)
	}
	if n := strings.Count(logs.String(), "project settings changed"); n != 3 {
		t.Fatalf("%d log lines, want 3:\n%s", n, logs)
	}

	// Refusals.
	for _, c := range []struct {
		name string
		req  paddock.SetProjectRequest
		code paddock.Code
	}{
		{"my-app", paddock.SetProjectRequest{}, paddock.CodeBadRequest},
		{"my-app", paddock.SetProjectRequest{DefaultProtect: true, Protect: []string{"x"}}, paddock.CodeBadRequest},
		{"my-app", paddock.SetProjectRequest{AllowAttribution: &[]string{"model-identifier"}}, paddock.CodeBadRequest},
		{"my-app", paddock.SetProjectRequest{Protect: []string{"/etc/x"}}, paddock.CodeBadRequest},
		{"nope", paddock.SetProjectRequest{DefaultProtect: true}, paddock.CodeNotFound},
	} {
		_, err := e.m.Projects.SetProject(ctx, c.name, "ada", c.req)
		mustCode(t, err, c.code)
	}
	// Removing the project still waits for its runs.
	mustCode(t, e.m.Projects.RemoveProject(ctx, "my-app"), paddock.CodeConflict)
}

// TestProjectCheckout: the daemon counts the project checkout's
// uncommitted changes (a modified tracked file, an untracked one; none
// when clean) without writing to it, and types what it cannot read.
func TestProjectCheckout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	p := e.project(t)
	if s, err := e.m.Projects.ProjectCheckout(ctx, "my-app"); err != nil || s.Uncommitted != 0 || s.Root != p.Root {
		t.Fatalf("a clean checkout: %+v %v", s, err)
	}
	os.WriteFile(filepath.Join(e.repo, "README.md"), []byte("edited\n"), 0o644)
	os.WriteFile(filepath.Join(e.repo, "new.txt"), []byte("new\n"), 0o644)
	index := filepath.Join(e.repo, ".git", "index")
	before, err := os.Stat(index)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := e.m.Projects.ProjectCheckout(ctx, "my-app"); err != nil || s.Uncommitted != 2 || s.Root != p.Root {
		t.Fatalf("a modified and an untracked file: %+v %v", s, err)
	}
	if after, err := os.Stat(index); err != nil || !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Fatalf("the status wrote the project's index: %v", err)
	}

	_, err = e.m.Projects.ProjectCheckout(ctx, "nope")
	mustCode(t, err, paddock.CodeNotFound)

	// Too slow a status is refused, typed, and not paddock's fault.
	e.m.Git.Timeout = time.Nanosecond
	_, err = e.m.Projects.ProjectCheckout(ctx, "my-app")
	mustCode(t, err, paddock.CodeConflict)
	if !errors.Is(err, gitx.ErrTimeout) {
		t.Fatalf("a status past its time: %v", err)
	}
	e.m.Git.Timeout = 0

	// A checkout that is gone.
	moved := e.repo + ".moved"
	if err := os.Rename(e.repo, moved); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(moved, e.repo)
	_, err = e.m.Projects.ProjectCheckout(ctx, "my-app")
	mustCode(t, err, paddock.CodeConflict)
}
