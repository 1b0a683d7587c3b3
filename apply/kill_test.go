package apply

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// node is a file or a link of a fixture tree: a git mode and the content
// (a link's target).
type node struct{ mode, content string }

func blobOf(s string) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00%s", len(s), s)
	return hex.EncodeToString(h.Sum(nil))
}

// killFixture is the change set of cmd/paddockd's TestKillDuringWorktreeApply:
// every kind of change, type changes included (a link, a file and a
// directory each becoming something else), and a directory of mode 0700
// that an undo must make again as it was.
func killFixture() (before, after map[string]node, dirModes map[string]os.FileMode) {
	before = map[string]node{
		"README.md":           {"100644", "hello\n"},
		"old.txt":             {"100644", "old\n"},
		"gone.txt":            {"100644", "gone\n"},
		"tolink.txt":          {"100644", "to link\n"},
		"todir.txt":           {"100644", "to dir\n"},
		"dirtofile/x.txt":     {"100644", "x\n"},
		"dirtofile/sub/y.txt": {"100644", "y\n"},
		"pkg00/a.go":          {"100644", "package pkg00\n"},
		"lnk":                 {"120000", "pkg00"},
	}
	after = map[string]node{
		"README.md":         {"100644", "new readme\n"},
		"old.txt":           {"100755", "changed\n"},
		"a/b/new.go":        {"100644", "package b\n"},
		"top.txt":           {"100644", "top\n"},
		"link":              {"120000", "README.md"},
		"tolink.txt":        {"120000", "README.md"},
		"todir.txt/in.txt":  {"100644", "in\n"},
		"dirtofile":         {"100644", "a file now\n"},
		"pkg00/a.go":        {"100644", "package pkg00\n"},
		"lnk/post-checkout": {"100755", "#!/bin/sh\n"},
	}
	return before, after, map[string]os.FileMode{"dirtofile/sub": 0o700}
}

// entries is the change set from before to after, in path order, as git
// reports it (a type change of a path is a modification; a file that
// becomes a directory is a deletion and the creations under it).
func entries(before, after map[string]node) []paddock.ChangeEntry {
	var paths []string
	for p := range before {
		paths = append(paths, p)
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	var out []paddock.ChangeEntry
	for _, p := range paths {
		b, inB := before[p]
		a, inA := after[p]
		switch {
		case inB && inA && b == a:
		case inB && inA:
			out = append(out, paddock.ChangeEntry{Path: p, Op: paddock.OpModify, OldMode: b.mode, NewMode: a.mode, OldBlob: blobOf(b.content), NewBlob: blobOf(a.content)})
		case inB:
			out = append(out, paddock.ChangeEntry{Path: p, Op: paddock.OpDelete, OldMode: b.mode, OldBlob: blobOf(b.content)})
		default:
			out = append(out, paddock.ChangeEntry{Path: p, Op: paddock.OpCreate, NewMode: a.mode, NewBlob: blobOf(a.content)})
		}
	}
	return out
}

// makeTree writes nodes under root, with exact permissions.
func makeTree(t *testing.T, root string, nodes map[string]node, dirModes map[string]os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, n := range nodes {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if n.mode == "120000" {
			if err := os.Symlink(n.content, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(n.content), fileMode(n.mode)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, fileMode(n.mode)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for d, m := range dirModes {
		if err := os.Chmod(filepath.Join(root, filepath.FromSlash(d)), m); err != nil {
			t.Fatal(err)
		}
	}
}

// setup is a project's working tree as before, and a run whose frozen
// blobs hold after's contents, with the change set from one to the other.
type setup struct {
	root string
	a    *Applier
	c    Change
}

func newSetup(t *testing.T, before, after map[string]node, dirModes map[string]os.FileMode) *setup {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "project")
	makeTree(t, root, before, dirModes)
	runs := filepath.Join(base, "artifacts")
	a := &Applier{
		RunDir:   func(id string) string { return filepath.Join(runs, id) },
		BlobPath: func(id, blob string) string { return filepath.Join(runs, id, "blobs", blob) },
	}
	const id = "r-test"
	for _, n := range after {
		p := a.BlobPath(id, blobOf(n.content))
		if err := os.MkdirAll(path.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(n.content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return &setup{root: root, a: a, c: Change{RunID: id, Project: "p", Root: root, Hash: "sha256:test", Entries: entries(before, after)}}
}

func newKillSetup(t *testing.T) *setup {
	before, after, dirModes := killFixture()
	return newSetup(t, before, after, dirModes)
}

// killedAt runs fn with the Applier set to stop at step k the way a kill
// -9 stops the daemon: nothing of fn runs after that step (runtime.Goexit
// ends its goroutine; the deferred calls it runs only close descriptors,
// which the kernel does for a killed process too). It reports whether fn
// reached step k, and fn's error if it did not.
func killedAt(a *Applier, k int, fn func() error) (killed bool, err error) {
	a.CrashAt = k
	a.Kill = func() { killed = true; runtime.Goexit() }
	defer func() { a.CrashAt, a.Kill = 0, nil }()
	done := make(chan struct{})
	go func() {
		defer close(done)
		err = fn()
	}()
	<-done
	return killed, err
}

// TestKillAtEveryStep stops an apply into a working tree at every step,
// recovers from its journal alone (a new Applier, as a restarted daemon
// has) and checks that the tree is byte-identical either to before or to
// fully applied, that what Recover reports matches it, and that no staged
// file is left; then the same at every step of an undo of it. After each
// recovery the journal must be consistent with the tree: an applied tree
// undoes back to before, a tree as before has no apply to undo.
func TestKillAtEveryStep(t *testing.T) {
	t.Parallel()
	ref := newKillSetup(t)
	before, beforeLines := gittest.TreeDigest(t, ref.root)
	if _, err := ref.a.Apply(t.Context(), ref.c); err != nil {
		t.Fatal(err)
	}
	after, afterLines := gittest.TreeDigest(t, ref.root)
	if after == before {
		t.Fatal("the apply changed nothing")
	}
	if _, err := ref.a.Undo(ref.c.RunID); err != nil {
		t.Fatal(err)
	}
	if got, lines := gittest.TreeDigest(t, ref.root); got != before {
		a, b := gittest.DiffLines(beforeLines, lines)
		t.Fatalf("the undo does not give the tree back:\n %v\n %v", a, b)
	}

	// verb is "apply" or "undo": it is stopped at step k.
	killAt := func(verb string, k int) bool {
		s := newKillSetup(t)
		run := func() error { _, err := s.a.Apply(t.Context(), s.c); return err }
		if verb == "undo" {
			if err := run(); err != nil {
				t.Fatal(err)
			}
			run = func() error { _, err := s.a.Undo(s.c.RunID); return err }
		}
		killed, err := killedAt(s.a, k, run)
		if !killed {
			if err != nil {
				t.Fatalf("%s, not stopped at step %d: %v", verb, k, err)
			}
			if got, _ := gittest.TreeDigest(t, s.root); got != map[string]string{"apply": after, "undo": before}[verb] {
				t.Fatalf("%s, not stopped at step %d: the tree is not as it should be", verb, k)
			}
			return false
		}
		restarted := &Applier{RunDir: s.a.RunDir, BlobPath: s.a.BlobPath}
		rec := restarted.Recover(s.c.RunID)
		got, lines := gittest.TreeDigest(t, s.root)
		applied := got == after
		switch {
		case got == before, applied:
		default:
			a, b := gittest.DiffLines(beforeLines, lines)
			if applied {
				a, b = gittest.DiffLines(afterLines, lines)
			}
			t.Fatalf("killed at %s step %d: the tree is neither as before nor fully applied:\n %v\n %v", verb, k, a, b)
		}
		if rec == nil {
			t.Fatalf("killed at %s step %d: no journal to recover from", verb, k)
		}
		t.Logf("killed at %s step %d: the tree is as %s; %s", verb, k, map[bool]string{true: "applied", false: "before"}[applied], rec.Finding.Issue)
		switch verb {
		case "apply":
			if rec.Applied != applied || len(rec.Mismatch) > 0 {
				t.Fatalf("killed at apply step %d: the tree is applied %t, Recover says %+v", k, applied, rec)
			}
		case "undo":
			if rec.Undone == applied || len(rec.Mismatch) > 0 || rec.Applied {
				t.Fatalf("killed at undo step %d: the tree is applied %t, Recover says %+v", k, applied, rec)
			}
		}
		filepath.Walk(s.root, func(p string, fi os.FileInfo, err error) error {
			if err == nil && strings.Contains(fi.Name(), ".paddock-") {
				t.Fatalf("killed at %s step %d: left %s", verb, k, p)
			}
			return nil
		})
		// The journal agrees with the tree.
		_, err = restarted.Undo(s.c.RunID)
		switch {
		case applied && err != nil:
			t.Fatalf("killed at %s step %d: the applied tree cannot be undone: %v", verb, k, err)
		case applied:
			if got, _ := gittest.TreeDigest(t, s.root); got != before {
				t.Fatalf("killed at %s step %d: the undo after recovery does not give the tree back", verb, k)
			}
		case !paddock.IsCode(err, paddock.CodeConflict):
			t.Fatalf("killed at %s step %d: the tree is as before, and undo says %v", verb, k, err)
		}
		return true
	}
	for _, verb := range []string{"apply", "undo"} {
		steps := 0
		for k := 1; killAt(verb, k); k++ {
			steps = k
		}
		if steps < 12 {
			t.Fatalf("only %d kill points of the %s were exercised", steps, verb)
		}
		t.Logf("%d kill points of the %s exercised", steps, verb)
	}
}
