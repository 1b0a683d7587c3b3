package manifest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestMatchPath(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"packages/*", "packages/ui", true},
		{"packages/*", "packages/ui/x", false},
		{"./packages/*/", "packages/ui", true},
		{"apps/**", "apps", true},
		{"apps/**", "apps/web/admin", true},
		{"**/test/**", "apps/web/test/fixture", true},
		{"**/test/**", "apps/web/tests", false},
		{"**/target/surefire-reports/TEST-*.xml", "target/surefire-reports/TEST-a.xml", true},
		{"**/target/surefire-reports/TEST-*.xml", "core/target/surefire-reports/TEST-a.xml", true},
		{"**/target/surefire-reports/TEST-*.xml", "core/target/surefire-reports/a.xml", false},
		{"xtask", "xtask", true},
		{"[", "[", false}, // a bad pattern matches nothing
	} {
		if got := MatchPath(tc.pattern, tc.name); got != tc.want {
			t.Errorf("MatchPath(%q, %q) = %v", tc.pattern, tc.name, got)
		}
	}
}

func TestMakefileTargets(t *testing.T) {
	mk := "X := a:b\nY = $(shell date):x\nZ ::= 1\n.PHONY: test\n" +
		"build test: deps\n\techo not: a target\n%.o: %.c\ncheck::\n# lint: commented\nfmt-check :\n" +
		"$(OUT): x\n  indented: no\n"
	got := makefileTargets([]byte(mk))
	var names []string
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"build", "check", "fmt-check", "test"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("%v, want %v", names, want)
	}
}

// TestRootArgvRuns: the form Verify gives a check that runs in a
// subdirectory with an environment does run there, with it, and keeps the
// arguments as they were (spaces, quotes and all).
func TestRootArgvRuns(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sub dir", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := Check{Dir: "sub dir/x", Env: []string{"WHO=it's me"}, Argv: []string{"sh", "-c", `printf '%s|%s|%s' "$(basename "$PWD")" "$WHO" "$1"`, "sh", "a  b"}}
	cmd := exec.Command(c.RootArgv()[0], c.RootArgv()[1:]...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "x|it's me|a  b" {
		t.Fatalf("%q %v", out, err)
	}
	if plain := (Check{Argv: []string{"go", "test"}}); !reflect.DeepEqual(plain.RootArgv(), plain.Argv) {
		t.Fatal("a check at the root is run as it is")
	}
}

// TestVerifyOrder: all builds, then lints, then tests; never format-check.
func TestVerifyOrder(t *testing.T) {
	m := DetectTree(newDirTree(t, filepath.Join("testdata", "corpus", "monorepo-polyglot")))
	var names []string
	for _, c := range m.Plan() {
		names = append(names, c.Name+" "+c.Dir)
	}
	want := []string{"build ", "build backend", "build frontend", "lint backend", "lint frontend", "test ", "test backend", "test frontend", "test tools/scanner"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("%q", names)
	}
	if v := m.Verify(); len(v) != len(want) || v[0][0] != "make" || v[1][0] != "sh" || v[1][4] != "backend" {
		t.Fatalf("%q", v)
	}
	if got := len(m.Checks(CheckFormatCheck)); got != 3 {
		t.Fatalf("%d format checks", got)
	}
}

// TestDetectTopLevel: Detect, given only a read function, sees the names
// detection knows at the top, hidden wrapper settings included.
func TestDetectTopLevel(t *testing.T) {
	files := map[string]string{
		"pom.xml": "<project/>", "mvnw": "#!/bin/sh",
		".mvn/wrapper/maven-wrapper.properties": "distributionUrl=https\\://x/apache-maven-3.8.8-bin.zip",
		"sub/go.mod":                            "module x", // not at the top: Detect cannot list it
	}
	m := Detect(func(p string) ([]byte, bool) { s, ok := files[p]; return []byte(s), ok })
	if !reflect.DeepEqual(m.Types, []string{"java"}) || m.Components[0].Tools[0].Version != "3.8.8" || m.Verify()[0][0] != "./mvnw" {
		t.Fatalf("%+v", m)
	}
}

// bigTree is a tree of n files, of which a few are project files.
type bigTree struct {
	files []string
	reads int
}

func (b *bigTree) Files() []string { return b.files }
func (b *bigTree) ReadFile(p string) ([]byte, bool) {
	b.reads++
	switch {
	case strings.HasSuffix(p, "package.json"):
		return []byte(`{"scripts":{"test":"jest"}}`), true
	case strings.HasSuffix(p, "go.mod"):
		return []byte("module x\n\ngo 1.22\n"), true
	}
	return nil, true
}

func newBigTree(n int) *bigTree {
	b := &bigTree{}
	for i := range n {
		switch {
		case i%10000 == 0:
			b.files = append(b.files, fmt.Sprintf("svc%d/go.mod", i))
		case i%997 == 0:
			b.files = append(b.files, fmt.Sprintf("web/node_modules/dep%d/package.json", i))
		default:
			b.files = append(b.files, fmt.Sprintf("svc%d/pkg/sub/file%d.go", i/10000*10000, i))
		}
	}
	return b
}

// TestDetectReadsOnlyProjectFiles: of 50,000 paths, only the project files
// outside skipped directories are read.
func TestDetectReadsOnlyProjectFiles(t *testing.T) {
	b := newBigTree(50000)
	m := DetectTree(b)
	if b.reads != 5 || len(m.Components) != 5 || !reflect.DeepEqual(m.Types, []string{"go"}) {
		t.Fatalf("%d reads, %d components", b.reads, len(m.Components))
	}
}

func BenchmarkDetectTree50k(bm *testing.B) {
	b := newBigTree(50000)
	for bm.Loop() {
		DetectTree(b)
	}
}

func TestShellQuote(t *testing.T) {
	for _, s := range []string{"plain", "it's", "$(false) `x` \"y\" \\ ;|&", ""} {
		out, err := exec.Command("sh", "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("%q: %q %v", s, out, err)
		}
	}
}

// mapTree is a Tree of path → content.
type mapTree map[string]string

func (m mapTree) Files() []string {
	var out []string
	for p := range m {
		out = append(out, p)
	}
	return out
}

func (m mapTree) ReadFile(p string) ([]byte, bool) { s, ok := m[p]; return []byte(s), ok }

// FuzzDetect: whatever a project file holds, detection does not panic and
// declares only well-formed checks.
func FuzzDetect(f *testing.F) {
	filepath.WalkDir(filepath.Join("testdata", "corpus"), func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && !strings.HasSuffix(p, "want.json") {
			if b, err := os.ReadFile(p); err == nil && len(b) < 4096 {
				f.Add(b)
			}
		}
		return nil
	})
	f.Fuzz(func(t *testing.T, b []byte) {
		tree := mapTree{}
		for name := range knownNames {
			tree[name] = string(b)
			tree["sub/"+name] = string(b)
		}
		for _, name := range []string{"A.sln", "sub/B.csproj", "C.slnx"} {
			tree[name] = string(b)
		}
		m := DetectTree(tree)
		for _, c := range m.Components {
			for _, ch := range c.Checks {
				if checkRank(ch.Name) < 0 || len(ch.Argv) == 0 || ch.Adapter == "" || ch.Why == "" {
					t.Errorf("%+v", ch)
				}
			}
		}
	})
}
