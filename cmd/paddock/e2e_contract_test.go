package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/fakeagent"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestContract plays testdata/contract.json with the fake agent against a
// real daemon: every action of the protocol, and every error code a client
// can provoke (internal is covered by the API's own tests: nothing a client
// sends should cause it).
func TestContract(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	// The manifest a verify job reads at the base: make test.
	gittest.Commit(t, repo, "verification", map[string]string{"Makefile": "test:\n\ttest -f README.md\n"})
	plain := newRepo(t, filepath.Join(base, "src", "plain"), 1) // no manifest at all
	os.MkdirAll(home, 0o700)
	os.WriteFile(filepath.Join(home, "paddock.toml"), []byte("apply_name = \"Op\"\napply_email = \"op@example.com\"\n"), 0o600)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	cli(t, home, "project", "add", plain).must(t)
	b, err := os.ReadFile("testdata/contract.json")
	if err != nil {
		t.Fatal(err)
	}
	var steps []fakeagent.Step
	if err := json.Unmarshal(b, &steps); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	r := &fakeagent.Runner{Operator: client.Unix(filepath.Join(home, "paddock.sock")), Log: &log}
	if err := r.Run(context.Background(), steps); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	// Every action and every code a client can provoke is in the script.
	actions := map[string]bool{}
	codes := map[paddock.Code]bool{}
	for _, s := range steps {
		actions[s.Do] = true
		codes[s.Expect] = true
	}
	for _, a := range []string{"bootstrap", "status", "events", "artifact", "tool", "exec", "start", "wait", "cancel", "submit", "approve", "apply", "reject"} {
		if !actions[a] {
			t.Errorf("the contract script never does %s", a)
		}
	}
	for _, c := range paddock.Codes {
		if !codes[c] && c != paddock.CodeInternal {
			t.Errorf("the contract script never provokes %s", c)
		}
	}
	if !strings.Contains(log.String(), "got run_mismatch") {
		t.Fatalf("log:\n%s", log.String())
	}
}
