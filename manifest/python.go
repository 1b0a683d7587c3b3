package manifest

import (
	"slices"
	"strings"
)

// python: a project per pyproject.toml, setup.py or tox.ini (and a
// requirements.txt at the root, as before: below the root it is too often
// docs/requirements.txt to mean a project with tests). The adapter is uv
// (uv.lock), else poetry (poetry.lock or [tool.poetry]), else tox
// (tox.ini or [tool.tox]), else python itself; tests are pytest's, with
// JUnit results, but under tox, whose environments choose their commands.
// A uv workspace root covers its members.
func (d *detector) python() {
	seen := map[string]bool{}
	var dirs []string
	addDir := func(dir string) {
		if !seen[dir] {
			seen[dir] = true
			dirs = append(dirs, dir)
		}
	}
	for _, name := range []string{"pyproject.toml", "setup.py", "tox.ini"} {
		for _, p := range d.ix.named(name) {
			addDir(dirOf(p))
		}
	}
	if d.ix.has("requirements.txt") {
		addDir("")
	}
	slices.Sort(dirs)
	py := map[string]toml{}
	for _, dir := range dirs {
		b, _ := d.ix.read(join(dir, "pyproject.toml"))
		py[dir] = parseTOML(b)
	}
	for _, dir := range dirs {
		if globs := py[dir].strs("tool.uv.workspace.members"); len(globs) > 0 && !d.isCovered("python", dir) {
			globs = append(globs, prefixed("!", py[dir].strs("tool.uv.workspace.exclude"))...)
			for _, m := range matchMembers(dir, globs, dirs) {
				d.cover("python", m)
			}
		}
	}
	for _, dir := range dirs {
		if d.isCovered("python", dir) {
			continue
		}
		t := py[dir]
		c := Component{Dir: dir, Ecosystem: "python"}
		var run []string // what runs a tool in the project's environment
		switch {
		case d.ix.has(join(dir, "uv.lock")):
			c.Adapter, c.Why = "uv", join(dir, "uv.lock")
			run = []string{"uv", "run", "--frozen", "--offline"}
		case d.ix.has(join(dir, "poetry.lock")) || t.has("tool.poetry"):
			c.Adapter, run = "poetry", []string{"poetry", "run"}
			c.Why = join(dir, "poetry.lock")
			if !d.ix.has(c.Why) {
				c.Why = join(dir, "pyproject.toml") + " [tool.poetry]"
			}
		case d.ix.has(join(dir, "tox.ini")) || t.has("tool.tox"):
			c.Adapter, c.Why = "tox", join(dir, "tox.ini")
			if !d.ix.has(c.Why) {
				c.Why = join(dir, "pyproject.toml") + " [tool.tox]"
			}
		default:
			c.Adapter, run = "python", []string{"python3", "-m"}
			for _, name := range []string{"pyproject.toml", "setup.py", "requirements.txt"} {
				if d.ix.has(join(dir, name)) {
					c.Why = join(dir, name)
					break
				}
			}
		}
		for _, o := range dirs {
			if o != dir && d.isCovered("python", o) && within(o, dir) {
				c.Members = append(c.Members, o)
			}
		}
		if len(c.Members) > 0 {
			c.Why += " ([tool.uv.workspace])"
		}
		if tool, ok := d.pythonVersion(dir, t); ok {
			c.Tools = []Tool{tool}
		}
		c.Checks = pythonChecks(dir, c.Adapter, run, t, d.ix, c.Why)
		d.add(c)
	}
}

func pythonChecks(dir, adapter string, run []string, t toml, ix *index, why string) []Check {
	if adapter == "tox" {
		return []Check{{Name: CheckTest, Dir: dir, Argv: []string{"tox"}, Runner: "tox", Why: why}}
	}
	tool := func(name string, args ...string) []string {
		if adapter == "python" && name != "pytest" {
			return append([]string{name}, args...) // a linter on PATH
		}
		return append(append(append([]string{}, run...), name), args...)
	}
	out := resultsPath(dir, CheckTest, ".junit.xml")
	checks := []Check{{Name: CheckTest, Dir: dir, Argv: tool("pytest", "-q", "-p", "no:cacheprovider", "--junitxml="+fromRoot(dir, out)),
		Results: ResultsJUnit + ":" + out, Runner: "pytest", Why: why}}
	ruff := ""
	switch {
	case t.has("tool.ruff"):
		ruff = join(dir, "pyproject.toml") + " [tool.ruff]"
	case ix.has(join(dir, "ruff.toml")):
		ruff = join(dir, "ruff.toml")
	case ix.has(join(dir, ".ruff.toml")):
		ruff = join(dir, ".ruff.toml")
	}
	if ruff != "" {
		checks = append(checks, Check{Name: CheckLint, Dir: dir, Argv: tool("ruff", "check", "."), Adapter: "ruff", Why: ruff})
	}
	switch {
	case t.has("tool.black"):
		checks = append(checks, Check{Name: CheckFormatCheck, Dir: dir, Argv: tool("black", "--check", "."), Adapter: "black", Why: join(dir, "pyproject.toml") + " [tool.black]"})
	case t.has("tool.ruff.format"):
		checks = append(checks, Check{Name: CheckFormatCheck, Dir: dir, Argv: tool("ruff", "format", "--check", "."), Adapter: "ruff", Why: join(dir, "pyproject.toml") + " [tool.ruff.format]"})
	}
	return checks
}

// pythonVersion: the nearest .python-version (what pyenv and uv select),
// else requires-python (or poetry's python dependency).
func (d *detector) pythonVersion(dir string, t toml) (Tool, bool) {
	if p, ok := d.ix.nearest(dir, ".python-version"); ok {
		b, _ := d.ix.read(p)
		if v := firstLine(b); v != "" {
			return Tool{Name: "python", Version: v, From: p}, true
		}
	}
	for _, k := range []string{"project.requires-python", "tool.poetry.dependencies.python"} {
		if v := t.str(k); v != "" {
			return Tool{Name: "python", Version: v, From: join(dir, "pyproject.toml") + " " + strings.TrimPrefix(k, "project.")}, true
		}
	}
	return Tool{}, false
}

func prefixed(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}
