package manifest

import (
	"slices"
	"strings"
)

// gofmtCheck fails when a file is not gofmt-ed; testdata and vendor are
// left out as the go command leaves them out (gofmt -l alone lists them,
// and exits 0 whatever it finds). Files gofmt cannot parse are the build's
// to report.
const gofmtCheck = `out=$(gofmt -l . 2>/dev/null | grep -v -E '(^|/)(testdata|vendor)/'); ` +
	`[ -z "$out" ] || { printf 'not gofmt-ed:\n%s\n' "$out"; exit 1; }`

// golang: a module per go.mod; a go.work covers the modules it uses, and
// its checks run in each of them (./... stops at a module's boundary).
func (d *detector) golang() {
	var mods []string
	for _, p := range d.ix.named("go.mod") {
		mods = append(mods, dirOf(p))
	}
	workRoots := map[string]bool{}
	for _, p := range d.ix.named("go.work") {
		b, _ := d.ix.read(p)
		root := dirOf(p)
		workRoots[root] = true
		c := Component{Dir: root, Ecosystem: "go", Adapter: "go", Why: p + " (a Go workspace: its checks run in each module it uses)"}
		c.Tools = goTool(p, b)
		for _, u := range goWorkUses(b) {
			dir := cleanJoin(root, u)
			if !slices.Contains(mods, dir) {
				continue
			}
			c.Members = append(c.Members, dir)
			d.cover("go", dir)
			if len(c.Tools) == 0 {
				mb, _ := d.ix.read(join(dir, "go.mod"))
				c.Tools = goTool(join(dir, "go.mod"), mb)
			}
			c.Checks = append(c.Checks, goChecks(dir, "module "+join(dir, "go.mod")+" used by "+p, nil)...)
		}
		d.add(c)
	}
	for _, dir := range mods {
		if d.isCovered("go", dir) {
			continue
		}
		p := join(dir, "go.mod")
		b, _ := d.ix.read(p)
		c := Component{Dir: dir, Ecosystem: "go", Adapter: "go", Why: p, Tools: goTool(p, b)}
		var env []string
		// A module below a go.work that does not use it: the go command
		// refuses to work in it unless the workspace is off.
		for r := dir; ; r = parent(r) {
			if workRoots[r] {
				env = []string{"GOWORK=off"}
				c.Why += " (not used by " + join(r, "go.work") + ": GOWORK=off)"
				break
			}
			if r == "" {
				break
			}
		}
		c.Checks = goChecks(dir, p, env)
		d.add(c)
	}
}

func goChecks(dir, why string, env []string) []Check {
	return []Check{
		{Name: CheckBuild, Dir: dir, Env: env, Argv: []string{"go", "build", "./..."}, Why: why},
		{Name: CheckLint, Dir: dir, Env: env, Argv: []string{"go", "vet", "./..."}, Why: why},
		{Name: CheckTest, Dir: dir, Env: env, Argv: []string{"go", "test", "-json", "./..."}, Results: ResultsGoTestJSON, Runner: "go test", Why: why},
		{Name: CheckFormatCheck, Dir: dir, Env: env, Argv: []string{"sh", "-c", gofmtCheck}, Adapter: "gofmt", Why: why},
	}
}

// goTool is the Go version a go.mod or go.work states: its toolchain line
// (the toolchain the go command selects), else its go line (the minimum).
func goTool(p string, b []byte) []Tool {
	var goLine, toolchain string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(stripSlashComment(l))
		if len(f) == 2 && f[0] == "go" {
			goLine = f[1]
		}
		if len(f) == 2 && f[0] == "toolchain" {
			toolchain = f[1]
		}
	}
	switch {
	case toolchain != "" && toolchain != "default":
		return []Tool{{Name: "go", Version: strings.TrimPrefix(toolchain, "go"), From: p + " toolchain"}}
	case goLine != "":
		return []Tool{{Name: "go", Version: goLine, From: p + " go"}}
	}
	return nil
}

func stripSlashComment(l string) string {
	l, _, _ = strings.Cut(l, "//")
	return l
}

// goWorkUses lists a go.work's use directives, single or in a block.
func goWorkUses(b []byte) []string {
	var out []string
	block := false
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(stripSlashComment(l))
		switch {
		case len(f) == 0:
		case block && f[0] == ")":
			block = false
		case block:
			out = append(out, strings.Trim(f[0], `"`))
		case f[0] == "use" && len(f) >= 2 && f[1] == "(":
			block = true
		case f[0] == "use" && len(f) >= 2:
			out = append(out, strings.Trim(f[1], `"`))
		}
	}
	return out
}

// cleanJoin joins a relative path from a file to its directory, as the
// root-relative directory it names ("" for the root).
func cleanJoin(dir, p string) string {
	parts := splitPath(dir)
	for _, s := range strings.Split(p, "/") {
		switch s {
		case "", ".":
		case "..":
			if len(parts) > 0 {
				parts = parts[:len(parts)-1]
			}
		default:
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "/")
}
