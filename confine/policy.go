package confine

import (
	"path"
	"strings"
	"unicode"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/paddock-dev/paddock"
)

// DefaultProtected lists the agent and editor configuration that runs code
// when a person opens the project, or steers the next agent. Patterns use
// doublestar syntax and match case-insensitively after folding.
var DefaultProtected = []string{
	".claude/settings*.json",
	".claude/hooks/**",
	".codex/**",
	".cursor/**",
	".mcp.json",
	".vscode/settings.json",
	".vscode/tasks.json",
	".vscode/launch.json",
	".devcontainer/**",
	".envrc",
	".paddock/**",
}

// Policy says which paths inside a workspace agents may not write. The .git
// rule is not part of it: it always holds.
type Policy struct {
	Protected []string `json:"protected"`
	// Hooks are the directories the project's git runs hooks from
	// (core.hooksPath inside the project, read from its config: see
	// gitx.HooksPaths), protected as .git/hooks is. "." is the project's
	// top, where only the names of git's hooks are protected.
	Hooks []string `json:"hooks,omitempty"`
}

// HookNames are the hooks git runs, by the names it looks for in a hooks
// directory.
var HookNames = []string{"applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
	"prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge", "pre-push",
	"pre-receive", "update", "proc-receive", "post-receive", "post-update", "reference-transaction",
	"push-to-checkout", "pre-auto-gc", "post-rewrite", "sendemail-validate", "fsmonitor-watchman",
	"p4-changelist", "p4-prepare-changelist", "p4-post-changelist", "p4-pre-submit", "post-index-change"}

// HookPaths are the paths the hooks directories stand for: each directory
// whole, or at the project's top each hook's name.
func (p *Policy) HookPaths() []string {
	var out []string
	for _, h := range p.Hooks {
		if h == "." || h == "" {
			out = append(out, HookNames...)
			continue
		}
		out = append(out, h)
	}
	return out
}

// MatchHooks returns why rel (clean, slash-separated) is protected as the
// project's git hooks, or "": it is a hook, under a hooks directory, or a
// directory above one (which a move or a link could put elsewhere).
func (p *Policy) MatchHooks(rel string) string {
	folded := foldPath(rel)
	for _, h := range p.HookPaths() {
		fh := foldPath(h)
		switch {
		case folded == fh || strings.HasPrefix(folded, fh+"/"):
			return "the project's git hooks (core.hooksPath " + h + "): git runs what is there"
		case strings.HasPrefix(fh, folded+"/"):
			return "a directory holding the project's git hooks (core.hooksPath " + h + ")"
		}
	}
	return ""
}

func foldPath(rel string) string {
	parts := strings.Split(rel, "/")
	for i := range parts {
		parts[i] = Fold(parts[i])
	}
	return strings.Join(parts, "/")
}

// DefaultPolicy returns the default policy.
func DefaultPolicy() *Policy { return &Policy{Protected: DefaultProtected} }

// Validate checks the patterns.
func (p *Policy) Validate() error {
	for _, pat := range p.Protected {
		if !doublestar.ValidatePattern(pat) || strings.HasPrefix(pat, "/") {
			return paddock.Errorf(paddock.CodeBadRequest, "invalid protected-path pattern %q", pat)
		}
	}
	return nil
}

// Match returns why rel (clean, slash-separated) is protected, or "".
func (p *Policy) Match(rel string) string {
	parts := strings.Split(rel, "/")
	for i := range parts {
		if IsDotGit(parts[i]) {
			return "a path under .git (git's own files, hooks and config run code on the host)"
		}
		parts[i] = Fold(parts[i])
	}
	folded := strings.Join(parts, "/")
	if why := p.MatchHooks(rel); why != "" {
		return why
	}
	for _, pat := range p.Protected {
		lp := strings.ToLower(pat)
		if ok, _ := doublestar.Match(lp, folded); ok {
			return "agent or editor configuration (" + pat + ")"
		}
		// A directory that holds protected files is protected as a whole
		// from moves and deletes: check the pattern's directories too.
		for d := path.Dir(lp); d != "." && d != "/"; d = path.Dir(d) {
			if !strings.ContainsAny(d, "*?[{") && d == folded {
				return "a directory holding agent or editor configuration (" + pat + ")"
			}
		}
	}
	return ""
}

// ignorable code points are dropped before comparing names: HFS+ ignores
// them when it looks a name up (git's is_hfs_dotgit), and they are invisible.
func ignorable(r rune) bool {
	switch {
	case r == 0x00AD, r == 0x034F, r == 0x180E, r == 0xFEFF, r == 0x061C:
		return true
	case r >= 0x200B && r <= 0x200F, r >= 0x202A && r <= 0x202E, r >= 0x2060 && r <= 0x206F:
		return true
	case r >= 0xFE00 && r <= 0xFE0F, r >= 0x180B && r <= 0x180D:
		return true
	}
	return false
}

// lookalikes maps letters that render like the ASCII letters of ".git".
var lookalikes = map[rune]rune{
	'\u0261': 'g', '\u0262': 'g', '\u01E5': 'g', // script g, small capital G, g with stroke
	'\u0131': 'i', '\u0456': 'i', '\u0269': 'i', '\u026A': 'i', '\u03B9': 'i', '\u1FBE': 'i', // dotless i, Cyrillic i, iota, small capital I
	'\u0442': 't', '\u03C4': 't', '\u1D1B': 't', // Cyrillic te, tau, small capital T
	'\u2024': '.', '\u2E2E': '.', '\u00B7': '.', '\u2219': '.', // one dot leader, punctus, middle dot, bullet operator
	'\u212A': 'k', // Kelvin sign
}

// Fold reduces a name to what a case-insensitive, normalizing file system
// (NTFS, HFS+, APFS) or a human eye would take it for: ignorable code points
// dropped, full-width forms and look-alikes mapped to ASCII, lower-cased, an
// NTFS stream suffix (":…") cut and trailing dots and spaces removed.
func Fold(name string) string {
	var b strings.Builder
	for _, r := range name {
		if ignorable(r) {
			continue
		}
		if r >= 0xFF01 && r <= 0xFF5E { // full-width ASCII
			r -= 0xFF01 - 0x21
		}
		if m, ok := lookalikes[r]; ok {
			r = m
		}
		b.WriteRune(unicode.ToLower(r))
	}
	s := b.String()
	if i := strings.IndexByte(s, ':'); i > 0 {
		s = s[:i]
	}
	return strings.TrimRight(s, ". ")
}

// IsDotGit reports whether name could be taken for ".git" by some file system:
// after folding, ".git" itself or its NTFS 8.3 short name ("git~1" to "git~9").
func IsDotGit(name string) bool {
	f := Fold(name)
	if f == ".git" {
		return true
	}
	return len(f) == 5 && strings.HasPrefix(f, "git~") && f[4] >= '1' && f[4] <= '9'
}
