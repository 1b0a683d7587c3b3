// Package manifest detects what kind of project a repository holds and
// declares the commands that build, test and format it. Verification runs
// these commands and no others: they come from the base revision as the
// host reads it, never from the model or from files an agent could write.
//
// Where a tool reads its recipe from a file in the tree (a Makefile's test
// target, package.json's scripts), the recipe is taken from the base too:
// the Makefile is staged read-only under .paddock/manifest/ and make is
// pointed at it, and a package script runs as the base wrote it. An agent
// that rewrites the recipe does not change what verifies its work.
package manifest

import (
	"encoding/json"
	"strings"
)

// Manifest is what a project is and how it is checked.
type Manifest struct {
	Types  []string   `json:"types"`
	Build  [][]string `json:"build,omitempty"`
	Test   [][]string `json:"test,omitempty"`
	Format [][]string `json:"format,omitempty"`
	// Files are base contents the commands need staged under StageDir.
	Files map[string][]byte `json:"-"`
}

// StageDir is where Files are staged, relative to the workspace root.
const StageDir = ".paddock/manifest"

// Verify is the verification: build, then test.
func (m *Manifest) Verify() [][]string {
	return append(append([][]string{}, m.Build...), m.Test...)
}

// Detect builds the manifest from the files at the top of the base
// revision; read returns a file's content, or false if it is not there.
func Detect(read func(path string) ([]byte, bool)) *Manifest {
	m := &Manifest{Types: []string{}, Files: map[string][]byte{}}
	has := func(p string) bool { _, ok := read(p); return ok }
	if has("go.mod") {
		m.Types = append(m.Types, "go")
		m.Build = append(m.Build, []string{"go", "build", "./..."}, []string{"go", "vet", "./..."})
		m.Test = append(m.Test, []string{"go", "test", "./..."})
		m.Format = append(m.Format, []string{"gofmt", "-l", "."})
	}
	if b, ok := read("package.json"); ok {
		m.Types = append(m.Types, "node")
		var pkg struct {
			Scripts map[string]string `json:"scripts"`
		}
		json.Unmarshal(b, &pkg)
		// The scripts as the base wrote them, with the package's binaries on PATH.
		script := func(s string) []string {
			return []string{"sh", "-c", `PATH="$PWD/node_modules/.bin:$PATH"; ` + s}
		}
		if b, ok := pkg.Scripts["build"]; ok {
			m.Build = append(m.Build, script(b))
		}
		if t, ok := pkg.Scripts["test"]; ok && !strings.Contains(t, "no test specified") {
			m.Test = append(m.Test, script(t))
		}
		if f, ok := pkg.Scripts["format"]; ok {
			m.Format = append(m.Format, script(f))
		}
	}
	if has("Cargo.toml") {
		m.Types = append(m.Types, "rust")
		m.Build = append(m.Build, []string{"cargo", "build", "--offline"})
		m.Test = append(m.Test, []string{"cargo", "test", "--offline"})
		m.Format = append(m.Format, []string{"cargo", "fmt", "--check"})
	}
	if has("pyproject.toml") || has("setup.py") || has("requirements.txt") {
		m.Types = append(m.Types, "python")
		m.Test = append(m.Test, []string{"python3", "-m", "pytest", "-q"})
	}
	if b, ok := read("Makefile"); ok {
		m.Types = append(m.Types, "make")
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "test:") && len(m.Test) == 0 {
				m.Files["Makefile"] = b
				m.Test = append(m.Test, []string{"make", "-f", StageDir + "/Makefile", "test"})
			}
		}
	}
	return m
}
