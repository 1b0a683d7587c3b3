package changeset

import (
	"slices"
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
