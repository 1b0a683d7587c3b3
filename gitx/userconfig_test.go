package gitx_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

func write(t *testing.T, path, body string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestUserIdentity: the identity is read as git would read it to commit in
// the project: local over global, ~/.gitconfig over the XDG file, includes
// (conditional ones too) followed, nothing else read or run.
func TestUserIdentity(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	home := t.TempDir()
	xdg := filepath.Join(home, ".config")
	work := gittest.NewRepo(t, filepath.Join(home, "work", "app"), map[string]string{"a": "1"})
	own := gittest.NewRepo(t, filepath.Join(home, "src", "toy"), map[string]string{"a": "1"})
	u := gitx.UserConfigFor(home, "", "")
	id := func(dir string) gitx.Identity {
		t.Helper()
		got, err := g.UserIdentity(ctx, dir, u)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	if got := id(own); got != (gitx.Identity{}) {
		t.Fatalf("no configuration: %+v, want nothing", got)
	}

	// The XDG file alone.
	write(t, filepath.Join(xdg, "git", "config"), "[user]\n\tname = X Name\n\temail = x@example.com\n")
	if got := id(own); got != (gitx.Identity{Name: "X Name", Email: "x@example.com"}) {
		t.Fatalf("from the XDG file: %+v", got)
	}
	// ~/.gitconfig wins where it sets a key; an included file, chosen by
	// a gitdir condition, sets the work email.
	write(t, filepath.Join(home, ".gitconfig"), "[user]\n\tname = Ada Lovelace\n"+
		"[includeIf \"gitdir:~/work/\"]\n\tpath = ~/.gitconfig-work\n")
	write(t, filepath.Join(home, ".gitconfig-work"), "[user]\n\temail = ada@work.example\n")
	if got := id(own); got != (gitx.Identity{Name: "Ada Lovelace", Email: "x@example.com"}) {
		t.Fatalf("outside ~/work: %+v", got)
	}
	if got := id(work); got != (gitx.Identity{Name: "Ada Lovelace", Email: "ada@work.example"}) {
		t.Fatalf("inside ~/work: %+v", got)
	}
	// The project's own configuration wins.
	gittest.Git(t, work, "config", "user.name", "Ada (work)")
	if got := id(work); got != (gitx.Identity{Name: "Ada (work)", Email: "ada@work.example"}) {
		t.Fatalf("with a local name: %+v", got)
	}
	// GIT_CONFIG_GLOBAL names the one global file.
	alt := filepath.Join(home, "alt.gitconfig")
	write(t, alt, "[user]\n\temail = alt@example.com\n")
	if got, _ := g.UserIdentity(ctx, own, gitx.UserConfigFor(home, xdg, alt)); got != (gitx.Identity{Email: "alt@example.com"}) {
		t.Fatalf("with GIT_CONFIG_GLOBAL: %+v", got)
	}

	// Nothing the configuration says runs.
	marker := filepath.Join(t.TempDir(), "ran")
	evil := filepath.Join(t.TempDir(), "evil")
	write(t, evil, "#!/bin/sh\ntouch "+marker+"\n")
	os.Chmod(evil, 0o755)
	for _, kv := range [][2]string{{"core.fsmonitor", evil}, {"core.pager", evil}, {"core.hooksPath", filepath.Dir(evil)},
		{"alias.config", "!" + evil}, {"credential.helper", evil}, {"core.editor", evil}} {
		gittest.Git(t, work, "config", kv[0], kv[1])
	}
	if got := id(work); got.Name != "Ada (work)" {
		t.Fatalf("identity: %+v", got)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("reading the identity ran a program the configuration names")
	}

	// A configuration git cannot read is an error, not a silent nobody.
	write(t, filepath.Join(home, ".gitconfig"), "[user\n")
	if _, err := g.UserIdentity(ctx, own, u); err == nil {
		t.Fatal("a broken ~/.gitconfig read as no identity")
	}
}
