package confine

import (
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/paddock-dev/paddock"
)

// DefaultProtected lists the agent and editor configuration that runs code
// when a person opens the project, or steers the next agent. Patterns use
// doublestar syntax and match folded names (see Fold) at any depth.
//
// It is data: a project adds its own patterns (paddock project add or set
// --protect), which agents may not write either and which a change set
// labels agent_config and never applies, as it does these. Each line says
// what the tool runs from there. A pattern naming one file protects a
// missing one ahead as an empty read-only directory in a run's view, so a
// file the agent itself reads when it starts (.aider.conf.yml,
// opencode.json) is labelled instead (see changeset's runsCode).
var DefaultProtected = []string{
	".claude/settings*.json", // Claude Code: hooks, MCP servers, allowed commands
	".claude/hooks/**",
	".codex/**",  // Codex: config.toml (MCP servers, sandbox mode)
	".cursor/**", // Cursor: mcp.json, hooks.json, rules
	".mcp.json",  // MCP servers a client starts
	".vscode/settings.json",
	".vscode/tasks.json", // tasks, some run on folder open
	".vscode/launch.json",
	".vscode/mcp.json",   // MCP servers VS Code starts
	".devcontainer/**",   // initializeCommand runs on the host
	".devcontainer.json", // the same, at the top
	".gemini/**",         // Gemini CLI: settings.json (MCP servers, hooks), commands
	".amazonq/**",        // Amazon Q: mcp.json, rules, agents
	".roo/**",            // Roo Code: mcp.json, rules
	".kiro/**",           // Kiro: hooks (shell commands on save), settings/mcp.json, steering
	".windsurf/**",       // Windsurf: hooks.json, workflows, rules
	".continue/**",       // Continue: MCP servers, rules
	".clinerules/**",     // Cline: hooks (.clinerules/hooks/), rules; a file or a directory
	".opencode/**",       // opencode: plugins run when it starts, agents, commands
	".zed/settings.json", // Zed: language servers and context servers it starts
	".zed/tasks.json",
	".zed/debug.json",
	".exrc", // Vim and Neovim with 'exrc' source these from the directory they start in
	".vimrc",
	".gvimrc",
	".nvimrc",
	".nvim.lua",
	".envrc", // direnv runs it on entering the directory
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
//
// Every component is folded (see Fold) and every pattern matches at any
// depth: an editor or an agent may be started in any directory of the
// project, and "sub/.envrc" or "sub/.claude/settings.json" run code there
// as the top-level ones do at the top. A directory above what a pattern
// names (".vscode", "sub/.claude") is protected as a whole from moves and
// deletes.
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
		file, dir := matchFolded(pat, folded)
		switch {
		case file:
			return "agent or editor configuration (" + pat + ")"
		case dir:
			return "a directory holding agent or editor configuration (" + pat + ")"
		}
	}
	return ""
}

// FoldPath folds every component of rel (see Fold).
func FoldPath(rel string) string {
	parts := strings.Split(rel, "/")
	for i := range parts {
		parts[i] = Fold(parts[i])
	}
	return strings.Join(parts, "/")
}

// MatchAnyDepth returns the first of patterns that rel matches, by folding
// and at any depth as Policy.Match does, or "". Directories above a match
// do not count.
func MatchAnyDepth(patterns []string, rel string) string {
	folded := FoldPath(rel)
	for _, pat := range patterns {
		if file, _ := matchFolded(pat, folded); file {
			return pat
		}
	}
	return ""
}

// matchFolded reports whether the folded path matches pat at some depth
// (file), or is a directory above what pat names there (dir).
func matchFolded(pat, folded string) (file, dir bool) {
	lp := foldPattern(pat)
	// Both kinds of match need the pattern's first name among the path's
	// names: a cheap test that spares most paths the pattern match.
	if first, _, _ := strings.Cut(lp, "/"); !strings.ContainsAny(first, "*?[{\\") && !hasComponent(folded, first) {
		return false, false
	}
	if ok, _ := doublestar.Match("**/"+lp, folded); ok {
		return true, false
	}
	for d := path.Dir(lp); d != "." && d != "/"; d = path.Dir(d) {
		if !strings.ContainsAny(d, "*?[{") && (d == folded || strings.HasSuffix(folded, "/"+d)) {
			return false, true
		}
	}
	return false, false
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

// hasComponent reports whether name is one of the names of the path p.
func hasComponent(p, name string) bool {
	for {
		i := strings.Index(p, name)
		if i < 0 {
			return false
		}
		end := i + len(name)
		if (i == 0 || p[i-1] == '/') && (end == len(p) || p[end] == '/') {
			return true
		}
		p = p[i+1:]
	}
}
