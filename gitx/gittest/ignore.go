package gittest

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// CheckIgnored asks git which of the paths below dir (relative, '/'
// separated) its .gitignore files ignore: `git check-ignore --no-index`,
// so whether a file is tracked does not matter, with no excludes file
// but the tree's own. dir is made a repository if it is not one.
func CheckIgnored(t testing.TB, dir string, paths []string) map[string]bool {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		Git(t, dir, "init", "--quiet", "--template=")
	}
	cmd := exec.Command("git", "-c", "core.excludesFile=/dev/null", "check-ignore", "--no-index", "--stdin", "-z")
	cmd.Dir = dir
	cmd.Env = plainEnv()
	cmd.Stdin = strings.NewReader(strings.Join(paths, "\x00") + "\x00")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) { // 1: none ignored
		t.Fatalf("git check-ignore: %v\n%s", err, ee.Stderr)
	}
	ignored := map[string]bool{}
	for _, p := range bytes.Split(out, []byte{0}) {
		if len(p) > 0 {
			ignored[string(p)] = true
		}
	}
	return ignored
}

// AllPaths lists every file, link and directory below dir, relative and
// '/' separated, .git left out.
func AllPaths(t testing.TB, dir string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		if d.Name() == ".git" {
			return fs.SkipDir
		}
		rel, _ := filepath.Rel(dir, p)
		paths = append(paths, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// topIgnore is the 25-line .gitignore SprinkleIgnores puts at the top.
var topIgnore = []string{
	"# Build output", "*.o", "*.a", "*.so", "*.exe", "*.test", "*.prof", "/bin/", "/pkg/",
	"build/", "dist/", "/vendor", "!keep.o", "**/testdata/*.golden", "*.swp", "*~",
	".DS_Store", "/coverage.*", "*.[oa]", "tmp/", "node_modules/", `\#*#`, "*.log",
	"!important.log", "/.idea",
}

// nestedIgnore is the pool the 15-line .gitignore files below are drawn
// from: what projects write, and every rule of gitignore(5) (negation,
// anchoring, directories only, "**", bracket expressions, escapes,
// trailing spaces, CRLF).
var nestedIgnore = []string{
	"*.out", "/gen/", "*.pb.go", "!keep.pb.go", "/testdata/*.tmp", "**/fixtures/", "*.[ch]~",
	"cover.out", "zz_generated*", "**/*.bak", "[Bb]in/", "obj/", "*_test.go.orig", "/_obj",
	`\!important`, `trailing-space\ `, "foo/**/bar", "core", "a?c.txt", "*.s~", "/local.*",
	".cache/", "*.[0-9][0-9]", "!*.keep", "doc/*.html", "# generated", "*.golden   ",
	"!/testdata/", "[[:upper:]]*.tmp\r", "export_test.go", "!important.log", "*.syso",
}

// SprinkleIgnores writes a 25-line .gitignore at the top of root and
// 15-line ones in n of its directories, spread evenly through them in name
// order (lines added to a .gitignore already there). The same tree and n
// give the same files.
func SprinkleIgnores(root string, n int) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		if d.IsDir() && p != root {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	add := func(dir string, lines []string) error {
		f, err := os.OpenFile(filepath.Join(dir, ".gitignore"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		_, err = f.WriteString(strings.Join(lines, "\n") + "\n")
		return errors.Join(err, f.Close())
	}
	if err := add(root, topIgnore); err != nil {
		return err
	}
	for i := 0; i < n && len(dirs) > 0; i++ {
		lines := make([]string, 15)
		for k := range lines {
			lines[k] = nestedIgnore[(i*7+k)%len(nestedIgnore)]
		}
		if err := add(dirs[i*len(dirs)/n], lines); err != nil {
			return err
		}
	}
	return nil
}

// CopyTree copies the directories, regular files and links below src to
// dst (.git left out); with names only, files are made empty, which is all
// an ignore rule looks at.
func CopyTree(src, dst string, namesOnly bool) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case !d.Type().IsRegular():
			return nil
		case namesOnly:
			return os.WriteFile(to, nil, 0o644)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}
