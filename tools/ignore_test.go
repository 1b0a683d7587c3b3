package tools

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// walkIgnored is what the tools' walk below start leaves out of dir: every
// path there that it does not visit.
func walkIgnored(t *testing.T, dir, start string) map[string]bool {
	t.Helper()
	root, err := confine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	seen := map[string]bool{}
	if err := walk(context.Background(), root, start, -1, false, func(e entry) error {
		seen[e.rel] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ignored := map[string]bool{}
	for _, p := range gittest.AllPaths(t, dir) {
		if (start == "." || strings.HasPrefix(p, start+"/")) && !seen[p] {
			ignored[p] = true
		}
	}
	return ignored
}

// compareWithGit fails t where the walk and git check-ignore disagree on a
// path of dir below start.
func compareWithGit(t *testing.T, dir, start string) (paths, ignored int) {
	t.Helper()
	all := gittest.AllPaths(t, dir)
	want := gittest.CheckIgnored(t, dir, all)
	got := walkIgnored(t, dir, start)
	var diffs []string
	for _, p := range all {
		if start != "." && !strings.HasPrefix(p, start+"/") {
			continue
		}
		paths++
		if want[p] {
			ignored++
		}
		if got[p] != want[p] {
			diffs = append(diffs, fmt.Sprintf("%q: git ignores it: %t, the walk: %t", p, want[p], got[p]))
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		if len(diffs) > 30 {
			diffs = append(diffs[:30], fmt.Sprintf("… and %d more", len(diffs)-30))
		}
		t.Errorf("below %s, the walk and git check-ignore differ:\n%s", start, strings.Join(diffs, "\n"))
	}
	return paths, ignored
}

// TestWalkIgnoresAsGit: list, glob and grep leave out exactly what git
// check-ignore calls ignored, in a generated tree of names that the
// nested .gitignore files' every rule hits, from the top and from below.
func TestWalkIgnoresAsGit(t *testing.T) {
	dir := t.TempDir()
	subdirs := []string{"build", "testdata", "gen", "fixtures", "bin", "Bin", "obj", "doc", "foo/x/bar", "foo/bar",
		"vendor", "pkg", "tmp", ".cache", "src", "_obj", "testdata/deep"}
	files := []string{"main.go", "a.o", "keep.o", "x.a", "lib.so", "cover.out", "zz_generated_deep.go", "x.bak",
		"y.pb.go", "keep.pb.go", "abc.txt", "a_c.txt", "core", "!important", "trailing-space ", "trailing-space",
		"#tmp#", "z.log", "important.log", "x.golden", "T.tmp", "t.tmp", "v.12", "x.keep", "export_test.go",
		"index.html", "x.s~", "local.conf", "f.c~", "coverage.txt", "prog.exe", "x.syso"}
	for m := 0; m < 12; m++ {
		for i, sub := range append([]string{""}, subdirs...) {
			d := filepath.Join(dir, fmt.Sprintf("mod%02d", m), sub)
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			for k, f := range files {
				if (m+i+k)%3 == 0 || sub == "" {
					os.WriteFile(filepath.Join(d, f), nil, 0o644)
				}
			}
		}
	}
	for _, f := range files {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	for _, d := range []string{"vendor", "bin", "pkg", "build", ".idea", "node_modules/x", "testdata"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
		os.WriteFile(filepath.Join(dir, d, "f.go"), nil, 0o644)
	}
	os.Symlink("mod00", filepath.Join(dir, "tmp"))
	if err := gittest.SprinkleIgnores(dir, 60); err != nil {
		t.Fatal(err)
	}
	paths, ignored := compareWithGit(t, dir, ".")
	t.Logf("%d paths, %d of them ignored", paths, ignored)
	if ignored == 0 || ignored == paths {
		t.Fatalf("a differential test that ignores %d of %d paths tests nothing", ignored, paths)
	}
	for _, start := range []string{"mod03", "mod05/foo", "mod07/testdata/deep", "mod02/build"} {
		compareWithGit(t, dir, start)
	}
}

// TestWalkIgnoresAsGitOnGoSource: the same on Go's own source tree (its
// names: the files are made empty) with a 25-line .gitignore at the top
// and 15-line ones in 100 directories.
func TestWalkIgnoresAsGitOnGoSource(t *testing.T) {
	if testing.Short() {
		t.Skip("copies the names of Go's source tree")
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	src := filepath.Join(strings.TrimSpace(string(goroot)), "src")
	if _, serr := os.Stat(filepath.Join(src, "go.mod")); err != nil || serr != nil {
		t.Skipf("Go's source tree is not at %s", src)
	}
	dir := t.TempDir()
	if err := gittest.CopyTree(src, dir, true); err != nil {
		t.Fatal(err)
	}
	if err := gittest.SprinkleIgnores(dir, 100); err != nil {
		t.Fatal(err)
	}
	paths, ignored := compareWithGit(t, dir, ".")
	t.Logf("%d paths, %d of them ignored", paths, ignored)
}

// TestDotGit: the walk's shortcut agrees with confine.IsDotGit.
func TestDotGit(t *testing.T) {
	for _, name := range []string{".git", ".GIT", ".Git", ".git.", ".git ", ".git::$INDEX_ALLOCATION", "git~1", "GIT~9",
		"\uff0egit", ".\uff47\uff49\uff54", ".g\u200cit", ".\u0261it", ".g\u0456t", ".gi\u0442", "git", ".gitignore",
		".github", "git~0", "x.git", ".gi", "..git", "main.go", "README", "a", "", "\u00e9t\u00e9", ".it", ".t"} {
		if dotGit(name) != confine.IsDotGit(name) {
			t.Errorf("dotGit(%q) = %t, confine.IsDotGit says %t", name, dotGit(name), confine.IsDotGit(name))
		}
	}
}
