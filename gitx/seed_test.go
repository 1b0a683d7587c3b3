package gitx_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// seedRepo is a repository whose checkout holds files git writes as they
// are, files its attributes convert (an eol of crlf, ident), an executable,
// a link and a .gitattributes, in a few directories.
func seedRepo(t *testing.T) (repo, base string) {
	t.Helper()
	files := map[string]string{
		".gitattributes": "*.crlf text eol=crlf\n*.id ident\n*.lf text eol=lf\n",
		"x.crlf":         "one\ntwo\n",
		"sub/y.id":       "$Id$\n",
		"sub/z.lf":       "lf\n",
	}
	for i := range 60 {
		files[fmt.Sprintf("d%d/f%d.txt", i%6, i)] = fmt.Sprintf("file %d\n", i)
	}
	repo = gittest.NewRepo(t, t.TempDir(), files)
	os.WriteFile(filepath.Join(repo, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.Symlink("d0/f0.txt", filepath.Join(repo, "link"))
	gittest.Commit(t, repo, "more", nil)
	// A link whose blob holds a NUL: its checkout is cut short there.
	cmd := exec.Command("git", "hash-object", "-w", "--stdin")
	cmd.Dir, cmd.Stdin = repo, strings.NewReader("d0/f0.txt\x00more")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, repo, "update-index", "--add", "--cacheinfo", "120000,"+strings.TrimSpace(string(out))+",cut")
	gittest.Git(t, repo, "commit", "-q", "-m", "cut")
	return repo, gittest.Git(t, repo, "rev-parse", "HEAD")
}

// hashed records the paths a diff hashes.
func hashed(t *testing.T) func() []string {
	var mu sync.Mutex
	var paths []string
	gitx.SetTestHookBeforeHash(func(p string) {
		mu.Lock()
		paths = append(paths, p)
		mu.Unlock()
	})
	t.Cleanup(func() { gitx.SetTestHookBeforeHash(nil) })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		got := slices.Clone(paths)
		paths = paths[:0]
		sort.Strings(got)
		return got
	}
}

// diffWith is the diff of workTree against base with the stat cache in cache.
func diffWith(t *testing.T, g *gitx.Git, gitDir, workTree, base, cache string) *gitx.Snapshot {
	t.Helper()
	s, err := g.DiffWorkTree(context.Background(), gitDir, workTree, base, gitx.DiffOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// asUnseeded fails t unless seeded, a diff of workTree with a seeded
// cache, is byte for byte the diff with an empty one, which it returns.
func asUnseeded(t *testing.T, g *gitx.Git, gitDir, workTree, base string, seeded *gitx.Snapshot) *gitx.Snapshot {
	t.Helper()
	want := diffWith(t, g, gitDir, workTree, base, t.TempDir())
	if string(seeded.Raw) != string(want.Raw) || string(seeded.Diff) != string(want.Diff) {
		t.Fatalf("seeded diff:\n%q\nunseeded:\n%q", seeded.Raw, want.Raw)
	}
	return want
}

// TestSeedStatCache: a clone's stat cache seeded right after its checkout
// spares the first diff the files it holds as checked out, and the diff
// is the one an unseeded cache gives, byte for byte, whatever changed
// right after the seed (in the same clock tick, at the same size and
// modification time) and whatever the attributes converted.
func TestSeedStatCache(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	repo, base := seedRepo(t)
	gitDir := filepath.Join(repo, ".git")
	seedable := 60 + 3 // the text files, .gitattributes, sub/z.lf and run.sh: not x.crlf, sub/y.id nor the links

	t.Run("Unchanged", func(t *testing.T) {
		clone := filepath.Join(t.TempDir(), "clone")
		if err := g.CloneShared(ctx, repo, clone, base); err != nil {
			t.Fatal(err)
		}
		// Past the clock's tick, every checked-out file is recorded.
		time.Sleep(50 * time.Millisecond)
		cache := t.TempDir()
		n, err := gitx.SeedStatCache(ctx, g, gitDir, clone, base, cache, filepath.Dir(clone), nil)
		if err != nil {
			t.Fatal(err)
		}
		if n != seedable {
			t.Errorf("seeded %d files, want %d", n, seedable)
		}
		got := hashed(t)
		os.WriteFile(filepath.Join(clone, "d1/f1.txt"), []byte("changed\n"), 0o644)
		s := diffWith(t, g, gitDir, clone, base, cache)
		// The converted files and the link cut short differ from their
		// blobs as checked out, and so are hashed, and shown, as an
		// unseeded diff shows them.
		if h := got(); !slices.Equal(h, []string{"cut", "d1/f1.txt", "link", "sub/y.id", "x.crlf"}) {
			t.Errorf("hashed %q, want only the changed and the converted files and the links", h)
		}
		want := asUnseeded(t, g, gitDir, clone, base, s)
		for _, p := range []string{"cut", "sub/y.id", "x.crlf"} {
			if !strings.Contains(string(want.Raw), "\x00"+p+"\x00") {
				t.Errorf("%s, whose checkout differs from its blob, is not in the diff: the test proves nothing", p)
			}
		}
	})

	t.Run("FoldedCase", func(t *testing.T) {
		clone := filepath.Join(t.TempDir(), "clone")
		if err := g.CloneShared(ctx, repo, clone, base); err != nil {
			t.Fatal(err)
		}
		gittest.Git(t, clone, "config", "core.ignorecase", "true")
		n, err := gitx.SeedStatCache(ctx, g, gitDir, clone, base, t.TempDir(), filepath.Dir(clone), nil)
		if err != nil || n != 0 {
			t.Errorf("a clone on a file system that folds case: %d files seeded (%v)", n, err)
		}
	})

	t.Run("ChangedAtOnce", func(t *testing.T) {
		for i := range 20 {
			clone := filepath.Join(t.TempDir(), "clone")
			if err := g.CloneShared(ctx, repo, clone, base); err != nil {
				t.Fatal(err)
			}
			cache := t.TempDir()
			if _, err := gitx.SeedStatCache(ctx, g, gitDir, clone, base, cache, filepath.Dir(clone), nil); err != nil {
				t.Fatal(err)
			}
			// At once, as an agent could: the same size, the modification
			// time set back, a mode, a removal, a new file, a link moved.
			p := filepath.Join(clone, fmt.Sprintf("d%d/f%d.txt", i%6, i))
			fi, _ := os.Stat(p)
			os.WriteFile(p, []byte(fmt.Sprintf("FILE %d\n", i)), 0o644)
			os.Chtimes(p, fi.ModTime(), fi.ModTime())
			os.Chmod(filepath.Join(clone, "d2/f2.txt"), 0o755)
			os.Remove(filepath.Join(clone, "d3/f3.txt"))
			os.WriteFile(filepath.Join(clone, "new.txt"), []byte("new\n"), 0o644)
			os.Remove(filepath.Join(clone, "link"))
			os.Symlink("d1/f1.txt", filepath.Join(clone, "link"))
			want := asUnseeded(t, g, gitDir, clone, base, diffWith(t, g, gitDir, clone, base, cache))
			if len(want.Raw) == 0 {
				t.Fatal("no change seen at all: the test proves nothing")
			}
		}
	})

	t.Run("Refused", func(t *testing.T) {
		if _, err := gitx.SeedStatCache(ctx, g, gitDir, repo, "-x", t.TempDir(), t.TempDir(), nil); err == nil {
			t.Error("a ref starting with - was taken")
		}
		if _, err := gitx.SeedStatCache(ctx, g, gitDir, repo, base, "", t.TempDir(), nil); err == nil {
			t.Error("no cache directory was taken")
		}
	})
}

// TestSeedWorktree: a worktree's checkout reads the project's config and
// info/attributes: seeded where neither converts (the diff the same as an
// unseeded one), and not at all where either can.
func TestSeedWorktree(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		config []string // git config KEY VALUE in the project
		attrs  string   // the project's info/attributes
		seeded bool
		// converts: the checkout writes d0/f0.txt otherwise than its blob
		// (a seed that recorded it would hide that from the diff)
		converts bool
	}{
		{name: "Plain", seeded: true},
		{name: "AutocrlfInput", config: []string{"core.autocrlf", "input"}, seeded: true},
		{name: "Autocrlf", config: []string{"core.autocrlf", "true"}, converts: true},
		{name: "EolCRLF", config: []string{"core.eol", "crlf"}},
		// The checkout (hardened) reads no attributes file the project's
		// config names: seeded, and right to be.
		{name: "AttributesFile", config: []string{"core.attributesFile", "ATTRS"}, seeded: true},
		{name: "InfoAttributes", attrs: "*.txt text eol=crlf\n", converts: true},
		{name: "IgnoreCase", config: []string{"core.ignorecase", "true"}},
		// What git takes for true, spelled otherwise.
		{name: "AutocrlfInteger", config: []string{"core.autocrlf", "2"}, converts: true},
		{name: "IgnoreCaseInteger", config: []string{"core.ignorecase", "7"}},
		// Config that applies to the worktree's checkout and not to the
		// project's git directory, where the seed reads config.
		{name: "ConditionalInclude", config: []string{"includeIf.gitdir:**/.git/worktrees/**.path", "CRLF"}, converts: true},
		{name: "WorktreeConfig", config: []string{"extensions.worktreeConfig", "true"}},
		{name: "AttrTree", config: []string{"attr.tree", "HEAD"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo, base := seedRepo(t)
			gitDir := filepath.Join(repo, ".git")
			if tc.config != nil {
				switch tc.config[1] {
				case "ATTRS":
					tc.config[1] = filepath.Join(t.TempDir(), "attributes")
					os.WriteFile(tc.config[1], []byte("*.txt text eol=crlf\n"), 0o644)
				case "CRLF":
					tc.config[1] = filepath.Join(t.TempDir(), "crlf.config")
					os.WriteFile(tc.config[1], []byte("[core]\n\tautocrlf = true\n"), 0o644)
				}
				gittest.Git(t, repo, append([]string{"config"}, tc.config...)...)
			}
			if tc.attrs != "" {
				os.MkdirAll(filepath.Join(gitDir, "info"), 0o755)
				if err := os.WriteFile(filepath.Join(gitDir, "info", "attributes"), []byte(tc.attrs), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wt := filepath.Join(t.TempDir(), "wt")
			if err := g.WorktreeAdd(ctx, repo, wt, base); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(wt); g.WorktreeRemove(context.Background(), repo, wt) })
			time.Sleep(50 * time.Millisecond) // past the clock's tick
			cache := t.TempDir()
			n, err := gitx.SeedStatCache(ctx, g, gitDir, wt, base, cache, filepath.Dir(wt), nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 60 + 3}[tc.seeded]; n != want {
				t.Fatalf("seeded %d files, want %d", n, want)
			}
			os.WriteFile(filepath.Join(wt, "d1/f1.txt"), []byte("changed\n"), 0o644)
			want := asUnseeded(t, g, gitDir, wt, base, diffWith(t, g, gitDir, wt, base, cache))
			if got := strings.Contains(string(want.Raw), "\x00d0/f0.txt\x00"); got != tc.converts {
				t.Fatalf("d0/f0.txt in the diff: %v, want %v", got, tc.converts)
			}
		})
	}
}
