package manifest

import "strings"

// rust: a crate per Cargo.toml; a [workspace] covers every crate below it
// that it does not exclude (cargo makes path dependencies there members
// too), and its checks take --workspace.
func (d *detector) rust() {
	type crate struct {
		dir string
		t   toml
	}
	var crates []crate
	for _, p := range d.ix.named("Cargo.toml") {
		b, _ := d.ix.read(p)
		crates = append(crates, crate{dirOf(p), parseTOML(b)})
	}
	for _, r := range crates {
		if !r.t.has("workspace") || d.isCovered("rust", r.dir) {
			continue
		}
		excl := r.t.strs("workspace.exclude")
		for _, c := range crates {
			if c.dir == r.dir || !within(c.dir, r.dir) || c.t.has("workspace") {
				continue
			}
			out := false
			for _, e := range excl {
				out = out || within(rel(c.dir, r.dir), strings.Trim(e, "/"))
			}
			if !out {
				d.cover("rust", c.dir)
			}
		}
	}
	for _, cr := range crates {
		if d.isCovered("rust", cr.dir) {
			continue
		}
		p := join(cr.dir, "Cargo.toml")
		c := Component{Dir: cr.dir, Ecosystem: "rust", Adapter: "cargo", Why: p}
		var ws []string
		if cr.t.has("workspace") {
			ws = []string{"--workspace"}
			for _, o := range crates {
				if d.isCovered("rust", o.dir) && within(o.dir, cr.dir) && o.dir != cr.dir {
					c.Members = append(c.Members, o.dir)
				}
			}
			c.Why += " [workspace]"
		}
		if t, ok := d.rustVersion(cr.dir, cr.t, p); ok {
			c.Tools = []Tool{t}
		}
		cargo := func(name string, args ...string) Check {
			return Check{Name: name, Dir: cr.dir, Argv: append([]string{"cargo"}, args...), Why: p}
		}
		c.Checks = []Check{
			cargo(CheckBuild, append([]string{"build", "--offline"}, ws...)...),
			cargo(CheckLint, append(append([]string{"clippy", "--offline"}, ws...), "--all-targets")...),
			cargo(CheckTest, append([]string{"test", "--offline"}, ws...)...),
			cargo(CheckFormatCheck, "fmt", "--all", "--check"),
		}
		c.Checks[1].Adapter, c.Checks[3].Adapter = "clippy", "rustfmt"
		d.add(c)
	}
}

// rustVersion: the nearest rust-toolchain(.toml) (what rustup selects),
// else the crate's rust-version (its minimum).
func (d *detector) rustVersion(dir string, t toml, p string) (Tool, bool) {
	best := ""
	for _, name := range []string{"rust-toolchain.toml", "rust-toolchain"} {
		if q, ok := d.ix.nearest(dir, name); ok && len(q) > len(best) {
			best = q
		}
	}
	if best != "" {
		b, _ := d.ix.read(best)
		v := parseTOML(b).str("toolchain.channel")
		if v == "" && !strings.Contains(string(b), "[toolchain]") {
			v = firstLine(b) // the old form: the channel alone
		}
		if v != "" {
			return Tool{Name: "rust", Version: v, From: best}, true
		}
	}
	for _, k := range []string{"package.rust-version", "workspace.package.rust-version"} {
		if v := t.str(k); v != "" {
			return Tool{Name: "rust", Version: v, From: p + " " + k}, true
		}
	}
	return Tool{}, false
}
