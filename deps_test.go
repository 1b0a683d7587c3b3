package paddock_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/paddock-dev/paddock"

// rule is one row of docs/ARCHITECTURE.md's import table.
type rule struct {
	imports, testImports map[string]bool
	everything           bool // cmd/paddockd
	stdlibOnly           bool
}

var backticked = regexp.MustCompile("`([^`]+)`")

// readTable reads the "Who may import whom" table: package → rule.
func readTable(t *testing.T) map[string]*rule {
	f, err := os.Open("docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules := map[string]*rule{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## Who may import whom"):
			in = true
			continue
		case strings.HasPrefix(line, "## "):
			in = false
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 2 {
			continue
		}
		r := &rule{imports: map[string]bool{}, testImports: map[string]bool{}}
		r.stdlibOnly = strings.Contains(cells[1], "standard library only")
		r.everything = strings.Contains(cells[1], "everything")
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			r.imports[m[1]] = true
		}
		if len(cells) > 2 {
			for _, m := range backticked.FindAllStringSubmatch(cells[2], -1) {
				r.testImports[m[1]] = true
			}
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			rules[m[1]] = r
		}
	}
	return rules
}

// TestImportsFollowTheArchitecture: every import between paddock's
// packages, in code, tests and benchmarks, is one docs/ARCHITECTURE.md's
// table allows; a package the table marks "standard library only" imports
// nothing else at all; every package has a row.
func TestImportsFollowTheArchitecture(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	rules := readTable(t)
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		name := short(p.ImportPath)
		r := rules[name]
		if r == nil {
			t.Errorf("%s has no row in docs/ARCHITECTURE.md's import table", name)
			continue
		}
		check := func(imports []string, test bool) {
			for _, imp := range imports {
				if !strings.HasPrefix(imp, module) {
					if r.stdlibOnly && strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
						t.Errorf("%s imports %s, but may import the standard library only", name, imp)
					}
					continue
				}
				dep := short(imp)
				switch {
				case dep == name, r.everything, r.imports[dep], test && r.testImports[dep]:
				case test && r.testImports["everything"]:
				default:
					where := ""
					if test {
						where = " (in its tests)"
					}
					t.Errorf("%s imports %s%s, which docs/ARCHITECTURE.md's table does not allow", name, dep, where)
				}
			}
		}
		check(p.Imports, false)
		check(append(p.TestImports, p.XTestImports...), true)
	}
}

func short(path string) string {
	if path == module {
		return "paddock"
	}
	return strings.TrimPrefix(path, module+"/")
}
