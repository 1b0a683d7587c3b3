package changeset

import (
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/confine/confinetest"
)

func labelled(t *testing.T, p string, policy *confine.Policy) paddock.ChangeEntry {
	t.Helper()
	e := paddock.ChangeEntry{Path: p, Op: paddock.OpCreate, NewMode: "100644", NewBlob: "1111111111111111111111111111111111111111"}
	label(&e, t.TempDir(), policy)
	return e
}

// TestProtectedNamesNeverApplied: every spelling of protected agent and
// editor configuration (case, depth, look-alikes, invisible characters,
// what Windows trims) is labelled and never applied, as the exact name is;
// the names beside them are applied.
func TestProtectedNamesNeverApplied(t *testing.T) {
	t.Parallel()
	policy := confine.DefaultPolicy()
	for _, n := range confinetest.Protected {
		e := labelled(t, n.Path, policy)
		if e.Blocked == "" || !slices.Contains(e.Risks, "agent_config") {
			t.Errorf("%q (%s): blocked %q, risks %v; want never applied and agent_config", n.Path, n.Why, e.Blocked, e.Risks)
		}
	}
	for _, n := range confinetest.Allowed {
		if e := labelled(t, n.Path, policy); e.Blocked != "" || slices.Contains(e.Risks, "agent_config") {
			t.Errorf("%q (%s): blocked %q, risks %v; want it applied", n.Path, n.Why, e.Blocked, e.Risks)
		}
	}
	// A project that drops the defaults gets them applied.
	if e := labelled(t, "sub/.envrc", &confine.Policy{}); e.Blocked != "" {
		t.Errorf("sub/.envrc under an empty policy: blocked %q", e.Blocked)
	}
	// A project's own patterns (project add or set --protect) label and
	// block as the defaults do.
	own := &confine.Policy{Protected: append(append([]string{}, confine.DefaultProtected...), ".idea/runConfigurations/**", "tools/hooks/*.sh")}
	for _, p := range []string{".idea/runConfigurations/x.xml", "sub/.IDEA/runConfigurations/y.xml", "tools/hooks/pre.sh", ".envrc"} {
		if e := labelled(t, p, own); e.Blocked == "" || !slices.Contains(e.Risks, "agent_config") {
			t.Errorf("%q under the project's own patterns: blocked %q, risks %v", p, e.Blocked, e.Risks)
		}
	}
}

// TestSteeringLabels: what runs code or steers the next agent is labelled,
// by folding and at any depth, and nothing near it is.
func TestSteeringLabels(t *testing.T) {
	t.Parallel()
	policy := confine.DefaultPolicy()
	for _, p := range confinetest.RunsCode {
		if e := labelled(t, p, policy); !slices.Contains(e.Risks, "runs_code") || e.Blocked != "" {
			t.Errorf("%q: risks %v, blocked %q; want runs_code only", p, e.Risks, e.Blocked)
		}
	}
	for _, p := range confinetest.AgentInstructions {
		if e := labelled(t, p, policy); !slices.Contains(e.Risks, "agent_instructions") || e.Blocked != "" {
			t.Errorf("%q: risks %v, blocked %q; want agent_instructions only", p, e.Risks, e.Blocked)
		}
	}
	for _, p := range confinetest.Unlabelled {
		if e := labelled(t, p, policy); slices.Contains(e.Risks, "runs_code") || slices.Contains(e.Risks, "agent_instructions") {
			t.Errorf("%q: risks %v", p, e.Risks)
		}
	}
}

// TestSuspiciousNames: a look-alike or invisible character is labelled; an
// ordinary name in another script, or in NFD, is not.
func TestSuspiciousNames(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]bool{
		"src/.vscod\u0435/x": true, "\u0441\u043e\u0440.txt": true, "a\u200bb.txt": true, "\uff41.txt": true,
		"sub/\u0261o.mod": true, "p\u0430ypal.txt": true,
		"caf\u00e9.txt": false, "cafe\u0301.txt": false, "stra\u00dfe.txt": false,
		"\u043f\u0440\u0438\u0432\u0435\u0442.txt": false, "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac.md": false, "main.go": false,
	} {
		if got := suspiciousName(p); got != want {
			t.Errorf("suspiciousName(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestNameCollisions: a path of the change set, or a directory on it, that
// is another path of the result (in the change set or in the base) but for
// Unicode normalisation, case or a look-alike is labelled name_collision,
// with a note naming the other path and how they differ; a pair the base
// had already, a rename by case and ordinary names are not. A created name
// not in NFC is labelled unnormalised_name.
func TestNameCollisions(t *testing.T) {
	t.Parallel()
	const nfc, nfd = "caf\u00e9.txt", "cafe\u0301.txt"
	create := func(p string) paddock.ChangeEntry { return paddock.ChangeEntry{Path: p, Op: paddock.OpCreate} }
	modify := func(p string) paddock.ChangeEntry { return paddock.ChangeEntry{Path: p, Op: paddock.OpModify} }
	del := func(p string) paddock.ChangeEntry { return paddock.ChangeEntry{Path: p, Op: paddock.OpDelete} }
	for _, tc := range []struct {
		name    string
		base    map[string][]string
		entries []paddock.ChangeEntry
		want    map[string]string // path → the note's expected words ("" no label)
		nfd     []string          // paths labelled unnormalised_name
	}{
		{"composed and decomposed, both new", nil, []paddock.ChangeEntry{create(nfc), create(nfd)},
			map[string]string{nfc: nfd + " (in the change set): they differ only in Unicode normalisation",
				nfd: nfc + " (in the change set): they differ only in Unicode normalisation"}, []string{nfd}},
		{"decomposed beside the base's composed", map[string][]string{"": {nfc, "x"}}, []paddock.ChangeEntry{create(nfd)},
			map[string]string{nfd: nfc + " (in the base): they differ only in Unicode normalisation"}, []string{nfd}},
		{"case beside the base", map[string][]string{"": {"README.md"}}, []paddock.ChangeEntry{create("readme.md")},
			map[string]string{"readme.md": "README.md (in the base): they differ only in case"}, nil},
		{"case, one modified", map[string][]string{"": {"README.md"}}, []paddock.ChangeEntry{modify("README.md"), create("readme.md")},
			map[string]string{"README.md": "readme.md (in the change set): they differ only in case",
				"readme.md": "README.md (in the base): they differ only in case"}, nil},
		{"case, both new without a base", nil, []paddock.ChangeEntry{create("README.md"), create("readme.md")},
			map[string]string{"README.md": "case", "readme.md": "case"}, nil},
		{"a directory in another case", map[string][]string{"": {"docs"}, "docs": {"a.md"}}, []paddock.ChangeEntry{create("Docs/b.md"), modify("docs/a.md")},
			map[string]string{"Docs/b.md": "its directory Docs collides with docs (in the base): they differ only in case",
				"docs/a.md": "its directory docs collides with Docs (in the change set)"}, nil},
		{"a look-alike", map[string][]string{"": {"paypal.txt"}}, []paddock.ChangeEntry{create("p\u0430ypal.txt")},
			map[string]string{"p\u0430ypal.txt": "paypal.txt (in the base): they differ only in look-alike"}, nil},
		{"the base's own pair", map[string][]string{"": {"README.md", "readme.md"}}, []paddock.ChangeEntry{modify("README.md"), modify("readme.md")},
			map[string]string{"README.md": "", "readme.md": ""}, nil},
		{"a rename by case", map[string][]string{"": {"README.md"}}, []paddock.ChangeEntry{del("README.md"), create("readme.md")},
			map[string]string{"README.md": "", "readme.md": ""}, nil},
		{"ordinary names", map[string][]string{"": {"a.txt", "src"}, "src": {"main.go"}}, []paddock.ChangeEntry{create("b.txt"), create("src/util.go"), create(nfc)},
			map[string]string{"b.txt": "", "src/util.go": "", nfc: ""}, nil},
	} {
		labelNames(tc.entries, tc.base)
		for _, e := range tc.entries {
			w, ok := tc.want[e.Path]
			if !ok {
				continue
			}
			has := slices.Contains(e.Risks, "name_collision")
			switch {
			case w == "" && (has || e.Notes["name_collision"] != ""):
				t.Errorf("%s: %q: risks %v, notes %v; want no collision", tc.name, e.Path, e.Risks, e.Notes)
			case w != "" && (!has || !strings.Contains(e.Notes["name_collision"], w)):
				t.Errorf("%s: %q: risks %v, note %q; want name_collision with %q", tc.name, e.Path, e.Risks, e.Notes["name_collision"], w)
			}
			if got := slices.Contains(e.Risks, "unnormalised_name"); got != slices.Contains(tc.nfd, e.Path) {
				t.Errorf("%s: %q: risks %v; unnormalised_name %v", tc.name, e.Path, e.Risks, !got)
			}
		}
	}
}
