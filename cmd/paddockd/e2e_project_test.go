package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
)

// TestProjectSet: a project's settings change through the CLI while it has
// runs, the attribution lint says where, what and which rule, and project rm
// still waits for the runs.
func TestProjectSet(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	d := startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "--project", "app", "--kind", "clone").must(t).out)

	// Ordinary code naming a model is no attribution.
	cli(t, home, "tool", id, "write", "--arg", "path=model.go", "--arg", "content=package app\n\n// DefaultModel is gpt-4o.\nconst DefaultModel = \"gpt-4o\"\n").must(t)
	cli(t, home, "tool", id, "write", "--arg", "path=NOTES.md", "--arg", "content=# Notes\nCo-Authored-By: Claude <noreply@anthropic.com>\n").must(t)
	r := cli(t, home, "submit", id)
	r.wantCode(t, exitAttribution, `NOTES.md:2: "Co-Authored-By: Claude" credits a model or a tool with the work`)
	for _, want := range []string{"rule: co-author-trailer", "paddock project set app --allow-attribution co-author-trailer"} {
		if !strings.Contains(r.err, want) {
			t.Fatalf("the refusal lacks %q:\n%s", want, r.err)
		}
	}

	cli(t, home, "project", "set", "app").wantCode(t, exitUsage, "nothing to set")
	cli(t, home, "project", "set", "app", "--allow-attribution", "everything").wantCode(t, exitUsage, "unknown attribution rule")
	cli(t, home, "project", "set", "nope", "--default-protect").wantCode(t, exitNotFound, "no project")
	out := cli(t, home, "project", "set", "app", "--allow-attribution", "co-author-trailer", "--protect", "secrets/**").must(t).out
	if !strings.Contains(out, "attribution rules allowed: co-author-trailer") || !strings.Contains(out, "secrets/**") {
		t.Fatalf("project set said:\n%s", out)
	}
	cli(t, home, "submit", id).must(t)
	cli(t, home, "tool", id, "write", "--arg", "path=secrets/key", "--arg", "content=x").wantCode(t, exitForbidden, "protected")

	p := decode[*paddock.Project](t, cli(t, home, "project", "set", "app", "--no-default-protect", "--no-allow-attribution", "--json"))
	if p.Protected == nil || len(p.Protected) != 0 || len(p.AttributionAllow) != 0 {
		t.Fatalf("project = %+v, want nothing but .git protected and no rule allowed", p)
	}
	if out := cli(t, home, "project", "set", "app", "--default-protect").must(t).out; !strings.Contains(out, "protected: the default list") {
		t.Fatalf("project set said:\n%s", out)
	}

	events := cli(t, home, "events", id).must(t).out
	if n := strings.Count(events, paddock.EventProjectSettings); n != 3 {
		t.Fatalf("%d %s events, want 3:\n%s", n, paddock.EventProjectSettings, events)
	}
	logb, _ := os.ReadFile(d.log.Name())
	if n := strings.Count(string(logb), "project settings changed"); n != 3 {
		t.Fatalf("%d log lines of the change, want 3", n)
	}
	cli(t, home, "project", "rm", "app").wantCode(t, exitConflict, "still has workspaces")
}
