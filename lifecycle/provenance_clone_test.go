package lifecycle_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
)

// TestCloneWriteLooksOnlyAtWhatItWrote: after a write tool's call on a
// clone run, only the file it wrote is read for blame, not the whole
// tree (a walk of every file after each call cost a large clone each
// write, and held its next one). So a change made beside the call, by no
// call, is not the write's: the next command's look finds it. A write
// that puts a file back as the base has it leaves no hunk.
func TestCloneWriteLooksOnlyAtWhatItWrote(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	r := e.create(t, paddock.KindClone, "")
	write := func(path, content string) {
		t.Helper()
		args, _ := json.Marshal(map[string]string{"path": path, "content": content})
		if _, err := e.m.Broker.CallTool(ctx, r.ID, "write", args); err != nil {
			t.Fatal(err)
		}
	}
	write("cmd/main.go", "package changed\n")
	if err := os.WriteFile(filepath.Join(r.Workspace.Root, "README.md"), []byte("beside any call\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write("new.txt", "new\n")
	write("cmd/main.go", "package main\n") // as the base has it
	// The write's own record says the file is as the base has it, not
	// the blob it was written with (the look after the command below
	// would say so too: blame waits for the write's look only).
	if _, err := e.m.Provenance.Blame(ctx, r.ID, ""); err != nil {
		t.Fatal(err)
	}
	if last := journalSays(t, e, r.ID, "cmd/main.go"); last != "base" {
		t.Fatalf("the journal's last word on cmd/main.go, written back as the base has it: %q", last)
	}
	sh(t, e.m, r.ID, "true")
	b, err := e.m.Provenance.Blame(ctx, r.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]string{}
	for _, h := range b.Hunks {
		if len(h.Seqs) != 1 {
			t.Fatalf("hunk of %s from %v", h.Path, h.Seqs)
		}
		by[h.Path] = b.Sources[h.Seqs[0]].What
	}
	if len(by) != 2 || by["new.txt"] != "write new.txt" || by["README.md"] != "exec: bash -c true" {
		t.Fatalf("blame of a clone run: %v", by)
	}
}

// journalSays is the last word of run id's blame journal on path.
func journalSays(t *testing.T, e *env, id, path string) string {
	t.Helper()
	journals, _ := filepath.Glob(filepath.Join(e.state, "*", id, "provenance.jsonl"))
	if len(journals) == 0 {
		journals, _ = filepath.Glob(filepath.Join(e.state, "*", "*", id, "provenance.jsonl"))
	}
	if len(journals) != 1 {
		t.Fatalf("the run's journal: %v", journals)
	}
	raw, err := os.ReadFile(journals[0])
	if err != nil {
		t.Fatal(err)
	}
	last := ""
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var rec struct{ Changes map[string]string }
		if json.Unmarshal([]byte(line), &rec) == nil {
			if b, ok := rec.Changes[path]; ok {
				last = b
			}
		}
	}
	return last
}
