package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

// twin builds a random tree twice: once as a workspace, once as a plain
// directory read with package os, the trusted implementation.
func twin(t *testing.T) (*fixture, string, []string) {
	f := newFixture(t)
	plain := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 9))
	words := []string{"alpha", "beta", "gamma", "delta", "TODO", "fixme", "func main()", "return nil", "x := 1"}
	var files []string
	for i := 0; i < 120; i++ {
		dir := fmt.Sprintf("t/d%d/e%d", rng.IntN(4), rng.IntN(3))
		name := fmt.Sprintf("%s/f%03d.%s", dir, i, []string{"go", "txt", "md"}[rng.IntN(3)])
		var b strings.Builder
		for l := 0; l < rng.IntN(30); l++ {
			for w := 0; w < 1+rng.IntN(6); w++ {
				b.WriteString(words[rng.IntN(len(words))] + " ")
			}
			b.WriteString("\n")
		}
		for _, root := range []string{f.ws, plain} {
			os.MkdirAll(filepath.Join(root, dir), 0o755)
			os.WriteFile(filepath.Join(root, name), []byte(b.String()), 0o644)
		}
		files = append(files, name)
	}
	for _, root := range []string{f.ws, plain} {
		os.Symlink("d0", filepath.Join(root, "t", "inside-link"))
	}
	sort.Strings(files)
	return f, plain, files
}

func TestDifferentialAgainstOS(t *testing.T) {
	f, plain, files := twin(t)
	for _, name := range files {
		want, _ := os.ReadFile(filepath.Join(plain, name))
		res, err := f.call(t, "read", map[string]any{"path": name})
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		if got := res.(*ReadResult); got.Content != string(want) || got.Size != int64(len(want)) {
			t.Fatalf("read %s differs from os", name)
		}
		res, _ = f.call(t, "stat", map[string]any{"path": name})
		fi, _ := os.Lstat(filepath.Join(plain, name))
		if st := res.(*StatResult); st.Size != fi.Size() || st.Type != "file" || st.Mode != fmt.Sprintf("%04o", fi.Mode().Perm()) {
			t.Fatalf("stat %s = %+v", name, st)
		}
	}
	// Through a link inside the workspace, too.
	linked := strings.Replace(files[0], "t/d0/", "t/inside-link/", 1)
	if strings.HasPrefix(files[0], "t/d0/") {
		res, err := f.call(t, "read", map[string]any{"path": linked})
		want, _ := os.ReadFile(filepath.Join(plain, linked))
		if err != nil || res.(*ReadResult).Content != string(want) {
			t.Fatalf("read through an inside link: %v", err)
		}
	}

	// glob against doublestar over the plain tree.
	for _, pat := range []string{"**/*.go", "t/d1/**/*.md", "t/*/e0/f*.txt", "**/f00?.*"} {
		res, err := f.call(t, "glob", map[string]any{"pattern": pat, "path": "t"})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, name := range files {
			if ok, _ := doublestar.Match(pat, strings.TrimPrefix(name, "t/")); ok {
				want = append(want, name)
			}
		}
		got := res.(*GlobResult).Matches
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("glob %s: %v, want %v", pat, got, want)
		}
	}

	// grep against a line-by-line search of the plain tree.
	for _, tc := range []struct {
		pattern string
		literal bool
		fold    bool
	}{{"TODO", true, false}, {"todo", true, true}, {`func \w+\(\)`, false, false}, {`^beta`, false, false}, {"x := 1", true, false}} {
		res, err := f.call(t, "grep", map[string]any{"pattern": tc.pattern, "literal": tc.literal, "ignore_case": tc.fold, "path": "t", "max_results": 100000})
		if err != nil {
			t.Fatal(err)
		}
		expr := tc.pattern
		if tc.literal {
			expr = regexp.QuoteMeta(expr)
		}
		if tc.fold {
			expr = "(?i)" + expr
		}
		re := regexp.MustCompile(expr)
		var want []string
		for _, name := range files {
			b, _ := os.ReadFile(filepath.Join(plain, name))
			for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
				if len(b) > 0 && re.Match(line) {
					want = append(want, fmt.Sprintf("%s:%d:%s", name, i+1, line))
				}
			}
		}
		var got []string
		for _, m := range res.(*GrepResult).Matches {
			got = append(got, fmt.Sprintf("%s:%d:%s", m.Path, m.Line, m.Text))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("grep %q: %d matches, want %d", tc.pattern, len(got), len(want))
		}
	}

	// list against a walk of the plain tree, to a depth.
	res, err := f.call(t, "list", map[string]any{"path": "t", "depth": 2})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	filepath.WalkDir(filepath.Join(plain, "t"), func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(plain, p)
		if rel == "t" {
			return nil
		}
		if strings.Count(rel, "/") > 2 {
			return fs.SkipDir
		}
		want = append(want, rel)
		return nil
	})
	var got []string
	for _, e := range res.(*ListResult).Entries {
		got = append(got, e.Path)
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		b, _ := json.Marshal(got)
		t.Fatalf("list: %s\nwant %v", b, want)
	}
}
