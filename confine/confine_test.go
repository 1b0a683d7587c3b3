package confine

import (
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine/confinetest"
)

func TestRel(t *testing.T) {
	r := &Root{dir: "/state/ws"}
	for in, want := range map[string]string{
		"a": "a", "./a": "a", "a/b/../c": "a/c", "a//b": "a/b", ".": ".", "a/": "a",
		"/state/ws": ".", "/state/ws/": ".", "/state/ws/a/b": "a/b", "/state/ws/../ws/a": "a",
	} {
		if got, err := r.Rel(in); err != nil || got.Rel() != want {
			t.Errorf("Rel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, rule := range map[string]paddock.Rule{
		"": RuleInvalidPath, "a\x00": RuleInvalidPath, "..": RuleOutside, "../x": RuleOutside,
		"a/../../x": RuleOutside, "/state/ws-evil/x": RuleOutside, "/state/wsx": RuleOutside,
		"/state": RuleOutside, "/etc/passwd": RuleOutside, string(make([]byte, MaxPath+1)): RuleInvalidPath,
	} {
		_, err := r.Rel(in)
		pe, ok := err.(*paddock.Error)
		if !ok || pe.Rule != rule {
			t.Errorf("Rel(%q) = %v, want rule %s", in, err, rule)
		}
	}
}

func TestIsDotGit(t *testing.T) {
	yes := []string{".git", ".GIT", ".Git", ".git.", ".git ", ".git. .", ".git::$INDEX_ALLOCATION", "git~1", "GIT~9",
		"\uff0egit", ".\uff47\uff49\uff54", ".g\u200cit", ".gi\u200dt", "\ufeff.git", ".\u0261it", ".g\u0456t", ".gi\u0442",
		".g\u00adit", ".git\u200b"}
	no := []string{"git", ".gitignore", ".github", "git~0", "git~10", "x.git", ".gi", ".gitt", "..git", ".g it"}
	for _, s := range yes {
		if !IsDotGit(s) {
			t.Errorf("IsDotGit(%q) = false", s)
		}
	}
	for _, s := range no {
		if IsDotGit(s) {
			t.Errorf("IsDotGit(%q) = true", s)
		}
	}
}

func TestPolicyMatch(t *testing.T) {
	p := DefaultPolicy()
	for _, s := range []string{".git/config", "a/.GIT/x", ".codex", ".codex/a", ".vscode", ".claude", "sub/.claude", "sub/.Vscode"} {
		if p.Match(s) == "" {
			t.Errorf("%s not protected", s)
		}
	}
	for _, n := range confinetest.Protected {
		if p.Match(n.Path) == "" {
			t.Errorf("%q (%s) not protected", n.Path, n.Why)
		}
	}
	for _, n := range confinetest.Allowed {
		if why := p.Match(n.Path); why != "" {
			t.Errorf("%q (%s) protected: %s", n.Path, n.Why, why)
		}
	}
	// NFC and NFD spellings are one name, in the pattern and in the path.
	for _, pat := range []string{"caf\u00e9/**", "cafe\u0301/**"} {
		custom := &Policy{Protected: []string{pat}}
		for _, s := range []string{"caf\u00e9/x", "cafe\u0301/x", "CAF\u00c9/x", "sub/caf\u00e9/x", "caf\u00e9\u200b/x"} {
			if custom.Match(s) == "" {
				t.Errorf("pattern %q: %q not protected", pat, s)
			}
		}
		if why := custom.Match("cafe/x"); why != "" {
			t.Errorf("pattern %q: cafe/x protected: %s", pat, why)
		}
	}
}

// TestFold: ASCII only changes case; every other spelling of a name folds
// to the same string, and folding twice changes nothing.
func TestFold(t *testing.T) {
	for in, want := range map[string]string{
		"Makefile": "makefile", "l0g": "l0g", "rn": "rn", "a.b.": "a.b", ".envrc::$DATA": ".envrc",
		".vscod\u0435": ".vscode", "\uff2d\uff41\uff4b\uff45": "make", "cafe\u0301": "caf\u00e9", "CAF\u00c9": "caf\u00e9",
		"stra\u00dfe": "strasse", "\u0397\u03b7": "hn", "\u212aey": "key", "a\u00adb\u200dc\ufe0fd": "abcd",
		"\u043f\u0440\u0438\u0432\u0435\u0442": "\u043fp\u0438bet",
	} {
		if got := Fold(in); got != want {
			t.Errorf("Fold(%q) = %q, want %q", in, got, want)
		}
		if got := Fold(Fold(in)); got != Fold(in) {
			t.Errorf("Fold(Fold(%q)) = %q, not %q", in, got, Fold(in))
		}
	}
	for r := range lookalikes {
		if f := Fold(string(r) + "x"); f != string(lookalikes[r])+"x" && f != Fold(string(lookalikes[r])+"x") {
			t.Errorf("Fold(%q) = %q", string(r)+"x", f)
		}
	}
}

func TestPolicyHooks(t *testing.T) {
	p := &Policy{Hooks: []string{"scripts/git"}}
	for _, s := range []string{"scripts/git", "scripts/git/pre-commit", "Scripts/GIT/post-checkout", "scripts", "scripts/git/new/deep"} {
		if p.Match(s) == "" || p.MatchHooks(s) == "" {
			t.Errorf("%s not protected", s)
		}
	}
	for _, s := range []string{"scripts/gitx", "scripts/other.sh", "src/scripts/git/pre-commit", "pre-commit"} {
		if why := p.Match(s); why != "" {
			t.Errorf("%s protected: %s", s, why)
		}
	}
	top := &Policy{Hooks: []string{"."}}
	if top.Match("pre-commit") == "" || top.Match("Post-Checkout") == "" || top.Match("README.md") != "" || top.Match("src") != "" {
		t.Error("hooks at the top: only git's hook names are protected")
	}
}

// TestAlike: names that fold to one are told apart by how they differ;
// names that fold apart, and equal names, are not alike.
func TestAlike(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"caf\u00e9.txt", "cafe\u0301.txt", AlikeNormalisation},
		{"docs/caf\u00e9", "docs/cafe\u0301", AlikeNormalisation},
		{"README.md", "readme.md", AlikeCase},
		{"Docs/a.md", "docs/a.md", AlikeCase},
		{"CAF\u00c9.txt", "cafe\u0301.txt", AlikeCase},
		{"stra\u00dfe", "STRASSE", AlikeCase},
		{"p\u0430ypal.txt", "paypal.txt", AlikeSpelling},
		{"a\u200bb.txt", "ab.txt", AlikeSpelling},
		{"notes.txt.", "notes.txt", AlikeSpelling},
		{"README.md", "README.md", ""},
		{"README.md", "README.txt", ""},
		{"docs/a", "doc/sa", ""},
	} {
		if got := Alike(c.a, c.b); got != c.want {
			t.Errorf("Alike(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
		if got := Alike(c.b, c.a); got != c.want {
			t.Errorf("Alike(%q, %q) = %q, want %q", c.b, c.a, got, c.want)
		}
	}
}
