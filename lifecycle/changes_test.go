package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/lifecycle"
)

// edit plays an agent's work in a workspace: every kind of change.
func edit(t *testing.T, ws string) {
	t.Helper()
	w := func(p, s string, mode os.FileMode) {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755)
		if err := os.WriteFile(filepath.Join(ws, p), []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	w("README.md", "hello, changed\n", 0o644)            // modify
	w("new/deep/file.go", "package deep\n", 0o644)       // create, nested
	os.Remove(filepath.Join(ws, "docs/ü.txt"))           // delete (non-ASCII name)
	os.Chmod(filepath.Join(ws, "cmd/main.go"), 0o755)    // mode change
	os.Symlink("README.md", filepath.Join(ws, "readme")) // symlink
	w("blob.bin", "\x00\x01\x02binary", 0o644)           // binary
	os.MkdirAll(filepath.Join(ws, "empty/dir"), 0o755)   // empty directories are not content
	w(".paddock/inbox/note.txt", "inbox", 0o644)         // the inbox is not the agent's change
	w("build/out.o", "ignored", 0o644)                   // ignored by .gitignore
}

func TestChangeSetAndApply(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	os.WriteFile(filepath.Join(e.repo, ".gitignore"), []byte("build/\n"), 0o644)
	gittest.Commit(t, e.repo, "ignore build", nil)
	e.project(t)
	e.m.Identity = gitx.Identity{Name: "Ada Reviewer", Email: "ada@example.com"}
	r := e.create(t, paddock.KindClone, "")
	ws := r.Workspace.Root
	edit(t, ws)
	before, lines := gittest.TreeDigest(t, e.repo)

	cs, err := e.m.Changes.ChangeSet(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]paddock.ChangeEntry{}
	for _, en := range cs.Entries {
		got[en.Path] = en
	}
	want := map[string]paddock.ChangeOp{"README.md": paddock.OpModify, "new/deep/file.go": paddock.OpCreate,
		"docs/ü.txt": paddock.OpDelete, "cmd/main.go": paddock.OpModify, "readme": paddock.OpCreate, "blob.bin": paddock.OpCreate}
	if len(got) != len(want) {
		t.Fatalf("entries: %+v", cs.Entries)
	}
	for p, op := range want {
		if got[p].Op != op {
			t.Errorf("%s: %+v, want %s", p, got[p], op)
		}
	}
	if got["cmd/main.go"].NewMode != "100755" || !contains(got["cmd/main.go"].Risks, "executable") ||
		got["readme"].NewMode != "120000" || !contains(got["readme"].Risks, "symlink") ||
		!got["blob.bin"].Binary || len(got["README.md"].NewBlob) != 40 {
		t.Fatalf("labels: %+v", cs.Entries)
	}
	if !contains(cs.Ignored, "build/") || !strings.HasPrefix(cs.Hash, "sha256:") {
		t.Fatalf("ignored %v, hash %s", cs.Ignored, cs.Hash)
	}
	// Computing it changed nothing in the project, .git included.
	gittest.RequireIdentical(t, e.repo, before, lines)

	// git apply of the diff onto the base reproduces the workspace.
	check := filepath.Join(t.TempDir(), "check")
	gittest.Git(t, "", "clone", "-q", e.repo, check)
	gittest.Git(t, check, "checkout", "-q", "--detach", r.Workspace.BaseRevision)
	apply := exec.Command("git", "apply", "--binary", "-")
	apply.Dir = check
	apply.Stdin = strings.NewReader(cs.Diff)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s", err, out)
	}
	os.RemoveAll(filepath.Join(ws, ".paddock"))
	os.RemoveAll(filepath.Join(ws, "build"))
	os.RemoveAll(filepath.Join(ws, "empty"))
	a, al := digestNoGit(t, check)
	b, bl := digestNoGit(t, ws)
	if a != b {
		x, y := gittest.DiffLines(al, bl)
		t.Fatalf("applying the diff does not reproduce the workspace:\n %v\n %v", x, y)
	}

	// Submit, approve only the frozen hash, apply to a branch.
	sub, err := e.m.Changes.Submit(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{})
	mustCode(t, err, paddock.CodeConflict) // not approved
	_, err = e.m.Changes.Approve(ctx, r.ID, "sha256:0000", "ada")
	mustCode(t, err, paddock.CodeBadRequest)
	_, err = e.m.Changes.Approve(ctx, r.ID, "sha256:"+strings.Repeat("0", 64), "ada")
	mustCode(t, err, paddock.CodeConflict)
	if strings.Contains(err.Error(), strings.TrimPrefix(sub.Hash, "sha256:")) {
		t.Fatalf("a wrong hash's refusal tells the right one: %v", err)
	}
	if _, err := e.m.Changes.Approve(ctx, r.ID, sub.Hash, "ada"); err != nil {
		t.Fatal(err)
	}
	workBefore := gittest.Git(t, e.repo, "status", "--porcelain")
	s, err := e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{})
	if err != nil {
		t.Fatal(err)
	}
	commit := gittest.Git(t, e.repo, "rev-parse", "paddock/"+r.ID)
	if !strings.Contains(s.AppliedTo, commit) {
		t.Fatalf("applied to %s, branch at %s", s.AppliedTo, commit)
	}
	if parent := gittest.Git(t, e.repo, "rev-parse", commit+"^"); parent != r.Workspace.BaseRevision {
		t.Fatalf("parent %s, base %s", parent, r.Workspace.BaseRevision)
	}
	if author := gittest.Git(t, e.repo, "log", "-1", "--format=%an <%ae>", commit); author != "Ada Reviewer <ada@example.com>" {
		t.Fatalf("author %q", author)
	}
	if files := gittest.Git(t, e.repo, "ls-tree", "-r", "--name-only", commit); !strings.Contains(files, "new/deep/file.go") || strings.Contains(files, "docs/ü.txt") {
		t.Fatalf("tree: %s", files)
	}
	if gittest.Git(t, e.repo, "status", "--porcelain") != workBefore {
		t.Fatal("apply touched the user's working tree or index")
	}
	_, err = e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{})
	mustCode(t, err, paddock.CodeConflict) // applied already
}

func TestApplyRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	e.m.Identity = gitx.Identity{Name: "A", Email: "a@example.com"}
	// A symbolic link out of the project is never applied, approved or not.
	r := e.create(t, paddock.KindClone, "")
	os.Symlink("../../../../etc/passwd", filepath.Join(r.Workspace.Root, "escape"))
	s, err := e.m.Changes.Submit(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.m.Changes.Approve(ctx, r.ID, s.Hash, "a")
	_, err = e.m.Changes.Apply(ctx, r.ID, "", gitx.Identity{})
	mustCode(t, err, paddock.CodeForbidden)
	// An existing branch is not moved.
	r2 := e.create(t, paddock.KindClone, "")
	os.WriteFile(filepath.Join(r2.Workspace.Root, "x.txt"), []byte("x"), 0o644)
	s2, _ := e.m.Changes.Submit(ctx, r2.ID)
	e.m.Changes.Approve(ctx, r2.ID, s2.Hash, "a")
	_, err = e.m.Changes.Apply(ctx, r2.ID, "main", gitx.Identity{})
	mustCode(t, err, paddock.CodeConflict)
	// A change to the workspace after submission does not change what is applied.
	os.WriteFile(filepath.Join(r2.Workspace.Root, "later.txt"), []byte("later"), 0o644)
	if _, err := e.m.Changes.Apply(ctx, r2.ID, "feature/x", gitx.Identity{}); err != nil {
		t.Fatal(err)
	}
	if files := gittest.Git(t, e.repo, "ls-tree", "-r", "--name-only", "feature/x"); strings.Contains(files, "later.txt") || !strings.Contains(files, "x.txt") {
		t.Fatalf("applied tree: %s", files)
	}
	// Nothing changed: nothing to submit.
	r3 := e.create(t, paddock.KindClone, "")
	_, err = e.m.Changes.Submit(ctx, r3.ID)
	mustCode(t, err, paddock.CodeConflict)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// digestNoGit is TreeDigest without the top-level .git.
func digestNoGit(t *testing.T, root string) (string, []string) {
	tmp := filepath.Join(t.TempDir(), "copy")
	cp := exec.Command("cp", "-a", root, tmp)
	if out, err := cp.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	os.RemoveAll(filepath.Join(tmp, ".git"))
	_, l := gittest.TreeDigest(t, tmp)
	var out []string
	for _, x := range l {
		// Directories are not content (git keeps none, nor their modes).
		if !strings.Contains(x, " d") {
			out = append(out, x)
		}
	}
	return strings.Join(out, "\n"), out
}

func TestApplyToWorktreeAndUndo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	e.m.Identity = gitx.Identity{Name: "A", Email: "a@example.com"}
	before, lines := gittest.TreeDigest(t, e.repo)
	r := e.create(t, paddock.KindClone, "")
	ws := r.Workspace.Root
	os.WriteFile(filepath.Join(ws, "README.md"), []byte("applied\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "new/dir"), 0o755)
	os.WriteFile(filepath.Join(ws, "new/dir/f.go"), []byte("package dir\n"), 0o755)
	os.Remove(filepath.Join(ws, "docs/ü.txt"))
	os.Symlink("README.md", filepath.Join(ws, "link"))
	s, err := e.m.Changes.Submit(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.m.Changes.Approve(ctx, r.ID, s.Hash, "a")
	if _, err := e.m.Changes.ApplyToWorktree(ctx, r.ID, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(e.repo, "README.md")); string(b) != "applied\n" {
		t.Fatalf("README: %q", b)
	}
	if fi, err := os.Stat(filepath.Join(e.repo, "new/dir/f.go")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("created file: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(e.repo, "docs/ü.txt")); !os.IsNotExist(err) {
		t.Fatal("deleted file still there")
	}
	if target, _ := os.Readlink(filepath.Join(e.repo, "link")); target != "README.md" {
		t.Fatal("symlink not made")
	}
	if cached := gittest.Git(t, e.repo, "diff", "--cached", "--name-only"); cached != "" {
		t.Fatalf("apply touched the index: %s", cached)
	}
	// Undo puts the project back, byte for byte.
	if _, err := e.m.Changes.Undo(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	gittest.RequireIdentical(t, e.repo, before, lines)

	// It applies again after the undo; a user's edit since then blocks the undo.
	if _, err := e.m.Changes.ApplyToWorktree(ctx, r.ID, false); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(e.repo, "README.md"), []byte("the user's own edit\n"), 0o644)
	_, err = e.m.Changes.Undo(ctx, r.ID)
	mustCode(t, err, paddock.CodeConflict)
	// A target changed since the base refuses the apply, and nothing is written.
	r2 := e.create(t, paddock.KindClone, "")
	os.WriteFile(filepath.Join(r2.Workspace.Root, "README.md"), []byte("other\n"), 0o644)
	os.WriteFile(filepath.Join(r2.Workspace.Root, "untouched-new.txt"), []byte("x"), 0o644)
	s2, _ := e.m.Changes.Submit(ctx, r2.ID)
	e.m.Changes.Approve(ctx, r2.ID, s2.Hash, "a")
	mid, midLines := gittest.TreeDigest(t, e.repo)
	_, err = e.m.Changes.ApplyToWorktree(ctx, r2.ID, false)
	mustCode(t, err, paddock.CodeConflict)
	gittest.RequireIdentical(t, e.repo, mid, midLines)
}

func TestAttributionLint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	r := e.create(t, paddock.KindClone, "")
	os.WriteFile(filepath.Join(r.Workspace.Root, "notes.md"), []byte("# Notes\n\nCo-Authored-By: Claude <noreply@anthropic.com>\n"), 0o644)
	_, err := e.m.Changes.Submit(ctx, r.ID)
	mustCode(t, err, paddock.CodeAttributionLeak)
	// The refusal names the file, the line, what matched and the rule,
	// and says how to keep such lines.
	var pe *paddock.Error
	errors.As(err, &pe)
	if !strings.Contains(pe.Message, `notes.md:3: "Co-Authored-By: Claude"`) || pe.Rule != "co-author-trailer" ||
		!strings.Contains(pe.Details["hint"].(string), "paddock project set my-app --allow-attribution co-author-trailer") {
		t.Fatalf("the refusal does not say where, what and which rule: %s %v", pe.Message, pe.Details)
	}
	// Ordinary code that names a model passes.
	os.Remove(filepath.Join(r.Workspace.Root, "notes.md"))
	os.WriteFile(filepath.Join(r.Workspace.Root, "model.go"), []byte("package main\n\n// DefaultModel is gpt-4o.\nconst DefaultModel = \"gpt-4o\"\n"), 0o644)
	if _, err := e.m.Changes.Submit(ctx, r.ID); err != nil {
		t.Fatalf("a comment naming a model was refused: %v", err)
	}
	// A project that allows the rule accepts it.
	e2 := newEnv(t)
	if _, err := e2.m.Projects.AddProject(ctx, paddock.AddProjectRequest{Path: e2.repo, AllowAttribution: []string{"co-author-trailer"}}); err != nil {
		t.Fatal(err)
	}
	r2 := e2.create(t, paddock.KindClone, "")
	os.WriteFile(filepath.Join(r2.Workspace.Root, "notes.md"), []byte("Co-Authored-By: Claude <noreply@anthropic.com>\n"), 0o644)
	if _, err := e2.m.Changes.Submit(ctx, r2.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e2.m.Projects.AddProject(ctx, paddock.AddProjectRequest{Path: e2.repo, Name: "x", AllowAttribution: []string{"everything"}})
	mustCode(t, err, paddock.CodeBadRequest)
}

func TestChangeSetIgnoredAndLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	os.WriteFile(filepath.Join(e.repo, ".gitignore"), []byte("build/\n"), 0o644)
	gittest.Commit(t, e.repo, "ignore build", nil)
	e.project(t)
	r, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", IncludeIgnored: true})
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(r.Workspace.Root, "build"), 0o755)
	os.WriteFile(filepath.Join(r.Workspace.Root, "build/out.o"), []byte("object"), 0o644)
	cs, err := e.m.Changes.ChangeSet(ctx, r.ID)
	if err != nil || len(cs.Entries) != 1 || cs.Entries[0].Path != "build/out.o" {
		t.Fatalf("with ignored files: %+v %v", cs, err)
	}
	// Limits refuse before any diff is rendered, with a clear error.
	for i := 0; i < 3; i++ {
		os.WriteFile(filepath.Join(r.Workspace.Root, fmt.Sprintf("f%d.txt", i)), []byte("twenty bytes of text"), 0o644)
	}
	e.m.ChangeSetLimits = lifecycle.ChangeSetLimits{MaxEntries: 3}
	_, err = e.m.Changes.ChangeSet(ctx, r.ID)
	mustCode(t, err, paddock.CodeTooLarge)
	e.m.ChangeSetLimits = lifecycle.ChangeSetLimits{MaxFile: 10}
	_, err = e.m.Changes.ChangeSet(ctx, r.ID)
	if !paddock.IsCode(err, paddock.CodeTooLarge) || !strings.Contains(err.Error(), "f0.txt") {
		t.Fatalf("file limit: %v", err)
	}
	e.m.ChangeSetLimits = lifecycle.ChangeSetLimits{MaxTotal: 50}
	_, err = e.m.Changes.Submit(ctx, r.ID)
	mustCode(t, err, paddock.CodeTooLarge)

	// The diffs computed of a workspace are kept, a few, under their
	// hashes, and go with the workspace.
	diffs := filepath.Join(e.state, "artifacts", r.ID, "diffs")
	if ents, _ := os.ReadDir(diffs); len(ents) == 0 || len(ents) > 4 {
		t.Fatalf("%d diffs kept", len(ents))
	}
	_, _, err = e.m.Changes.ChangeSetDiff(ctx, r.ID, "sha256:zz")
	mustCode(t, err, paddock.CodeBadRequest)
	_, _, err = e.m.Changes.ChangeSetDiff(ctx, r.ID, "sha256:"+strings.Repeat("0", 64))
	mustCode(t, err, paddock.CodeNotFound)
	if _, err := e.m.Runs.Reject(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(diffs); !os.IsNotExist(err) {
		t.Fatalf("the computed diffs outlive the workspace: %v", err)
	}
}

// TestChangeSetTenThousandFiles drives a change set of 10,000 files (8 KiB
// each, an 80 MB diff) the way a reviewer would: freeze it, approve it,
// apply it to a branch and to the working tree, and undo. Every file
// arrives, undo restores the project, and the heap never holds the diff.
func TestChangeSetTenThousandFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000-file change set: skipped in -short mode")
	}
	if !alone(t) {
		return
	}
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	e.m.Identity = gitx.Identity{Name: "A", Email: "a@example.com"}
	before, lines := gittest.TreeDigest(t, e.repo)
	r := e.create(t, paddock.KindClone, "")
	const n = 10000
	name := func(i int) string {
		return filepath.Join("gen", fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.txt", i))
	}
	filler := strings.Repeat("a line of generated text, sixty-four bytes long, to fill a file\n", 128)
	content := func(i int) string { return fmt.Sprintf("file %d\n", i) + filler }
	for i := 0; i < n; i++ {
		p := filepath.Join(r.Workspace.Root, name(i))
		if i < 100 {
			os.MkdirAll(filepath.Dir(p), 0o755)
		}
		if err := os.WriteFile(p, []byte(content(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var s *paddock.ChangeSet
	var err error
	peak, _ := memoryUse(func() {
		start := time.Now()
		s, err = e.m.Changes.Submit(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Entries) != n {
			t.Fatalf("change set: %d entries, want %d", len(s.Entries), n)
		}
		if _, err := e.m.Changes.Approve(ctx, r.ID, s.Hash, "a"); err != nil {
			t.Fatal(err)
		}
		t.Logf("submit + approve: %v", time.Since(start))

		start = time.Now()
		if _, err := e.m.Changes.ApplyToWorktree(ctx, r.ID, false); err != nil {
			t.Fatal(err)
		}
		t.Logf("apply to the working tree: %v", time.Since(start))
	})
	t.Logf("diff %d bytes; the heap grew by at most %d MiB", s.DiffSize, peak>>20)
	if s.DiffSize < n*8<<10 || !s.DiffOmitted || peak > 64<<20 {
		t.Fatalf("diff %d bytes (omitted: %t); the heap grew by %d MiB", s.DiffSize, s.DiffOmitted, peak>>20)
	}
	for _, i := range []int{0, 4321, n - 1} {
		if b, err := os.ReadFile(filepath.Join(e.repo, name(i))); err != nil || string(b) != content(i) {
			t.Fatalf("%s: %q %v", name(i), b, err)
		}
	}
	start := time.Now()
	if _, err := e.m.Changes.Undo(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	t.Logf("undo: %v", time.Since(start))
	gittest.RequireIdentical(t, e.repo, before, lines)

	// The same approved set, now to a branch: every file is in its tree,
	// and the user's working tree is untouched.
	start = time.Now()
	if _, err := e.m.Changes.Apply(ctx, r.ID, "big", gitx.Identity{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("apply to a branch: %v", time.Since(start))
	if files := strings.Count(gittest.Git(t, e.repo, "ls-tree", "-r", "--name-only", "big", "--", "gen"), "\n") + 1; files != n {
		t.Fatalf("branch holds %d generated files, want %d", files, n)
	}
	if st := gittest.Git(t, e.repo, "status", "--porcelain"); st != "" {
		t.Fatalf("apply to a branch touched the working tree: %s", st)
	}
}

// TestApplyToWorktreeThreeWay: the user edited a file the agent changed too.
// Without --3way the apply refuses; with it, separate lines merge, the same
// line refuses everything, and undo gives the user's version back.
func TestApplyToWorktreeThreeWay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	text := "one\ntwo\nthree\nfour\nfive\nsix\n"
	os.WriteFile(filepath.Join(e.repo, "notes.txt"), []byte(text), 0o644)
	os.WriteFile(filepath.Join(e.repo, "other.txt"), []byte(text), 0o644)
	gittest.Commit(t, e.repo, "notes", nil)
	e.project(t)
	r := e.create(t, paddock.KindClone, "")
	agent := strings.Replace(text, "six", "SIX (agent)", 1)
	os.WriteFile(filepath.Join(r.Workspace.Root, "notes.txt"), []byte(agent), 0o644)
	os.WriteFile(filepath.Join(r.Workspace.Root, "other.txt"), []byte(agent), 0o644)
	os.WriteFile(filepath.Join(r.Workspace.Root, "added.txt"), []byte("new\n"), 0o644)
	s, err := e.m.Changes.Submit(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.m.Changes.Approve(ctx, r.ID, s.Hash, "a")

	// The user edits the first line of notes.txt and the last of other.txt.
	user := strings.Replace(text, "one", "ONE (user)", 1)
	os.WriteFile(filepath.Join(e.repo, "notes.txt"), []byte(user), 0o644)
	os.WriteFile(filepath.Join(e.repo, "other.txt"), []byte(strings.Replace(text, "six", "6 (user)", 1)), 0o644)
	mid, midLines := gittest.TreeDigest(t, e.repo)
	_, err = e.m.Changes.ApplyToWorktree(ctx, r.ID, false)
	if !paddock.IsCode(err, paddock.CodeConflict) || !strings.Contains(err.Error(), "--3way") {
		t.Fatalf("without --3way: %v", err)
	}
	_, err = e.m.Changes.ApplyToWorktree(ctx, r.ID, true)
	if !paddock.IsCode(err, paddock.CodeConflict) || !strings.Contains(err.Error(), "other.txt") || strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("overlapping edit: %v", err)
	}
	gittest.RequireIdentical(t, e.repo, mid, midLines)

	// The user gives up the overlapping edit: now everything applies.
	os.WriteFile(filepath.Join(e.repo, "other.txt"), []byte(text), 0o644)
	mid, midLines = gittest.TreeDigest(t, e.repo)
	if _, err := e.m.Changes.ApplyToWorktree(ctx, r.ID, true); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"notes.txt": strings.Replace(user, "six", "SIX (agent)", 1),
		"other.txt": agent,
		"added.txt": "new\n",
	}
	for p, w := range want {
		if b, _ := os.ReadFile(filepath.Join(e.repo, p)); string(b) != w {
			t.Errorf("%s = %q, want %q", p, b, w)
		}
	}
	evs, _ := e.m.Runs.Events(ctx, r.ID, 0, 1000)
	if last := evs[len(evs)-1]; last.Type != paddock.EventApplied || !strings.Contains(string(last.Data), `"merged":["notes.txt"]`) {
		t.Fatalf("applied event: %+v", last)
	}
	if _, err := e.m.Changes.Undo(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	gittest.RequireIdentical(t, e.repo, mid, midLines)
}

// aloneEnv names the one test a child test process runs (see alone).
const aloneEnv = "PADDOCK_TEST_ALONE"

// alone runs the calling test by itself in a child process of the test
// binary, so that memoryUse, which reads the whole process's heap, sees no
// other test's allocations, while the parent runs beside the package's
// other tests instead of holding them back. In the child it returns true:
// the test goes on there. In the parent it returns false once the child
// passed, and fails the test with the child's output otherwise.
func alone(t *testing.T) bool {
	t.Helper()
	if os.Getenv(aloneEnv) == t.Name() {
		return true
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), aloneEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s, alone in a child process: %v\n%s", t.Name(), err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "heap grew") {
			t.Log(strings.TrimSpace(line))
		}
	}
	return false
}

// memoryUse runs fn and reports how much the heap grew at its peak
// (sampled) and how many bytes were allocated in all, garbage included.
func memoryUse(fn func()) (peak, allocated uint64) {
	// What is held, not what the collector has yet to free: with a low GC
	// target, garbage does not pile up into the heap in use (under -race
	// the collector otherwise lets it grow to twice what is live and more).
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, total := ms.HeapInuse, ms.TotalAlloc
	stop, done := make(chan struct{}), make(chan struct{})
	var top uint64
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			top = max(top, ms.HeapInuse)
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	fn()
	close(stop)
	<-done
	runtime.ReadMemStats(&ms)
	if top > base {
		peak = top - base
	}
	return peak, ms.TotalAlloc - total
}

// TestChangeSetOfA500MBFile: a 500 MB binary file goes through the whole
// flow (change set, submit, approve, apply to a branch and to the working
// tree) in bounded memory: its bytes and its 650 MB diff are streamed
// between files and git, never held. The default limits refuse it first,
// saying which file and which limit.
func TestChangeSetOfA500MBFile(t *testing.T) {
	if testing.Short() {
		t.Skip("500 MB change set: skipped in -short mode")
	}
	t.Parallel()
	const size = 500 << 20
	for _, kind := range []paddock.WorkspaceKind{paddock.KindClone, paddock.KindOverlay} {
		t.Run(string(kind), func(t *testing.T) {
			if !alone(t) { // each kind in its own process, both at once
				return
			}
			e := newEnv(t)
			ctx := context.Background()
			e.project(t)
			// Stored, not deflated: the test's git stays fast; what
			// paddock does with the bytes is the same.
			gittest.Git(t, e.repo, "config", "core.compression", "0")
			e.m.Identity = gitx.Identity{Name: "A", Email: "a@example.com"}
			if kind == paddock.KindOverlay {
				withSandbox(t, e)
			}
			r := e.create(t, kind, "")
			if kind == paddock.KindOverlay {
				sh(t, e.m, r.ID, fmt.Sprintf("mkdir assets && head -c %d /dev/urandom > assets/big.bin", size))
			} else {
				writeRandom(t, filepath.Join(r.Workspace.Root, "assets", "big.bin"), size)
			}

			_, err := e.m.Changes.ChangeSet(ctx, r.ID)
			if !paddock.IsCode(err, paddock.CodeTooLarge) || !strings.Contains(err.Error(), "assets/big.bin") || !strings.Contains(err.Error(), "limit") {
				t.Fatalf("the default limits: %v", err)
			}
			e.m.ChangeSetLimits = lifecycle.ChangeSetLimits{MaxFile: 1 << 30, MaxTotal: 1 << 30}

			var cs *paddock.ChangeSet
			var streamed int64
			peak, allocated := memoryUse(func() {
				if cs, err = e.m.Changes.Submit(ctx, r.ID); err != nil {
					t.Fatal(err)
				}
				d, _, err := e.m.Changes.ChangeSetDiff(ctx, r.ID, cs.Hash)
				if err != nil {
					t.Fatal(err)
				}
				streamed, _ = io.Copy(io.Discard, d)
				d.Close()
				if _, err := e.m.Changes.Approve(ctx, r.ID, cs.Hash, "a"); err != nil {
					t.Fatal(err)
				}
				if kind == paddock.KindClone {
					_, err = e.m.Changes.Apply(ctx, r.ID, "big", gitx.Identity{})
				} else {
					_, err = e.m.Changes.ApplyToWorktree(ctx, r.ID, false)
				}
				if err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("diff %d bytes; heap grew at most %d MiB, %d MiB allocated in all", cs.DiffSize, peak>>20, allocated>>20)
			if len(cs.Entries) != 1 || cs.Entries[0].Size != size || !cs.Entries[0].Binary || !cs.DiffOmitted || cs.Diff != "" ||
				cs.DiffSize < size || streamed != cs.DiffSize {
				t.Fatalf("change set: %+v (diff %d bytes, %d streamed)", cs.Entries, cs.DiffSize, streamed)
			}
			if peak > 64<<20 || allocated > 128<<20 {
				t.Fatalf("not streamed: the heap grew by %d MiB, %d MiB allocated, for a %d MiB file", peak>>20, allocated>>20, size>>20)
			}
			if kind == paddock.KindClone {
				if got := gittest.Git(t, e.repo, "rev-parse", "big:assets/big.bin"); got != cs.Entries[0].NewBlob {
					t.Fatalf("the branch holds %s, the change set %s", got, cs.Entries[0].NewBlob)
				}
				if st := gittest.Git(t, e.repo, "status", "--porcelain"); st != "" {
					t.Fatalf("apply to a branch touched the working tree: %s", st)
				}
				return
			}
			if got := gittest.Git(t, e.repo, "hash-object", "assets/big.bin"); got != cs.Entries[0].NewBlob {
				t.Fatalf("the working tree holds %s, the change set %s", got, cs.Entries[0].NewBlob)
			}
			peak, allocated = memoryUse(func() {
				if _, err := e.m.Changes.Undo(ctx, r.ID); err != nil {
					t.Fatal(err)
				}
			})
			if _, err := os.Stat(filepath.Join(e.repo, "assets")); !os.IsNotExist(err) || peak > 64<<20 || allocated > 128<<20 {
				t.Fatalf("undo: %v; the heap grew by %d MiB, %d MiB allocated", err, peak>>20, allocated>>20)
			}
		})
	}
}

// writeRandom writes n bytes that do not compress, a NUL among the first.
func writeRandom(t *testing.T, path string, n int) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 1<<20)
	rng := rand.NewChaCha8([32]byte{1})
	rng.Read(block)
	block[0] = 0
	for i := 0; i < n; i += len(block) {
		block[1] = byte(i >> 20)
		if _, err := f.Write(block[:min(len(block), n-i)]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReviewStaysRejected: a submitted run that is rejected reads as
// rejected, and still does once its workspace is cleaned (it read
// submitted again, as if still waiting for a decision); removed, the same.
func TestReviewStaysRejected(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	submitted := func(policy string) *paddock.Run {
		t.Helper()
		r := e.create(t, paddock.KindClone, policy)
		os.WriteFile(filepath.Join(r.Workspace.Root, "new.txt"), []byte("x\n"), 0o644)
		if _, err := e.m.Changes.Submit(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		if got, _ := e.m.Runs.Run(ctx, r.ID); got.Review != paddock.ReviewSubmitted {
			t.Fatalf("submitted: review %q", got.Review)
		}
		return r
	}
	review := func(id string, want paddock.WorkspaceState) string {
		t.Helper()
		r, err := e.m.Runs.Run(ctx, id)
		if err != nil || r.State() != want {
			t.Fatalf("run %s: %v, state %s, want %s", id, err, r.State(), want)
		}
		return r.Review
	}
	r := submitted("on_reject")
	if _, err := e.m.Runs.Reject(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if got := review(r.ID, paddock.StateCleaned); got != paddock.ReviewRejected {
		t.Fatalf("rejected and cleaned: review %q", got)
	}
	r = submitted("manual")
	if _, err := e.m.Runs.Reject(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if got := review(r.ID, paddock.StateRejected); got != paddock.ReviewRejected {
		t.Fatalf("rejected: review %q", got)
	}
	if _, err := e.m.Runs.Remove(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if got := review(r.ID, paddock.StateCleaned); got != paddock.ReviewRejected {
		t.Fatalf("rejected and removed: review %q", got)
	}
	r = submitted("manual")
	if _, err := e.m.Runs.Remove(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if got := review(r.ID, paddock.StateCleaned); got != paddock.ReviewRejected {
		t.Fatalf("removed undecided: review %q", got)
	}
}

// TestApplyRecordedWhenMadeAgain: an apply to a branch whose branch was
// made but whose changeset.applied the store did not take (an outage
// between the two, found by bench/soak) is recorded by the call made
// again, as its error told: before, the retry answered "applied already"
// and no event ever named the branch. Made again after that, it says
// applied already.
func TestApplyRecordedWhenMadeAgain(t *testing.T) {
	e, f, _ := faultyEnv(t)
	ctx := context.Background()
	who := gitx.Identity{Name: "Op", Email: "op@example.com"}
	r := e.create(t, paddock.KindClone, "")
	os.WriteFile(filepath.Join(r.Workspace.Root, "new.txt"), []byte("x\n"), 0o644)
	cs, err := e.m.Changes.Submit(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Changes.Approve(ctx, r.ID, cs.Hash, "ada"); err != nil {
		t.Fatal(err)
	}
	f.set(func(s *faultStore) {
		s.appendEvent = func(_, typ string) error {
			if typ == paddock.EventApplied {
				return errInjected
			}
			return nil
		}
	})
	if _, err := e.m.Changes.Apply(ctx, r.ID, "landed", who); !errors.Is(err, errInjected) {
		t.Fatalf("the apply whose event failed: %v, want the store's error", err)
	}
	f.set(func(s *faultStore) { s.appendEvent = nil })
	s, err := e.m.Changes.Apply(ctx, r.ID, "landed", who)
	if err != nil || !strings.HasPrefix(s.AppliedTo, "refs/heads/landed @ ") {
		t.Fatalf("the apply made again: %+v %v", s, err)
	}
	evs, err := e.m.Runs.Events(ctx, r.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == paddock.EventApplied && strings.Contains(string(ev.Data), strings.TrimPrefix(s.AppliedTo, "refs/heads/landed @ ")) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d changeset.applied events name the branch's commit, want 1", n)
	}
	_, err = e.m.Changes.Apply(ctx, r.ID, "landed", who)
	mustCode(t, err, paddock.CodeConflict)
}
