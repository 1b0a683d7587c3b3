package manifest

import (
	"encoding/json"
	"path"
	"strings"
)

var dotnetEnv = []string{"DOTNET_CLI_TELEMETRY_OPTOUT=1", "DOTNET_NOLOGO=1"}

// dotnet: a solution (.sln, .slnx) covers the projects it lists; a project
// no solution lists is a component of its own, tested only if it is a
// test project. One solution or project per directory (the first by name).
func (d *detector) dotnet() {
	covered := map[string]bool{}
	seen := map[string]bool{}
	var slns []string
	for _, ext := range []string{".sln", ".slnx"} {
		slns = append(slns, d.ix.named(ext)...)
	}
	for _, sln := range slns {
		b, _ := d.ix.read(sln)
		for _, p := range slnProjects(b) {
			covered[cleanJoin(dirOf(sln), p)] = true
		}
	}
	for _, sln := range slns {
		dir := dirOf(sln)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		c := Component{Dir: dir, Ecosystem: "dotnet", Adapter: "dotnet", Why: sln}
		b, _ := d.ix.read(sln)
		for _, p := range slnProjects(b) {
			if m := dirOf(cleanJoin(dir, p)); m != dir {
				c.Members = append(c.Members, m)
			}
		}
		d.dotnetComponent(c, path.Base(sln), true)
	}
	for _, ext := range []string{".csproj", ".fsproj", ".vbproj"} {
		for _, p := range d.ix.named(ext) {
			dir := dirOf(p)
			if covered[p] || seen[dir] {
				continue
			}
			seen[dir] = true
			b, _ := d.ix.read(p)
			s := string(b)
			test := strings.Contains(s, "Microsoft.NET.Test.Sdk") || strings.Contains(s, "<IsTestProject>true")
			d.dotnetComponent(Component{Dir: dir, Ecosystem: "dotnet", Adapter: "dotnet", Why: p}, path.Base(p), test)
		}
	}
}

func (d *detector) dotnetComponent(c Component, target string, test bool) {
	if p, ok := d.ix.nearest(c.Dir, "global.json"); ok {
		b, _ := d.ix.read(p)
		var g struct {
			SDK struct {
				Version string `json:"version"`
			} `json:"sdk"`
		}
		if json.Unmarshal(b, &g) == nil && g.SDK.Version != "" {
			c.Tools = []Tool{{Name: "dotnet", Version: g.SDK.Version, From: p + " sdk.version"}}
		}
	}
	ch := func(name string, args ...string) Check {
		return Check{Name: name, Dir: c.Dir, Env: dotnetEnv, Argv: append([]string{"dotnet"}, args...), Why: c.Why}
	}
	c.Checks = []Check{ch(CheckBuild, "build", target)}
	if test {
		dir := path.Join(ResultsDir, c.Dir, "test-trx")
		t := ch(CheckTest, "test", target, "--logger", "trx", "--results-directory", fromRoot(c.Dir, dir))
		t.Results, t.Runner = ResultsTRX+":"+dir+"/*.trx", "vstest"
		c.Checks = append(c.Checks, t)
	}
	if path.Ext(target) != ".fsproj" { // dotnet format reads C# and VB, not F#
		c.Checks = append(c.Checks, ch(CheckFormatCheck, "format", target, "--verify-no-changes"))
	}
	d.add(c)
}

// slnProjects lists the project files a solution names, slash-separated
// and relative to it: .sln's Project(...) lines, .slnx's Path attributes.
func slnProjects(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		var p string
		switch {
		case strings.HasPrefix(l, "Project("):
			if f := quoted(l); len(f) >= 3 {
				p = f[2]
			}
		case strings.HasPrefix(l, "<Project "):
			p = between(l, `Path="`, `"`)
		}
		p = strings.ReplaceAll(p, `\`, "/")
		if ext := path.Ext(p); ext == ".csproj" || ext == ".fsproj" || ext == ".vbproj" {
			out = append(out, p)
		}
	}
	return out
}
