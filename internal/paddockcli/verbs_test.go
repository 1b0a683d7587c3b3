package paddockcli

import (
	"strings"
	"testing"
)

// TestVerbNames: each entry of verbs builds the command it is named for,
// once, so that a call naming its verb gets that verb's command and no
// other.
func TestVerbNames(t *testing.T) {
	a := &app{getenv: func(string) string { return "" }}
	seen := map[string]bool{}
	for _, v := range a.verbs() {
		if got := v.build(a).Name(); got != v.name {
			t.Errorf("verbs lists %q but its function builds %q", v.name, got)
		}
		if seen[v.name] {
			t.Errorf("verbs lists %q twice", v.name)
		}
		seen[v.name] = true
	}
}

// TestLazyTreeResolvesAsTheFullOne: a command line resolves to the same
// command, with the same flags, whether the tree holds only the verb it
// names or every verb; and lines that name no verb (help, completion, a
// misspelling, a flag cobra would read differently) get the full tree.
func TestLazyTreeResolvesAsTheFullOne(t *testing.T) {
	a := &app{getenv: func(string) string { return "" }}
	full := rootCmd(a)
	lines := [][]string{
		{"ls", "--all"},
		{"--home", "/tmp/h", "ls"},
		{"--home=/tmp/h", "--addr", "127.0.0.1:1", "show", "r1"},
		{"project", "add", "."},
		{"exec", "r1", "--", "ls", "-l"},
		{"version", "--json"},
		{"grant", "r1", "q1"},
		{"ls", "--help"},
	}
	for _, v := range a.verbs() {
		lines = append(lines, []string{v.name})
	}
	for _, args := range lines {
		if _, ok := a.invokedVerb(args); !ok {
			t.Errorf("%q: no verb found", args)
			continue
		}
		lazy := rootCmd(a, args...)
		if n := len(lazy.Commands()); n != 1 {
			t.Errorf("%q: the tree holds %d verbs, want 1", args, n)
		}
		lc, lrest, lerr := lazy.Find(args)
		fc, frest, ferr := full.Find(args)
		if lerr != nil || ferr != nil || lc.CommandPath() != fc.CommandPath() || strings.Join(lrest, " ") != strings.Join(frest, " ") {
			t.Errorf("%q: lazy tree finds %q %q (%v), full tree %q %q (%v)", args, lc.CommandPath(), lrest, lerr, fc.CommandPath(), frest, ferr)
			continue
		}
		// Asking for the inherited flags merges them into Flags: both first.
		lin, fin := lc.InheritedFlags().FlagUsages(), fc.InheritedFlags().FlagUsages()
		if l, f := lc.Flags().FlagUsages()+lin, fc.Flags().FlagUsages()+fin; l != f {
			t.Errorf("%q: flags\n%s\nfull tree:\n%s", args, l, f)
		}
	}
	for _, args := range [][]string{
		nil, {"--help"}, {"-h", "ls"}, {"help", "ls"}, {"completion", "bash"}, {"__complete", "l"},
		{"lss"}, {"--json", "ls"}, {"--", "ls"}, {"--home"},
	} {
		if v, ok := a.invokedVerb(args); ok {
			t.Errorf("%q: verb %q, want the full tree", args, v.name)
		}
	}
}

// TestVerbTreeBudget: a command line that names its verb builds that verb
// alone (with its sub-verbs), not the whole tree (about 700 allocations,
// 0.2 ms), which would otherwise be paid by every CLI start.
func TestVerbTreeBudget(t *testing.T) {
	const budget = 200
	a := &app{getenv: func(string) string { return "" }}
	full := testing.AllocsPerRun(5, func() { rootCmd(a) })
	for _, v := range a.verbs() {
		if n := testing.AllocsPerRun(5, func() { rootCmd(a, v.name) }); n > budget || n > full/3 {
			t.Errorf("paddock %s builds its command tree in %.0f allocations (budget %d; the whole tree takes %.0f)", v.name, n, budget, full)
		}
	}
}
