package gitx_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

func newGit(t *testing.T) *gitx.Git {
	t.Helper()
	g, err := gitx.New(context.Background())
	if err != nil {
		t.Skipf("git unavailable: %v", err)
	}
	return g
}

// plantHooks makes repo try to run code in every way the runner must prevent:
// hooks, an fsmonitor and a hooksPath in its config. Each writes a marker.
func plantHooks(t *testing.T, repo string) string {
	marker := filepath.Join(t.TempDir(), "ran")
	script := "#!/bin/sh\necho \"$0\" >> " + marker + "\n"
	for _, h := range []string{"post-checkout", "pre-commit", "reference-transaction", "post-index-change"} {
		os.WriteFile(filepath.Join(repo, ".git", "hooks", h), []byte(script), 0o755)
	}
	evil := filepath.Join(t.TempDir(), "evil")
	os.WriteFile(evil, []byte(script), 0o755)
	gittest.Git(t, repo, "config", "core.fsmonitor", evil)
	return marker
}

func TestNoHooksNoFsmonitor(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	repo := gittest.NewRepo(t, t.TempDir(), map[string]string{"a.txt": "a\n"})
	marker := plantHooks(t, repo)
	t.Setenv("GIT_DIR", "/nonexistent") // a caller's git environment must not leak in
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.hookspath'='"+filepath.Join(repo, ".git", "hooks")+"'")

	if _, err := g.Inspect(ctx, repo); err != nil {
		t.Fatal(err)
	}
	res, err := g.Resolve(ctx, repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(t.TempDir(), "wt")
	if err := g.WorktreeAdd(ctx, repo, wt, res.SHA); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	if err := g.CloneShared(ctx, repo, clone, res.SHA); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(wt)
	if err := g.WorktreeRemove(ctx, repo, wt); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Fatalf("planted code ran:\n%s", b)
	}
	// Control: plain git does run the planted hook, so the check above can fail.
	t.Setenv("GIT_DIR", "")
	gittest.Git(t, repo, "worktree", "add", "--quiet", "--detach", filepath.Join(t.TempDir(), "ctl"), res.SHA)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("control: plain git did not run the planted hook, so this test proves nothing")
	}
	os.Remove(marker)
	if _, err := os.Stat(filepath.Join(clone, ".git", "hooks")); err == nil {
		entries, _ := os.ReadDir(filepath.Join(clone, ".git", "hooks"))
		if len(entries) > 0 {
			t.Fatalf("clone got hooks: %v", entries)
		}
	}
	if out := gittest.Git(t, clone, "remote"); out != "" {
		t.Fatalf("clone has remotes: %q", out)
	}
	if head := gittest.Git(t, clone, "rev-parse", "HEAD"); head != res.SHA {
		t.Fatalf("clone HEAD = %s, want %s", head, res.SHA)
	}
}

func TestResolve(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	repo := gittest.NewRepo(t, t.TempDir(), map[string]string{"a": "1"})
	first := gittest.Git(t, repo, "rev-parse", "HEAD")
	gittest.Commit(t, repo, "second", map[string]string{"a": "2"})
	gittest.Git(t, repo, "tag", "v1", first)

	for _, tc := range []struct {
		ref, sha, branch string
	}{
		{"main", "", "main"},
		{"HEAD", "", "main"},
		{"v1", first, ""},
		{first, first, ""},
		{first[:8], first, ""},
		{"main~1", first, ""},
	} {
		r, err := g.Resolve(ctx, repo, tc.ref)
		if err != nil {
			t.Fatalf("%s: %v", tc.ref, err)
		}
		if tc.sha != "" && r.SHA != tc.sha || len(r.SHA) != 40 || r.Branch != tc.branch {
			t.Errorf("%s: got %+v", tc.ref, r)
		}
	}
	for _, bad := range []string{"", "-h", "--output=/tmp/x", "nope", "main\nHEAD", "a b"} {
		if _, err := g.Resolve(ctx, repo, bad); !paddock.IsCode(err, paddock.CodeBadRequest) {
			t.Errorf("Resolve(%q) = %v, want bad_request", bad, err)
		}
	}
}

func TestInspect(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	base := t.TempDir()
	repo := gittest.NewRepo(t, filepath.Join(base, "my repo ü"), map[string]string{"d/a": "1"})
	r, err := g.Inspect(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if r.Root != repo || !strings.HasSuffix(r.CommonDir, ".git") {
		t.Fatalf("repo = %+v", r)
	}
	link := filepath.Join(base, "link")
	os.Symlink(repo, link)
	if r4, err := g.Inspect(ctx, link); err != nil || r4.Root != repo {
		t.Fatalf("via symlink: %+v, %v", r4, err)
	}

	bare := filepath.Join(base, "bare.git")
	gittest.Git(t, base, "init", "--quiet", "--bare", bare)
	empty := filepath.Join(base, "empty")
	os.Mkdir(empty, 0o755)
	gittest.Git(t, empty, "init", "--quiet")
	plain := filepath.Join(base, "plain")
	os.Mkdir(plain, 0o755)
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o644)
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(base, "missing"), "does not exist"},
		{file, "not a directory"},
		{bare, "bare repository"},
		{empty, "no commits"},
		{plain, "not a git repository"},
		{filepath.Join(repo, "d"), "declare " + repo},
	} {
		_, err := g.Inspect(ctx, tc.path)
		if !paddock.IsCode(err, paddock.CodeBadRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Inspect(%s) = %v, want bad_request mentioning %q", tc.path, err, tc.want)
		}
	}
}

// TestInspectFailingGitIsNotABadRepository: a git that cannot answer
// (here, one out of time at once) says nothing of the repository: Inspect
// is internal, never "not a git repository" or "no commits".
func TestInspectFailingGitIsNotABadRepository(t *testing.T) {
	g := newGit(t)
	repo := gittest.NewRepo(t, t.TempDir(), map[string]string{"a": "1"})
	g.Timeout = time.Nanosecond
	_, err := g.Inspect(context.Background(), repo)
	if !paddock.IsCode(err, paddock.CodeInternal) || strings.Contains(err.Error(), "not a git repository") || strings.Contains(err.Error(), "no commits") {
		t.Fatalf("Inspect with a git out of time = %v; want internal", err)
	}
}

// TestWorktreeRemoveRepairsHalfMadeRecord plays a `git worktree add` killed
// before it wrote its record: git cannot read the record, and it breaks
// `git worktree list`. WorktreeRemove must delete it, and only it.
func TestWorktreeRemoveRepairsHalfMadeRecord(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	repo := gittest.NewRepo(t, t.TempDir(), map[string]string{"a": "1"})
	base := t.TempDir()
	mine := filepath.Join(base, "r-mine")
	rec := filepath.Join(repo, ".git", "worktrees", "r-mine")
	os.MkdirAll(rec, 0o755)
	os.WriteFile(filepath.Join(rec, "gitdir"), nil, 0o644)
	os.WriteFile(filepath.Join(rec, "locked"), []byte("initializing"), 0o644)
	other := filepath.Join(repo, ".git", "worktrees", "r-other")
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, "gitdir"), []byte("/somewhere/else/.git\n"), 0o644)

	if err := g.WorktreeRemove(ctx, repo, mine); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(rec); !os.IsNotExist(err) {
		t.Fatal("half-made record left")
	}
	if err := g.WorktreeRemove(ctx, repo, filepath.Join(base, "r-other")); err == nil {
		t.Fatal("removed a record that points at another worktree")
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatal("another worktree's record was deleted")
	}
	os.RemoveAll(other)
	if err := g.WorktreeRemove(ctx, repo, mine); err != nil {
		t.Fatalf("removing what is already gone: %v", err)
	}
}

func TestMergeFile(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	base := []byte("one\ntwo\nthree\nfour\nfive\n")
	ours := []byte("ONE\ntwo\nthree\nfour\nfive\n")   // the user's edit
	theirs := []byte("one\ntwo\nthree\nfour\nFIVE\n") // the approved change
	got, err := g.MergeFile(ctx, base, ours, theirs)
	if err != nil || string(got) != "ONE\ntwo\nthree\nfour\nFIVE\n" {
		t.Fatalf("clean merge: %q %v", got, err)
	}
	// Both sides change the same line: a conflict, never markers.
	if got, err := g.MergeFile(ctx, base, []byte("one\nTWO\nthree\nfour\nfive\n"), []byte("one\nzwei\nthree\nfour\nfive\n")); !errors.Is(err, gitx.ErrMergeConflict) {
		t.Fatalf("overlap: %q %v", got, err)
	}
	// Binary contents are not merged.
	if got, err := g.MergeFile(ctx, []byte("a\x00b"), []byte("a\x00c"), []byte("d\x00b")); !errors.Is(err, gitx.ErrMergeConflict) {
		t.Fatalf("binary: %q %v", got, err)
	}
}

// TestDiffWorkTreeCache: with a cache, DiffWorkTree and DiffPaths alike
// see in a second call a change that kept the file's size and
// modification time (the ctime moves) of a file the first call cached,
// and the cache holds nothing of the work tree's own git state.
func TestDiffWorkTreeCache(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	for _, kind := range []string{"DiffWorkTree", "DiffPaths"} {
		t.Run(kind, func(t *testing.T) {
			repo := t.TempDir()
			gittest.Git(t, "", "init", "-q", repo)
			os.WriteFile(filepath.Join(repo, "a.txt"), []byte("1111\n"), 0o644)
			gittest.Commit(t, repo, "a", nil)
			base := gittest.Git(t, repo, "rev-parse", "HEAD")
			cache := t.TempDir()
			diff := func() string {
				t.Helper()
				o := gitx.DiffOptions{Cache: cache}
				var s *gitx.Snapshot
				var err error
				if kind == "DiffPaths" {
					s, err = g.DiffPaths(ctx, filepath.Join(repo, ".git"), repo, base, []string{"a.txt", "b.txt"}, o)
				} else {
					s, err = g.DiffWorkTree(ctx, filepath.Join(repo, ".git"), repo, base, o)
				}
				if err != nil {
					t.Fatal(err)
				}
				return string(s.Diff)
			}
			// A file is cached once its stat data is more than a second
			// older than the call.
			os.WriteFile(filepath.Join(repo, "a.txt"), []byte("3333\n"), 0o644)
			time.Sleep(1100 * time.Millisecond)
			if d := diff(); !strings.Contains(d, "+3333") {
				t.Fatalf("changed tree: %q", d)
			}
			fi, _ := os.Stat(filepath.Join(repo, "a.txt"))
			os.WriteFile(filepath.Join(repo, "a.txt"), []byte("2222\n"), 0o644)
			os.Chtimes(filepath.Join(repo, "a.txt"), fi.ModTime(), fi.ModTime())
			if d := diff(); !strings.Contains(d, "+2222") {
				t.Fatalf("the cached index hid a change: %q", d)
			}
			os.WriteFile(filepath.Join(repo, "b.txt"), []byte("new\n"), 0o644)
			if d := diff(); !strings.Contains(d, "+new") || !strings.Contains(d, "+2222") {
				t.Fatalf("second cached call: %q", d)
			}
			os.Remove(filepath.Join(repo, "b.txt"))
			os.WriteFile(filepath.Join(repo, "a.txt"), []byte("1111\n"), 0o644)
			if d := diff(); d != "" {
				t.Fatalf("back to the base: %q", d)
			}
		})
	}
}
