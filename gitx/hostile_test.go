package gitx_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// hostile is a project whose own config defines every driver git could
// run (a filter, a textconv, an external diff, a binary diff driver), and
// a work tree (a clone of it) where an agent has planted everything that
// could make the host's git run code, read another repository or hang.
type hostile struct {
	project, work, base, marker, otherHead string
	withheld                               []string // the paths that must be withheld
}

func newHostile(t *testing.T) *hostile {
	t.Helper()
	h := &hostile{marker: filepath.Join(t.TempDir(), "ran")}
	h.project = gittest.NewRepo(t, filepath.Join(t.TempDir(), "project"), map[string]string{
		"main.go": "package main\n", "lib.c": "int x;\n", "notes.md": "notes\n", "keep.txt": "keep\n",
		"fixture/HEAD": "ref: refs/heads/main\n", "fixture/config": "[core]\n",
	})
	h.base = gittest.Git(t, h.project, "rev-parse", "HEAD")
	touch := "touch " + h.marker
	for k, v := range map[string]string{
		"filter.x.clean": touch + "; cat", "filter.x.smudge": touch + "; cat", "filter.x.process": touch,
		"filter.x.required": "true", "diff.y.textconv": touch + "; cat", "diff.z.command": touch,
		"diff.foo.binary": "true", "core.autocrlf": "true", "core.fsmonitor": touch,
	} {
		gittest.Git(t, h.project, "config", k, v)
	}
	other := gittest.NewRepo(t, filepath.Join(t.TempDir(), "other"), map[string]string{"secret": "s\n"})
	h.otherHead = gittest.Git(t, other, "rev-parse", "HEAD")
	h.work = filepath.Join(t.TempDir(), "work")
	gittest.Git(t, "", "clone", "-q", h.project, h.work)
	w := func(p, s string) {
		t.Helper()
		full := filepath.Join(h.work, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fifo := func(p string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(filepath.Join(h.work, p)), 0o755)
		if err := syscall.Mkfifo(filepath.Join(h.work, p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Attributes that would run the project's drivers, or make text binary.
	w(".gitattributes", "* filter=x diff=y\n*.md diff=z\n*.go -diff\n*.c binary\n*.h diff=foo\n*.txt text eol=crlf\n")
	w("main.go", "package main\n\nfunc main() {}\n")
	w("lib.c", "int x = 1;\n")
	w("lib.h", "int f(void);\n")
	w("notes.md", "notes, changed\n")
	w("crlf.txt", "one\r\ntwo\r\n")
	w("lf.txt", "one\ntwo\n")
	w("blob.bin", "\x00\x01binary")
	// Repositories, and ways to one.
	w("leak/.git", "gitdir: "+filepath.Join(other, ".git")+"\n")
	w("leak/beside.txt", "beside a gitdir file\n")
	w("trap/.git", "gitdir: ../trapdir\n")
	os.MkdirAll(filepath.Join(h.work, "trapdir/objects"), 0o755)
	os.MkdirAll(filepath.Join(h.work, "trapdir/refs"), 0o755)
	fifo("trapdir/HEAD")
	w("x/.GIT/config", "[core]\n\tfsmonitor = "+touch+"\n")
	w("y/git~1/config", "[core]\n")
	w("z/.git. /config", "[core]\n")
	w("deep/a/.git/HEAD", "ref: refs/heads/main\n")
	w("deep/a/.git/config", "[core]\n\tfsmonitor = "+touch+"\n")
	w("deep/a/.git/objects/info/alternates", filepath.Join(other, ".git", "objects")+"\n")
	w("deep/a/.git/refs/heads/main", h.otherHead+"\n")
	w("deep/a/file.txt", "in a nested work tree\n")
	w("bare/HEAD", "ref: refs/heads/main\n")
	w("bare/config", "[core]\n\tfsmonitor = "+touch+"\n")
	w("bare/objects/info/x", "")
	w("bare/refs/heads/main", h.otherHead+"\n")
	w("fixture/config", "[core]\n\tfsmonitor = "+touch+"\n") // base's fixture, now a repository's config
	w("fixture/objects/x", "")
	os.MkdirAll(filepath.Join(h.work, "sub"), 0o755)
	if err := os.Symlink("/etc/passwd", filepath.Join(h.work, "sub/.gitmodules")); err != nil {
		t.Fatal(err)
	}
	// Things that block whoever opens them.
	fifo("pipe")
	fifo("fifodir/.gitignore")
	fifo("fifodir/.gitattributes")
	w("fifodir/ok.txt", "ok\n")
	w(".gitignore", "*.log\nbuild/\n")
	w("debug.log", "ignored\n")
	w("build/out.o", "ignored\n")
	h.withheld = []string{"bare/HEAD", "bare/config", "bare/objects/info/x", "bare/refs/heads/main",
		"deep/a/.git/HEAD", "deep/a/.git/config", "deep/a/.git/objects/info/alternates", "deep/a/.git/refs/heads/main",
		"fixture/config", "fixture/objects/x", "leak/.git", "sub/.gitmodules", "trap/.git", "x/.GIT/config",
		"y/git~1/config", "z/.git. /config"}
	return h
}

// topLevel lists the work tree's top-level names but its .git: the paths
// an overlay's upper layer would name.
func (h *hostile) topLevel(t *testing.T) []string {
	ents, err := os.ReadDir(h.work)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.Name() != ".git" {
			out = append(out, e.Name())
		}
	}
	return out
}

// diffBoth runs DiffWorkTree and DiffPaths (each with an index of the
// paths alone, and with a whole one) on h, each within a deadline.
func diffBoth(t *testing.T, g *gitx.Git, h *hostile) map[string]*gitx.Snapshot {
	t.Helper()
	out := map[string]*gitx.Snapshot{}
	for name, diff := range map[string]func(ctx context.Context) (*gitx.Snapshot, error){
		"DiffWorkTree": func(ctx context.Context) (*gitx.Snapshot, error) {
			return g.DiffWorkTree(ctx, filepath.Join(h.project, ".git"), h.work, h.base, gitx.DiffOptions{Cache: t.TempDir(), Exclude: []string{".paddock"}})
		},
		"DiffWorkTree, a whole index": func(ctx context.Context) (*gitx.Snapshot, error) {
			return g.DiffWorkTreeWholeIndex(ctx, filepath.Join(h.project, ".git"), h.work, h.base, gitx.DiffOptions{Cache: t.TempDir(), Exclude: []string{".paddock"}})
		},
		"DiffPaths": func(ctx context.Context) (*gitx.Snapshot, error) {
			return g.DiffPaths(ctx, filepath.Join(h.project, ".git"), h.work, h.base, h.topLevel(t), gitx.DiffOptions{Cache: t.TempDir()})
		},
		"DiffPaths, a whole index": func(ctx context.Context) (*gitx.Snapshot, error) {
			return g.DiffPathsWholeIndex(ctx, filepath.Join(h.project, ".git"), h.work, h.base, h.topLevel(t), gitx.DiffOptions{Cache: t.TempDir()})
		},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		snap, err := diff(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v (after %v)", name, err, time.Since(start))
		}
		out[name] = snap
	}
	return out
}

// TestDiffReadsNothingAPlantedTreeOffers: whatever a work tree holds, a
// diff of it runs none of the project's drivers, follows no gitdir:,
// opens no FIFO, reports every .git entry and embedded repository as
// withheld, shows text as text, and `git apply` of it onto base gives the
// work tree's bytes back; DiffWorkTree and DiffPaths (both ways each) agree.
func TestDiffReadsNothingAPlantedTreeOffers(t *testing.T) {
	g := newGit(t)
	h := newHostile(t)
	snaps := diffBoth(t, g, h)
	for name, snap := range snaps {
		if b, err := os.ReadFile(h.marker); err == nil {
			t.Fatalf("%s ran a driver or a planted command: %s", name, b)
		}
		if bytes.Contains(snap.Raw, []byte(h.otherHead)) || bytes.Contains(snap.Diff, []byte(h.otherHead)) {
			t.Errorf("%s: another repository's HEAD leaked", name)
		}
		var withheld []string
		for _, w := range snap.Withheld {
			withheld = append(withheld, w.Path)
			if w.Why == "" || w.NewBlob == "" {
				t.Errorf("%s: %+v", name, w)
			}
		}
		sort.Strings(withheld)
		if strings.Join(withheld, "\n") != strings.Join(h.withheld, "\n") {
			t.Errorf("%s withheld:\n%s\nwant:\n%s", name, strings.Join(withheld, "\n"), strings.Join(h.withheld, "\n"))
		}
		raw := string(snap.Raw)
		for _, p := range []string{"leak/beside.txt", "deep/a/file.txt", "fifodir/ok.txt", "crlf.txt", "lib.h"} {
			if !strings.Contains(raw, "\x00"+p+"\x00") {
				t.Errorf("%s: %s is not in the diff", name, p)
			}
		}
		for _, p := range append([]string{"pipe", "fifodir/.gitignore", "debug.log", "build/out.o", "trapdir/HEAD"}, h.withheld...) {
			if strings.Contains(raw, "\x00"+p+"\x00") {
				t.Errorf("%s: %s is in the diff", name, p)
			}
		}
		if !strings.Contains(strings.Join(snap.Ignored, " "), "debug.log") || !strings.Contains(strings.Join(snap.Ignored, " "), "build/") {
			t.Errorf("%s: ignored %v", name, snap.Ignored)
		}
		diff := string(snap.Diff)
		// Text is text, whatever the attributes say; binary is what holds a NUL.
		for _, want := range []string{"+func main() {}", "+int x = 1;", "+int f(void);", "+notes, changed", "+one\r\n+two\r\n",
			"diff --git a/blob.bin b/blob.bin\nnew file mode 100644\nindex 0000000000000000000000000000000000000000..366fd408dbff9779f4122ed55d2d5962304b8b9f\nGIT binary patch"} {
			if !strings.Contains(diff, want) {
				t.Errorf("%s: the diff lacks %q:\n%s", name, want, diff)
			}
		}
		if n := strings.Count(diff, "GIT binary patch"); n != 1 {
			t.Errorf("%s: %d binary patches, want 1 (blob.bin)", name, n)
		}
	}
	a := snaps["DiffWorkTree"]
	for _, name := range []string{"DiffWorkTree, a whole index", "DiffPaths", "DiffPaths, a whole index"} {
		b := snaps[name]
		if !bytes.Equal(a.Raw, b.Raw) || !bytes.Equal(a.Diff, b.Diff) || fmt.Sprint(a.Withheld) != fmt.Sprint(b.Withheld) {
			t.Errorf("DiffWorkTree and %s differ:\n%s\n%v\n---\n%s\n%v", name, a.Raw, a.Withheld, b.Raw, b.Withheld)
		}
	}

	// git apply of the diff onto base gives the work tree's bytes back
	// (git apply itself converts nothing: its repository unsets the
	// attributes that would).
	check := filepath.Join(t.TempDir(), "check")
	gittest.Git(t, "", "clone", "-q", "--no-checkout", h.project, check)
	os.WriteFile(filepath.Join(check, ".git/info/attributes"), []byte("* !text !eol !crlf !ident !filter !working-tree-encoding\n"), 0o644)
	gittest.Git(t, check, "checkout", "-q", h.base)
	apply := exec.Command("git", "apply", "--binary", "-")
	apply.Dir, apply.Stdin = check, bytes.NewReader(a.Diff)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s", err, out)
	}
	for _, p := range []string{".gitattributes", "main.go", "lib.c", "lib.h", "notes.md", "crlf.txt", "lf.txt", "blob.bin", "leak/beside.txt", "fifodir/ok.txt"} {
		want, _ := os.ReadFile(filepath.Join(h.work, p))
		got, err := os.ReadFile(filepath.Join(check, p))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: applied %q, the work tree holds %q (%v)", p, got, want, err)
		}
	}
	if _, err := os.Stat(h.marker); err == nil {
		t.Fatal("a driver ran")
	}

	// The controls: git itself, in the work tree, runs the project's
	// drivers when its config has them, and follows the planted gitdir:.
	for k, v := range map[string]string{"diff.y.textconv": "touch " + h.marker + "; cat"} {
		gittest.Git(t, h.work, "config", k, v)
	}
	os.Remove(filepath.Join(h.work, "trapdir/HEAD"))
	os.Remove(filepath.Join(h.work, "fifodir/.gitignore"))
	os.Remove(filepath.Join(h.work, "fifodir/.gitattributes"))
	os.Remove(filepath.Join(h.work, "pipe"))
	exec.Command("git", "-C", h.work, "-c", "core.fsmonitor=false", "diff", "HEAD").Run()
	if _, err := os.Stat(h.marker); err != nil {
		t.Fatal("control: git's own diff ran no textconv, so this test proves nothing")
	}
	out, _ := exec.Command("git", "-C", filepath.Join(h.work, "leak"), "rev-parse", "HEAD").Output()
	if strings.TrimSpace(string(out)) != h.otherHead {
		t.Fatal("control: git does not follow the planted gitdir:, so this test proves nothing")
	}
}

// TestDiffObjectsAreGitsOwn: the blobs a diff stores are a pack git
// verifies, with the ids `git hash-object --no-filters` gives, and a
// second diff reuses them.
func TestDiffObjectsAreGitsOwn(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	repo := gittest.NewRepo(t, t.TempDir(), map[string]string{"a.txt": "a\n"})
	base := gittest.Git(t, repo, "rev-parse", "HEAD")
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<17) // 2 MiB: a pack of its own
	os.WriteFile(filepath.Join(repo, "big.bin"), append(big, 0), 0o644)
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a, changed\r\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "b.txt"), nil, 0o755)
	cache := t.TempDir()
	snap, err := g.DiffWorkTree(ctx, filepath.Join(repo, ".git"), repo, base, gitx.DiffOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	idx, _ := filepath.Glob(filepath.Join(cache, "objects", "pack", "*.idx"))
	if len(idx) != 2 {
		t.Fatalf("packs: %v", idx)
	}
	for _, p := range idx {
		if out, err := exec.Command("git", "verify-pack", p).CombinedOutput(); err != nil {
			t.Fatalf("git verify-pack %s: %v\n%s", p, err, out)
		}
	}
	for _, p := range []string{"big.bin", "a.txt", "b.txt"} {
		id := gittest.Git(t, repo, "hash-object", "--no-filters", p)
		if !strings.Contains(string(snap.Raw), id) {
			t.Errorf("%s: %s is not in %q", p, id, snap.Raw)
		}
	}
	again, err := g.DiffWorkTree(ctx, filepath.Join(repo, ".git"), repo, base, gitx.DiffOptions{Cache: cache})
	if err != nil || !bytes.Equal(again.Diff, snap.Diff) {
		t.Fatalf("second diff: %v", err)
	}
	if idx2, _ := filepath.Glob(filepath.Join(cache, "objects", "pack", "*.idx")); len(idx2) != 2 {
		t.Fatalf("the second diff stored again: %v", idx2)
	}
}

// TestDiffSHA256: a SHA-256 repository's diff has its ids, and applies.
func TestDiffSHA256(t *testing.T) {
	g := newGit(t)
	repo := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", "--object-format=sha256", repo).CombinedOutput(); err != nil {
		t.Skipf("git cannot make a SHA-256 repository: %v %s", err, out)
	}
	gittest.Commit(t, repo, "one", map[string]string{"a.txt": "a\n"})
	base := gittest.Git(t, repo, "rev-parse", "HEAD")
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("b\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "big.bin"), bytes.Repeat([]byte{0, 1}, 1<<20), 0o644)
	snap, err := g.DiffWorkTree(context.Background(), filepath.Join(repo, ".git"), repo, base, gitx.DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if id := gittest.Git(t, repo, "hash-object", "a.txt"); len(id) != 64 || !bytes.Contains(snap.Raw, []byte(id)) {
		t.Fatalf("raw %q lacks %s", snap.Raw, id)
	}
	gittest.Git(t, repo, "stash", "-u", "-q")
	apply := exec.Command("git", "apply", "--binary", "-")
	apply.Dir, apply.Stdin = repo, bytes.NewReader(snap.Diff)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s", err, out)
	}
}

// TestEveryCommandNamesItsRepository runs every operation through a git
// that records how it was called: each names its repository (GIT_DIR) or
// runs where git finds none (a ceiling at its working directory's
// parent), with safe.bareRepository=explicit, and none is found by
// discovery from a directory an agent could have prepared.
func TestEveryCommandNamesItsRepository(t *testing.T) {
	real := newGit(t)
	ctx := context.Background()
	log := filepath.Join(t.TempDir(), "calls")
	wrapper := filepath.Join(t.TempDir(), "git")
	script := "#!/bin/sh\nprintf '%s|%s|%s|%s|%s\\n' \"$PWD\" \"$GIT_DIR\" \"$GIT_WORK_TREE\" \"$GIT_CEILING_DIRECTORIES\" \"$*\" >> " + log + "\nexec " + real.Path + " \"$@\"\n"
	os.WriteFile(wrapper, []byte(script), 0o755)
	g := &gitx.Git{Path: wrapper}

	repo := gittest.NewRepo(t, t.TempDir(), map[string]string{"a.txt": "a\n"})
	gittest.Git(t, repo, "config", "core.hooksPath", "hooks")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.Version(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := g.Inspect(ctx, repo)
	must(err)
	res, err := g.Resolve(ctx, repo, "main")
	must(err)
	clone := filepath.Join(t.TempDir(), "clone")
	must(g.CloneShared(ctx, repo, clone, res.SHA))
	wt := filepath.Join(t.TempDir(), "wt")
	must(g.WorktreeAdd(ctx, repo, wt, res.SHA))
	os.WriteFile(filepath.Join(wt, "b.txt"), []byte("b\n"), 0o644)
	_, err = g.DiffWorkTree(ctx, r.CommonDir, wt, res.SHA, gitx.DiffOptions{})
	must(err)
	_, err = g.DiffPaths(ctx, r.CommonDir, wt, res.SHA, []string{"b.txt"}, gitx.DiffOptions{})
	must(err)
	os.RemoveAll(wt)
	must(g.WorktreeRemove(ctx, repo, wt))
	_, err = g.FileAt(ctx, r.CommonDir, res.SHA, "a.txt")
	must(err)
	_, err = g.MergeFile(ctx, []byte("a\n"), []byte("a\n"), []byte("b\n"))
	must(err)
	must(g.ExportTree(ctx, r.CommonDir, res.SHA, t.TempDir()))
	_, err = g.CommitToBranch(ctx, r.CommonDir, res.SHA, nil, "x", gitx.Identity{Name: "a", Email: "a@b"}, "m")
	must(err)
	hooks, err := g.HooksPaths(ctx, repo)
	must(err)
	if fmt.Sprint(hooks) != "[hooks]" {
		t.Errorf("hooks paths %v", hooks)
	}

	b, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 15 {
		t.Fatalf("only %d git commands recorded", len(lines))
	}
	for _, l := range lines {
		f := strings.SplitN(l, "|", 5)
		cwd, gitDir, ceiling, args := f[0], f[1], f[3], f[4]
		if !strings.Contains(args, "safe.bareRepository=explicit") {
			t.Errorf("no safe.bareRepository: %s", l)
		}
		if gitDir == "" && ceiling != filepath.Dir(cwd) && cwd != "/" {
			t.Errorf("a command that could discover a repository: %s", l)
		}
		// A git child process (worktree add's checkout) inherits the env.
	}
	// Given a directory inside a repository, git does not look above it.
	if _, err := g.Resolve(ctx, filepath.Join(repo, "sub"), "main"); err == nil {
		t.Error("Resolve found the repository above the directory it was given")
	}
}

// TestDeadline: a git command that cannot finish is stopped at the
// runner's deadline, with an error that says so.
func TestDeadline(t *testing.T) {
	real := newGit(t)
	ctx := context.Background()
	g := &gitx.Git{Path: real.Path, Timeout: 300 * time.Millisecond}
	repo := gittest.NewRepo(t, t.TempDir(), map[string]string{"a.txt": "a\n"})
	base := gittest.Git(t, repo, "rev-parse", "HEAD")
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// hash-object opens the FIFO, and waits for a writer that never comes.
	_, err := g.CommitToBranch(ctx, filepath.Join(repo, ".git"), base,
		[]gitx.IndexEntry{{Path: "f", Mode: "100644", Blob: strings.Repeat("0", 40), File: fifo}}, "x", gitx.Identity{Name: "a", Email: "a@b"}, "m")
	took := time.Since(start)
	if !errors.Is(err, gitx.ErrTimeout) || !paddock.IsCode(err, paddock.CodeInternal) || !strings.Contains(paddock.ErrorMessage(err)+err.Error(), "timed out") {
		t.Fatalf("err = %v", err)
	}
	if took > 10*time.Second {
		t.Fatalf("stopped after %v", took)
	}
	// The caller's own cancellation is not a timeout.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := g.Version(cctx); err == nil || errors.Is(err, gitx.ErrTimeout) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestHooksPaths: every core.hooksPath git would use for a project, from
// its own config (and what that includes) or the user's, inside the
// project; none outside it.
func TestHooksPaths(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "xdg"))
	repo := gittest.NewRepo(t, t.TempDir(), map[string]string{"a": "a"})
	if got, err := g.HooksPaths(ctx, repo); err != nil || len(got) != 0 {
		t.Fatalf("none set: %v %v", got, err)
	}
	if got, err := g.HooksPaths(ctx, filepath.Join(repo, "gone")); err != nil || len(got) != 0 {
		t.Fatalf("no project: %v %v", got, err)
	}
	gittest.Git(t, repo, "config", "core.hooksPath", "scripts/git")
	inc := filepath.Join(t.TempDir(), "inc")
	os.WriteFile(inc, []byte("[core]\n\thooksPath = "+filepath.Join(repo, "tools", "hooks")+"\n"), 0o644)
	gittest.Git(t, repo, "config", "include.path", inc)
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[core]\n\thooksPath = .githooks\n"), 0o644)
	os.MkdirAll(filepath.Join(home, "xdg", "git"), 0o755)
	os.WriteFile(filepath.Join(home, "xdg", "git", "config"), []byte("[core]\n\thooksPath = ~/elsewhere\n"), 0o644)
	got, err := g.HooksPaths(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	if want := []string{".githooks", "scripts/git", "tools/hooks"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("hooks paths %v, want %v", got, want)
	}
}
