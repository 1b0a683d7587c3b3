package manifest

import (
	"encoding/json"
	"slices"
	"strings"
)

type packageJSON struct {
	Scripts        map[string]string `json:"scripts"`
	PackageManager string            `json:"packageManager"`
	Workspaces     json.RawMessage   `json:"workspaces"`
	Engines        map[string]any    `json:"engines"`
}

// workspaceGlobs reads "workspaces": an array, or {"packages": [...]}.
func (p packageJSON) workspaceGlobs() []string {
	var globs []string
	if json.Unmarshal(p.Workspaces, &globs) == nil {
		return globs
	}
	var obj struct {
		Packages []string `json:"packages"`
	}
	json.Unmarshal(p.Workspaces, &obj)
	return obj.Packages
}

// lockfiles choose the package manager when packageManager does not.
var lockfiles = []struct{ file, pm string }{
	{"pnpm-lock.yaml", "pnpm"}, {"bun.lockb", "bun"}, {"bun.lock", "bun"},
	{"yarn.lock", "yarn"}, {"package-lock.json", "npm"}, {"npm-shrinkwrap.json", "npm"},
}

// Node scripts that are checks, by check, in the order they are looked for.
// "format" rewrites files and is never a check.
var nodeScripts = []struct {
	check string
	names []string
}{
	{CheckBuild, []string{"build"}},
	{CheckLint, []string{"lint"}},
	{CheckTest, []string{"test"}},
	{CheckFormatCheck, []string{"format:check", "format-check", "fmt:check", "check:format", "check-format", "prettier:check"}},
}

// node: a package per package.json; a workspace root covers its members.
func (d *detector) node() {
	pkgs := map[string]packageJSON{}
	var dirs []string
	for _, p := range d.ix.named("package.json") {
		b, _ := d.ix.read(p)
		var pkg packageJSON
		json.Unmarshal(b, &pkg)
		dir := dirOf(p)
		pkgs[dir] = pkg
		dirs = append(dirs, dir)
	}
	// Roots first: a member is seen after its root has claimed it.
	members := map[string][]string{}
	for _, dir := range dirs {
		if d.isCovered("node", dir) {
			continue
		}
		globs := pkgs[dir].workspaceGlobs()
		if b, ok := d.ix.read(join(dir, "pnpm-workspace.yaml")); ok {
			globs = append(globs, pnpmPackages(b)...)
		}
		for _, m := range matchMembers(dir, globs, dirs) {
			if !d.isCovered("node", m) {
				d.cover("node", m)
				members[dir] = append(members[dir], m)
			}
		}
	}
	// A package below a workspace root that is not one of its members is
	// not a package the package manager installs (pnpm's "!**/test/**"):
	// a fixture, not a component.
	for _, dir := range dirs {
		for root := range members {
			if dir != root && within(dir, root) {
				d.cover("node", dir)
			}
		}
	}
	for _, dir := range dirs {
		if d.isCovered("node", dir) {
			continue
		}
		pkg := pkgs[dir]
		pm, pmTool := d.packageManager(dir, pkgs)
		c := Component{Dir: dir, Ecosystem: "node", Adapter: pm, Members: members[dir], Why: join(dir, "package.json")}
		if pmTool.Name != "" {
			c.Tools = append(c.Tools, pmTool)
		}
		if t, ok := d.nodeVersion(dir, pkg); ok {
			c.Tools = append(c.Tools, t)
		}
		if len(c.Members) > 0 {
			c.Why += " (a workspace root: a root script covers its members; otherwise each member's runs)"
		}
		for _, s := range nodeScripts {
			if ch, ok := nodeCheck(dir, pkg, s.check, s.names); ok {
				c.Checks = append(c.Checks, ch)
				continue
			}
			for _, m := range c.Members {
				if ch, ok := nodeCheck(m, pkgs[m], s.check, s.names); ok {
					c.Checks = append(c.Checks, ch)
				}
			}
		}
		d.add(c)
	}
}

// nodeCheck is a package's script for a check, inlined as the base wrote
// it with the package's binaries on PATH (as npm run does).
func nodeCheck(dir string, pkg packageJSON, check string, names []string) (Check, bool) {
	for _, name := range names {
		s, ok := pkg.Scripts[name]
		if !ok || strings.TrimSpace(s) == "" {
			continue
		}
		if check == CheckTest && strings.Contains(s, "no test specified") {
			return Check{}, false // npm init's placeholder, which always fails
		}
		ch := Check{Name: check, Dir: dir, Why: join(dir, "package.json") + ` scripts["` + name + `"]`}
		env := ""
		if check == CheckTest {
			// Runners read CI: no watch mode, no snapshots written. Only
			// tests: some builds fail on warnings under CI (react-scripts).
			env = "export CI=true; "
			ch.Runner = nodeRunner(s)
			// Only vitest writes JUnit by itself beside its usual report:
			// jest needs the jest-junit package, mocha's xunit reporter
			// replaces the console's, and node --test's junit reporter is
			// newer than many a node that runs it.
			if ch.Runner == "vitest" && plainVitest(s) {
				out := resultsPath(dir, check, ".junit.xml")
				s += " --reporter=default --reporter=junit --outputFile.junit=" + shellQuote(fromRoot(dir, out))
				ch.Results = ResultsJUnit + ":" + out
			}
		}
		ch.Argv = []string{"sh", "-c", env + `PATH="$PWD/node_modules/.bin:$PATH"; ` + s}
		return ch, true
	}
	return Check{}, false
}

// plainVitest reports whether a script is one vitest command and nothing
// else (no shell syntax), to which flags can be appended safely.
func plainVitest(script string) bool {
	f := strings.Fields(script)
	if len(f) == 0 || f[0] != "vitest" {
		return false
	}
	for _, a := range f[1:] {
		for _, r := range a {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./=:", r)) {
				return false
			}
		}
	}
	return true
}

var nodeRunners = []string{"jest", "vitest", "mocha", "ava", "tap", "jasmine", "karma", "playwright", "cypress"}

// nodeRunner names the test runner a test script calls, if it is a known
// one: the first word that names one (node --test is node's own).
func nodeRunner(script string) string {
	words := strings.FieldsFunc(script, func(r rune) bool { return strings.ContainsRune(" \t\n;&|()", r) })
	for i, w := range words {
		w = w[strings.LastIndexByte(w, '/')+1:]
		if slices.Contains(nodeRunners, w) {
			return w
		}
		if w == "node" && i+1 < len(words) && words[i+1] == "--test" {
			return "node --test"
		}
	}
	return ""
}

// packageManager: the packageManager field of the package or the nearest
// package above it that has one or a lockfile, else npm.
func (d *detector) packageManager(dir string, pkgs map[string]packageJSON) (string, Tool) {
	for r := dir; ; r = parent(r) {
		if pm := pkgs[r].PackageManager; pm != "" {
			name, version, _ := strings.Cut(pm, "@")
			version, _, _ = strings.Cut(version, "+") // drop the hash
			return name, Tool{Name: name, Version: version, From: join(r, "package.json") + " packageManager"}
		}
		for _, l := range lockfiles {
			if d.ix.has(join(r, l.file)) {
				return l.pm, Tool{}
			}
		}
		if r == "" {
			return "npm", Tool{}
		}
	}
}

// nodeVersion: .nvmrc or .node-version nearest the package, else its
// engines.node.
func (d *detector) nodeVersion(dir string, pkg packageJSON) (Tool, bool) {
	best := ""
	for _, name := range []string{".nvmrc", ".node-version"} {
		if p, ok := d.ix.nearest(dir, name); ok && len(p) > len(best) {
			best = p
		}
	}
	if best != "" {
		b, _ := d.ix.read(best)
		if v := strings.TrimPrefix(firstLine(b), "v"); v != "" {
			return Tool{Name: "node", Version: v, From: best}, true
		}
	}
	if v, ok := pkg.Engines["node"].(string); ok && v != "" {
		return Tool{Name: "node", Version: v, From: join(dir, "package.json") + " engines.node"}, true
	}
	return Tool{}, false
}

// pnpmPackages reads pnpm-workspace.yaml's packages list (block or flow).
func pnpmPackages(b []byte) []string {
	var out []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimRight(stripComment(l), " \t\r")
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "packages:"):
			rest := strings.TrimSpace(strings.TrimPrefix(l, "packages:"))
			if strings.HasPrefix(rest, "[") {
				return quotedOrBare(strings.Trim(rest, "[]"))
			}
			in = true
		case in && strings.HasPrefix(t, "- "):
			out = append(out, unquote(strings.TrimSpace(t[2:])))
		case in && t != "" && l[0] != ' ' && l[0] != '\t':
			in = false
		}
	}
	return out
}

func quotedOrBare(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = unquote(strings.TrimSpace(f)); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// shellQuote quotes s for sh: a directory's name is the base's, not a
// script's.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func unquote(s string) string { return strings.Trim(s, `"'`) }
