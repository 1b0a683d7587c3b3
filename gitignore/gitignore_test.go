package gitignore_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/gitignore"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// tree is a fixture: path → content; a path ending in "/" is a directory,
// content "-> target" makes a symbolic link.
type tree map[string]string

func (tr tree) write(t *testing.T, dir string) {
	t.Helper()
	for p, c := range tr {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(p, "/"):
			err = os.MkdirAll(full, 0o755)
		case strings.HasPrefix(c, "-> "):
			err = os.Symlink(c[3:], full)
		default:
			err = os.WriteFile(full, []byte(c), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// ignoredByWalk is what a walk with this package leaves out below dir:
// what it finds ignored, and everything inside an ignored directory.
func ignoredByWalk(t *testing.T, dir string) map[string]bool {
	t.Helper()
	ignored := map[string]bool{}
	read := func(abs string) *gitignore.File {
		p := filepath.Join(abs, ".gitignore")
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			return nil // git does not follow a .gitignore that is a link
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return gitignore.Parse(b)
	}
	var walk func(abs, rel string, d *gitignore.Dir)
	walk = func(abs, rel string, d *gitignore.Dir) {
		entries, err := os.ReadDir(abs)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() == ".git" {
				continue
			}
			r := path(rel, e.Name())
			if d.Ignored(e.Name(), e.IsDir()) {
				for _, below := range gittest.AllPaths(t, filepath.Join(abs, e.Name())) {
					ignored[r+"/"+below] = true
				}
				ignored[r] = true
				continue
			}
			if e.IsDir() {
				sub := filepath.Join(abs, e.Name())
				walk(sub, r, d.Child(e.Name(), read(sub)))
			}
		}
	}
	walk(dir, "", gitignore.Root(read(dir)))
	return ignored
}

func path(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// differ compares the walk with git check-ignore on every path below dir
// and returns the paths they disagree on.
func differ(t *testing.T, dir string) []string {
	t.Helper()
	all := gittest.AllPaths(t, dir)
	want := gittest.CheckIgnored(t, dir, all)
	got := ignoredByWalk(t, dir)
	var diffs []string
	for _, p := range all {
		if got[p] != want[p] {
			diffs = append(diffs, fmt.Sprintf("%q: git ignores it: %t, this package: %t", p, want[p], got[p]))
		}
	}
	return diffs
}

// TestAgainstGit: every rule of gitignore(5), each in a tree, decided as
// git check-ignore decides.
func TestAgainstGit(t *testing.T) {
	cases := map[string]tree{
		"basics": {
			".gitignore": "*.o\n!keep.o\nbuild/\n/vendor\n**/testdata/*.golden\n",
			"a.o":        "", "keep.o": "", "sub/b.o": "", "sub/keep.o": "", "build/x": "", "sub/build/y": "",
			"other/build": "a file, not a directory", "vendor/v.go": "", "sub/vendor/v.go": "",
			"testdata/a.golden": "", "x/testdata/b.golden": "", "x/y/testdata/c.golden": "",
			"x/testdata/d.txt": "", "testdata/deep/e.golden": "", "main.go": "",
		},
		"the deepest file decides": {
			".gitignore": "*.log\n", "a.log": "", "sub/.gitignore": "!important.log\n",
			"sub/important.log": "", "sub/other.log": "", "sub/deeper/.gitignore": "*.log\n",
			"sub/deeper/important.log": "", "sub/deeper/more/important.log": "",
			"sub/deeper/more/.gitignore": "!*\n", "sub/deeper/more/x.log": "",
		},
		"no re-include below an ignored directory": {
			".gitignore": "dir/\n!dir/keep\nstar/*\n!star/keep\n!star/sub/\n",
			"dir/keep":   "", "dir/other": "", "star/keep": "", "star/other": "", "star/sub/x": "",
			"dir2/.gitignore": "!*\n", "dir2/x": "",
		},
		"last line wins within a file": {
			".gitignore": "*.txt\n!a*.txt\nab*.txt\n!abc.txt\n",
			"x.txt":      "", "a.txt": "", "ab.txt": "", "abc.txt": "", "abcd.txt": "",
		},
		"bracket expressions": {
			".gitignore": "[a-c]*.txt\nfile[0-9].md\n[!x]y\n[^x]z\n[[:digit:]]*.dat\n[[:upper:]][[:lower:]].c\n" +
				"[]]a\n[a-]b\nx[\\]]\n[[:alpha:]-]q\n[[:bogus:]]w\n[x\n[[:space:][:punct:]]p\n[[:xdigit:]]h\n" +
				"[[:alnum:]]n\n[[:blank:]]k\n[[:graph:]]g\n[[:print:]]r\n[[:cntrl:]]u\n[a-\\]]e\n[[:digit:]\n",
			"apple.txt": "", "dog.txt": "", "file5.md": "", "fileX.md": "", "ay": "", "xy": "", "az": "", "xz": "",
			"7.dat": "", "x7.dat": "", "Ab.c": "", "AB.c": "", "]a": "", "-b": "", "ab": "", "x]": "", "x\\": "",
			"aq": "", "-q": "", "5q": "", "xw": "", ":w": "", "[x": "", "x": "", " p": "", "_p": "", "\tp": "", "\vp": "",
			"\fp": "", "\rp": "", "ap": "", "fh": "", "gh": "", "9n": "", "_n": "", " k": "", "\tk": "", "ak": "",
			"!g": "", " g": "", " r": "", "\x01r": "", "\x01u": "", "\x7fu": "", "au": "", "]e": "", "\\e": "", "be": "",
			"[": "", "[:": "", ":]": "",
		},
		"escapes and spaces": {
			".gitignore": "\\#hash\n#comment\n\\!bang\n\\*star\nq\\?\n\\ lead\ntrail   \nesc\\ \nesc2\\  \nend\\\n\\a\\b\n",
			"#hash":      "", "#comment": "", "!bang": "", "*star": "", "xstar": "", "q?": "", "qx": "", " lead": "",
			"trail": "", "trail   ": "", "esc ": "", "esc": "", "esc2 ": "", "esc2": "", "end\\": "", "end": "", "ab": "",
		},
		"CRLF, a byte-order mark, blank lines": {
			".gitignore": "\xef\xbb\xbfbom.txt\r\n# comment\r\n  \r\n\r\ncr.txt\r\nnul\x00.txt\nlast",
			"bom.txt":    "", "cr.txt": "", "cr.txt\r": "", "nul": "", "nul.txt": "", "last": "", "other": "",
		},
		"double stars": {
			".gitignore": "a/**/b\n**/c\nd/**\nf**g\n**/node_modules/\ne/**/\n/**/top\n**\\/w\n",
			"a/b":        "", "a/x/b": "", "a/x/y/b": "", "xa/b": "", "c": "", "q/c": "", "q/r/c/in": "",
			"d/one": "", "d/two/three": "", "fxg": "", "fx/g": "", "node_modules/x": "", "p/node_modules/y": "",
			"p/q/node_modules": "a file", "e/f/g": "", "e/h": "", "top": "", "m/top": "", "w": "", "v/w": "",
		},
		"one star and a slash": {
			".gitignore": "*/x\n?/y\n*.d/\n", "a/x": "", "x": "", "a/b/x": "", "ab/x": "", "a/y": "", "ab/y": "",
			"b/c/y": "", "p.d/z": "", "q.d": "a file",
		},
		"links are not directories": {
			".gitignore": "link/\nreal/\nlnk*\n", "real/f": "", "link": "-> real", "lnkfile": "-> real/f",
			"sub/.gitignore": "-> ../other", "other": "*\n", "sub/kept": "",
		},
		"patterns anchored in a subdirectory": {
			"sub/.gitignore": "doc/frotz\n/anch\nx/*/z\n", "sub/doc/frotz": "", "sub/x/doc/frotz": "", "doc/frotz": "",
			"sub/anch": "", "sub/y/anch": "", "anch": "", "sub/x/q/z": "", "sub/x/q/r/z": "", "x/q/z": "",
		},
		"negated directories and dir-only negation": {
			".gitignore": "*\n!*/\n!*.go\n!.gitignore\n", "a.go": "", "a.txt": "", "d/b.go": "", "d/b.txt": "", "d/e/c.go": "",
		},
		"empty and odd lines": {
			".gitignore": "!\n/\n//\n!/\n \n\\\n*/\n", "a": "", "b/c": "", "\\": "",
		},
	}
	for name, tr := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			tr.write(t, dir)
			if d := differ(t, dir); len(d) > 0 {
				t.Errorf("differs from git:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}

// TestAgainstGitRandom: random trees with random .gitignore files, built
// from the pieces patterns are made of, decided as git decides.
func TestAgainstGitRandom(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 30
	}
	names := []string{"a", "b", "ab", "a.o", "b.o", "x.log", "keep", "build", "[a]", "*", "a b", "-", "!a"}
	pieces := []string{"a", "b", "o", ".o", "*", "?", "**", "[ab]", "[!a]", "[a-b]", "[[:alpha:]]", "\\*", "\\[", "/", "log", "build", "keep", " "}
	var fails int
	for seed := 0; seed < n && fails < 5; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 15))
		tr := tree{}
		dirs := []string{""}
		for i := 0; i < 25; i++ {
			parent := dirs[rng.IntN(len(dirs))]
			p := path(parent, names[rng.IntN(len(names))])
			if _, taken := tr[p]; taken || slices.Contains(dirs, p) || tr[parent] != "" && parent != "" {
				continue
			}
			if rng.IntN(3) == 0 && strings.Count(p, "/") < 3 {
				dirs = append(dirs, p)
				continue
			}
			tr[p] = ""
		}
		for _, d := range dirs {
			if rng.IntN(2) == 0 {
				continue
			}
			var b strings.Builder
			for l := 0; l < 1+rng.IntN(5); l++ {
				if rng.IntN(4) == 0 {
					b.WriteString("!")
				}
				for k := 0; k < 1+rng.IntN(4); k++ {
					b.WriteString(pieces[rng.IntN(len(pieces))])
				}
				b.WriteString("\n")
			}
			tr[path(d, ".gitignore")] = b.String()
		}
		dir := t.TempDir()
		for _, d := range dirs[1:] {
			os.MkdirAll(filepath.Join(dir, d), 0o755)
		}
		tr.write(t, dir)
		if d := differ(t, dir); len(d) > 0 {
			fails++
			var files []string
			for p, c := range tr {
				if strings.HasSuffix(p, ".gitignore") {
					files = append(files, fmt.Sprintf("%s: %q", p, c))
				}
			}
			slices.Sort(files)
			t.Errorf("seed %d differs from git:\n%s\nwith\n%s", seed, strings.Join(d, "\n"), strings.Join(files, "\n"))
		}
	}
}

// TestMatch: wildmatch cases whose answers gitignore(5) and git's own
// t3070 state.
func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, text  string
		pathname, want bool
	}{
		{"foo", "foo", true, true},
		{"foo", "bar", true, false},
		{"???", "foo", true, true},
		{"*f", "foo", true, false},
		{"*", "foo/bar", true, false},
		{"*", "foo/bar", false, true},
		{"**", "foo/bar", true, true},
		{"foo/**/bar", "foo/bar", true, true},
		{"foo/**/bar", "foo/a/b/bar", true, true},
		{"foo/*/bar", "foo/a/b/bar", true, false},
		{"**/foo", "foo", true, true},
		{"**/foo", "a/b/foo", true, true},
		{"abc/**", "abc/x/y", true, true},
		{"abc/**", "abc", true, false},
		{"a**b", "a/b", true, false},
		{"[]]", "]", true, true},
		{"[!]]", "a", true, true},
		{"[a-]", "-", true, true},
		{"[\\]]", "]", true, true},
		{"[[:digit:]]", "5", true, true},
		{"[[:bogus:]]", "b", true, false},
		{"[/]", "/", true, false},
		{"[/]", "/", false, true},
		{"\\*", "*", true, true},
		{"\\*", "x", true, false},
		{"a\\", "a\\", true, false},
		{"*.c", "a.c", true, true},
		{"-*-*-*-*-*-*-12-*-*-*-m-*-*-*", "-adobe-courier-bold-o-normal--12-120-75-75-m-70-iso8859-1", true, true},
		{"**/*a*b*g*n*t", "abcd/abcdefg/abcdefghijk/abcdefghijklmnop.txt", true, true},
		{"**/*a*b*g*n*t", "abcd/abcdefg/abcdefghijk/abcdefghijklmnop.txtz", true, false},
	} {
		if got := gitignore.Match(tc.pattern, tc.text, tc.pathname); got != tc.want {
			t.Errorf("Match(%q, %q, %t) = %t, want %t", tc.pattern, tc.text, tc.pathname, got, tc.want)
		}
	}
}
