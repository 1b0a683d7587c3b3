package gitx_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestNewDirectoriesOwnRules: the new files a diff holds are the ones git
// status calls untracked, every time, when new directories bring their own
// .gitignore: one that ignores files beside it, one that re-includes what
// a rule above ignores, and many others read at the same time by the
// walk's goroutines. check-ignore, asked about a directory before its
// rules were copied, kept none for it: the first was never applied, and
// the second was, or not, by the order the goroutines asked in.
func TestNewDirectoriesOwnRules(t *testing.T) {
	g := newGit(t)
	ctx := context.Background()
	work := gittest.NewRepo(t, filepath.Join(t.TempDir(), "work"), map[string]string{"keep.txt": "k\n", ".gitignore": "gen/\n"})
	base := gittest.Git(t, work, "rev-parse", "HEAD")
	files := map[string]string{
		"zz/.gitignore": "*.log\n", "zz/x.log": "log\n", "zz/y.txt": "y\n",
		"sub/.gitignore": "!gen/\n", "sub/gen/new.txt": "new\n", "gen/out.txt": "out\n",
	}
	for i := range 40 {
		files[fmt.Sprintf("d%02d/e/f.txt", i)] = "f\n"
		files[fmt.Sprintf("d%02d/g.tmp", i)] = "g\n"
		if i%2 == 0 {
			files[fmt.Sprintf("d%02d/.gitignore", i)] = "e/\n*.tmp\n"
		}
	}
	var top []string
	for p, body := range files {
		full := filepath.Join(work, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if d, _, _ := strings.Cut(p, "/"); !slices.Contains(top, d) {
			top = append(top, d)
		}
	}
	var want []string
	for _, rec := range strings.Split(gittest.Git(t, work, "status", "--porcelain=v1", "-z", "-uall"), "\x00") {
		if p, ok := strings.CutPrefix(rec, "?? "); ok {
			want = append(want, p)
		}
	}
	slices.Sort(want)
	if !slices.Contains(want, "sub/gen/new.txt") || slices.Contains(want, "zz/x.log") {
		t.Fatalf("git status itself: %q", want)
	}
	gitDir := filepath.Join(work, ".git")
	for i := range 15 {
		for name, diff := range map[string]func() (*gitx.Snapshot, error){
			"DiffWorkTree": func() (*gitx.Snapshot, error) {
				return g.DiffWorkTree(ctx, gitDir, work, base, gitx.DiffOptions{Cache: t.TempDir()})
			},
			"DiffPaths": func() (*gitx.Snapshot, error) {
				return g.DiffPaths(ctx, gitDir, work, base, top, gitx.DiffOptions{Cache: t.TempDir()})
			},
		} {
			s, err := diff()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			fields := strings.Split(string(s.Raw), "\x00")
			for k := 0; k+1 < len(fields); k += 2 {
				if strings.HasSuffix(fields[k], " A") {
					got = append(got, fields[k+1])
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d, %s: new files\n%q\ngit status:\n%q", i, name, got, want)
			}
		}
	}
}
