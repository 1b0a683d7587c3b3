package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestApplyIdentityAndConfigReload: a user whose identity is only in git's
// configuration can apply; a changed paddock.toml is taken at once where it
// can be (the apply identity) and reported as waiting for a restart where it
// cannot, and a broken one is ignored, loudly.
func TestApplyIdentityAndConfigReload(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	user := filepath.Join(base, "user")
	os.MkdirAll(user, 0o700)
	os.WriteFile(filepath.Join(user, ".gitconfig"), []byte("[user]\n\tname = Ada Lovelace\n\temail = ada@example.com\n"), 0o600)
	t.Setenv("HOME", user)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("GIT_CONFIG_GLOBAL", "")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	d := startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	apply := func() string {
		t.Helper()
		id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "clone").must(t).out)
		cli(t, home, "tool", id, "write", "--arg", "path=new.txt", "--arg", "content="+id).must(t)
		var cs paddock.ChangeSet
		json.Unmarshal([]byte(cli(t, home, "submit", id, "--json").must(t).out), &cs)
		cli(t, home, "approve", id, "--hash", cs.Hash).must(t)
		cli(t, home, "apply", id).must(t)
		return gittest.Git(t, repo, "log", "-1", "--format=%an <%ae>", "paddock/"+id)
	}
	if got := apply(); got != "Ada Lovelace <ada@example.com>" {
		t.Fatalf("authored by %q, want the user's git identity", got)
	}

	logHas := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, _ := os.ReadFile(d.log.Name())
			if strings.Contains(string(b), want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the daemon's log never said %q:\n%s", want, b)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	toml := filepath.Join(home, "paddock.toml")
	os.WriteFile(toml, []byte("apply_name = \"Operator\"\napply_email = \"op@example.com\"\nsandbox_mode = \"per-exec\"\n"), 0o600)
	logHas("the apply identity changed")
	logHas("sandbox_mode changed; it takes effect when the daemon restarts")
	if got := apply(); got != "Operator <op@example.com>" {
		t.Fatalf("authored by %q after paddock.toml changed, want the operator", got)
	}
	var v struct{ Daemon *paddock.DaemonStatus }
	json.Unmarshal([]byte(cli(t, home, "version", "--json").must(t).out), &v)
	if v.Daemon == nil || !slices.Equal(v.Daemon.RestartNeeded, []string{"sandbox_mode"}) {
		t.Fatalf("status = %+v, want sandbox_mode waiting for a restart", v.Daemon)
	}

	os.WriteFile(toml, []byte("apply_name = \"Broken\"\nno_such_key = 1\n"), 0o600)
	logHas("paddock.toml changed but cannot be used")
	if got := apply(); got != "Operator <op@example.com>" {
		t.Fatalf("authored by %q after a broken paddock.toml, want the last good one", got)
	}
	os.Remove(toml)
	// Back to no file: the user's git identity again, nothing waits.
	os.Remove(toml)
	deadline := time.Now().Add(10 * time.Second)
	for {
		v.Daemon = nil
		json.Unmarshal([]byte(cli(t, home, "version", "--json").must(t).out), &v)
		if len(v.Daemon.RestartNeeded) == 0 {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(d.log.Name())
			t.Fatalf("restart still needed for %v with paddock.toml gone:\n%s", v.Daemon.RestartNeeded, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := apply(); got != "Ada Lovelace <ada@example.com>" {
		t.Fatalf("authored by %q with paddock.toml gone, want the user's git identity", got)
	}
}
