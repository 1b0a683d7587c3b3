// Package manifest detects what a repository holds and declares the
// commands that build, lint, test and format-check it: its capability
// manifest. Verification runs these commands and no others: they come from
// the base revision as the host reads it from git's objects, never from
// the model or from files an agent could write.
//
// # Detection
//
// DetectTree reads a Tree (the base revision's file list and contents) in
// one pass over its paths and finds components: a directory holding a
// project of one ecosystem (Go, Node, Python, Rust, .NET, Java, make).
// Directories that hold other people's code or fixtures (node_modules,
// vendor, testdata, third_party, hidden directories, …: see skipDirs) are
// not searched. Each component declares the checks it has, named build,
// lint, test and format-check (CheckBuild, …), each with its argv, the
// directory it runs in, the adapter (the tool: go, pnpm, uv, cargo, …), the
// adapter's version where the base states one, how its results are read,
// and why (which file made it so).
//
// # Workspaces
//
// A workspace root is one component that covers its members: a go.work
// (its checks run in each module it uses), a Node workspace (package.json
// "workspaces" or pnpm-workspace.yaml), a Cargo workspace ([workspace]:
// cargo's --workspace), a Maven aggregator (<modules>), a Gradle build with
// settings.gradle, a .NET solution (the projects it lists) and a uv
// workspace. Its members are listed in Component.Members and are never
// components of their own, so nothing runs twice. A Node root's script
// covers its members for that check (a root "test" that runs turbo or
// pnpm -r is the project's whole test); for a check the root has no script
// for, each member's own script runs in the member's directory.
//
// A package.json below a Node workspace root that the workspace does not
// take in (pnpm's "!**/test/**") is a fixture the package manager never
// installs, not a component. Elsewhere a nested project is a component of
// its own, and the tool of an enclosing one may also reach it (pytest at a
// root collects the tests of a Python project below it).
//
// A Makefile is a component too, but only fills in: a target becomes a
// check when no other component in the same directory declares that check
// (as the first manifest did: the ecosystem's own command, with its
// structured results, wins over a make target that usually wraps it).
//
// # Recipes from the base
//
// Where a tool reads its recipe from a file in the tree (a Makefile's test
// target, package.json's scripts), the recipe is taken from the base too:
// the Makefile is staged read-only under StageDir and make is pointed at
// it, and a package script runs as the base wrote it. An agent that
// rewrites the recipe does not change what verifies its work.
//
// # Limitations
//
// Build files that are programs in their own right are read by their tools
// from the workspace, which the agent can write: go.mod, pom.xml,
// build.gradle, gradlew and mvnw, Cargo's build.rs, setup.py, conftest.py,
// tox.ini, *.csproj, a Makefile's include files, and the package.json of
// members that a root script reaches through its package manager (pnpm -r
// test). Edits to them show in the change set; paddock does not stage them.
// Node's pre/post scripts (pretest) are not run. A Makefile that finds its
// own directory through $(MAKEFILE_LIST) sees StageDir instead.
package manifest

import (
	"path"
	"slices"
	"strings"
)

// StageDir is where Files are staged, relative to the workspace root.
const StageDir = ".paddock/manifest"

// ResultsDir is where checks write the structured results (JUnit, TRX)
// paddock names: in the run's home as its commands see it (lifecycle's
// HomeInView), outside the workspace (the workspace's .paddock is
// read-only to commands, and nothing there enters a change set). The
// verifier empties it before each check and reads only what the check
// wrote. Reports a tool writes into the workspace itself (surefire's,
// Gradle's) are named by a glob relative to the root, and read when
// written after the check began.
const ResultsDir = "/home/paddock/.paddock-verify"

// The check names a component may declare.
const (
	CheckBuild       = "build"
	CheckLint        = "lint"
	CheckTest        = "test"
	CheckFormatCheck = "format-check"
)

// VerifyOrder is the checks a verification runs, in order: every
// component's build, then every lint, then every test. format-check is
// declared but not run by Verify: formatting is the reviewer's call.
var VerifyOrder = []string{CheckBuild, CheckLint, CheckTest}

// Results formats (Check.Results, before the colon).
const (
	ResultsGoTestJSON = "go-test-json" // the command's stdout: ParseGoTestJSON
	ResultsJUnit      = "junit"        // "junit:GLOB": files for ParseJUnit
	ResultsTRX        = "trx"          // "trx:GLOB": files for ParseTRX
)

// Tree is a revision's files as the host reads them.
type Tree interface {
	// ReadFile returns a file's content, or false if it is not there.
	ReadFile(path string) ([]byte, bool)
	// Files lists every file, slash-separated and relative to the root.
	Files() []string
}

// Manifest is what a project is and how it is checked.
type Manifest struct {
	// Types are the ecosystems found: go, node, rust, python, dotnet,
	// java, make (in that order).
	Types      []string    `json:"types"`
	Components []Component `json:"components"`
	// Staged names the Files, sorted.
	Staged []string `json:"staged,omitempty"`
	// Files are base contents the commands need staged under StageDir,
	// by their path in the repository.
	Files map[string][]byte `json:"-"`
}

// Component is one project in one directory (with its workspace members).
type Component struct {
	Dir       string `json:"dir"` // relative to the root; "" is the root
	Ecosystem string `json:"ecosystem"`
	Adapter   string `json:"adapter"`
	Tools     []Tool `json:"tools,omitempty"`
	Why       string `json:"why"`
	// Members are the directories of the workspace members it covers.
	Members []string `json:"members,omitempty"`
	// Targets are the make targets recognised (make components only).
	Targets []string `json:"targets,omitempty"`
	Checks  []Check  `json:"checks"`
}

// Tool is a tool's version as the base states it.
type Tool struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	From    string `json:"from"` // the file (and field) that says so
}

// Check is one command that verifies one aspect of a component.
type Check struct {
	Name string   `json:"name"` // CheckBuild, CheckLint, CheckTest, CheckFormatCheck
	Argv []string `json:"argv"`
	Dir  string   `json:"dir"` // where Argv runs, relative to the root
	// Env adds KEY=VALUE pairs to the command's environment.
	Env     []string `json:"env,omitempty"`
	Adapter string   `json:"adapter"`
	Version string   `json:"version,omitempty"`
	// Results says how the results are read: ResultsGoTestJSON, or a
	// format and a glob relative to the root ("junit:.paddock/verify/
	// test.junit.xml"; "**" spans directories: MatchPath), or "" for the
	// exit status and plain output only. Reports a tool writes into the
	// workspace (surefire's, Gradle's) may be left from an earlier run:
	// read only those written after the check started.
	Results string `json:"results"`
	Runner  string `json:"runner,omitempty"` // the test runner: jest, vitest, pytest, …
	Why     string `json:"why"`
}

// ResultsFormat splits c.Results into its format and its glob.
func (c Check) ResultsFormat() (format, glob string) {
	format, glob, _ = strings.Cut(c.Results, ":")
	return format, glob
}

// Checks returns every component's checks of that name, in component order.
func (m *Manifest) Checks(name string) []Check {
	var out []Check
	for _, c := range m.Components {
		for _, ch := range c.Checks {
			if ch.Name == name {
				out = append(out, ch)
			}
		}
	}
	return out
}

// Plan is the checks a verification runs, in VerifyOrder.
func (m *Manifest) Plan() []Check {
	var out []Check
	for _, name := range VerifyOrder {
		out = append(out, m.Checks(name)...)
	}
	return out
}

// Verify is Plan as argv lists run from the workspace root: a check in a
// subdirectory, or with an environment, is wrapped in sh to cd and env.
func (m *Manifest) Verify() [][]string {
	var out [][]string
	for _, c := range m.Plan() {
		out = append(out, c.RootArgv())
	}
	return out
}

// RootArgv is the check's command as run from the workspace root.
func (c Check) RootArgv() []string {
	if c.Dir == "" && len(c.Env) == 0 {
		return c.Argv
	}
	argv := []string{"sh", "-c", `cd "$1" && shift && exec "$@"`, "sh", dirOrDot(c.Dir)}
	if len(c.Env) > 0 {
		argv = append(append(argv, "env"), c.Env...)
	}
	return append(argv, c.Argv...)
}

func dirOrDot(d string) string {
	if d == "" {
		return "."
	}
	return d
}

// Detect builds the manifest from the files at the top of the base
// revision; read returns a file's content, or false if it is not there.
// It cannot list directories, so it looks for the names detection knows
// at the top only; DetectTree sees the whole tree.
func Detect(read func(path string) ([]byte, bool)) *Manifest {
	return DetectTree(topLevel(read))
}

// topLevel is a Tree of the well-known names at the root that read has.
type topLevel func(path string) ([]byte, bool)

func (t topLevel) ReadFile(p string) ([]byte, bool) { return t(p) }

func (t topLevel) Files() []string {
	var out []string
	for name := range knownNames {
		if _, ok := t(name); ok {
			out = append(out, name)
		}
	}
	return out
}

// fromRoot is a path relative to the root as seen from dir, which a
// command running in dir can be given.
func fromRoot(dir, p string) string {
	if dir == "" {
		return p
	}
	return strings.Repeat("../", strings.Count(dir, "/")+1) + p
}

// resultsPath names the file a check writes its results to, relative to
// the root: one per component directory and check.
func resultsPath(dir, check, ext string) string {
	return path.Join(ResultsDir, dir, check+ext)
}

// ecosystems in the order Types lists them.
var ecosystems = []string{"go", "node", "rust", "python", "dotnet", "java", "make"}

func ecoRank(e string) int { return slices.Index(ecosystems, e) }
