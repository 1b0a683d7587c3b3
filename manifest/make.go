package manifest

import "strings"

// makeChecks map a Makefile's targets to checks, in the order they are
// looked for. fmt and format usually rewrite files: they are recognised
// (Component.Targets) but are not checks.
var makeChecks = []struct {
	check   string
	targets []string
}{
	{CheckBuild, []string{"build"}},
	{CheckLint, []string{"lint"}},
	{CheckTest, []string{"test", "check"}},
	{CheckFormatCheck, []string{"format-check", "fmt-check", "check-format", "check-fmt", "fmtcheck"}},
}

var makeKnown = []string{"all", "build", "check", "fmt", "fmt-check", "fmtcheck", "check-fmt", "format", "format-check", "check-format", "lint", "test"}

// make: a Makefile per directory (GNUmakefile, makefile, Makefile: the
// first make reads), staged from the base and run with make -f. A target
// becomes a check only where no other component in the directory declares
// that check.
func (d *detector) make() {
	done := map[string]bool{}
	for _, name := range []string{"GNUmakefile", "makefile", "Makefile"} {
		for _, p := range d.ix.named(name) {
			dir := dirOf(p)
			if done[dir] {
				continue
			}
			done[dir] = true
			b, _ := d.ix.read(p)
			targets := makefileTargets(b)
			c := Component{Dir: dir, Ecosystem: "make", Adapter: "make", Why: p}
			for _, t := range makeKnown {
				if targets[t] {
					c.Targets = append(c.Targets, t)
				}
			}
			taken := map[string]string{} // check → the adapter declaring it
			for _, o := range d.m.Components {
				if o.Dir == dir {
					for _, ch := range o.Checks {
						taken[ch.Name] = o.Adapter
					}
				}
			}
			var left []string
			for _, mc := range makeChecks {
				for _, t := range mc.targets {
					if targets[t] && taken[mc.check] != "" {
						left = append(left, t+" ("+mc.check+" is "+taken[mc.check]+"'s)")
						break
					}
					if targets[t] {
						staged := d.stage(p, b, dir)
						c.Checks = append(c.Checks, Check{Name: mc.check, Dir: dir, Argv: []string{"make", "-f", staged, t},
							Why: p + " target " + t + " (staged from the base)"})
						break
					}
				}
			}
			if len(left) > 0 {
				c.Why += "; not run: " + strings.Join(left, ", ")
			}
			d.add(c)
		}
	}
}

// makefileTargets lists the explicit targets a Makefile's rule lines name:
// "name other: prerequisites", not recipes, assignments (:=, ::=, a
// name = value with a colon later), pattern rules or special targets.
func makefileTargets(b []byte) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '\t' || line[0] == ' ' || line[0] == '#' {
			continue
		}
		before, after, ok := strings.Cut(line, ":")
		if !ok || strings.ContainsAny(before, "=$%") || strings.HasPrefix(after, "=") || strings.HasPrefix(after, ":=") {
			continue
		}
		for _, t := range strings.Fields(before) {
			if !strings.HasPrefix(t, ".") {
				out[t] = true
			}
		}
	}
	return out
}
