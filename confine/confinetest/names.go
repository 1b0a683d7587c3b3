// Package confinetest holds the table of names that every rule about
// protected and labelled paths is tested against: the file tools (each
// operation), the policy itself and the change set. One table, so that a
// spelling refused by one cannot slip through another.
package confinetest

// Name is one case: a workspace-relative path and what it shows.
type Name struct {
	Path string
	Why  string
}

// Protected are paths the default policy refuses to agents and a change set
// never applies: the exact names and every spelling that a file system, an
// editor or a reader would take for them.
var Protected = []Name{
	{".claude/settings.json", "exact"},
	{".claude/settings.local.json", "exact, by pattern"},
	{".vscode/tasks.json", "exact"},
	{".envrc", "exact"},
	{".mcp.json", "exact"},
	{".Claude/settings.json", "case variant of a directory"},
	{".vscode/Tasks.json", "case variant of a file"},
	{".CLAUDE/SETTINGS.LOCAL.JSON", "upper case"},
	{"sub/.envrc", "nested copy"},
	{"sub/.claude/settings.json", "nested copy"},
	{"a/b/.vscode/launch.json", "nested deeper"},
	{"svc/.devcontainer/devcontainer.json", "nested directory pattern"},
	{"pkg/.Codex/config.toml", "nested and case"},
	{".vscod\u0435/tasks.json", "Cyrillic е"},
	{".\u0435nvrc", "Cyrillic е first"},
	{".\u0441laude/settings.json", "Cyrillic с"},
	{".c\u03bfdex/config.toml", "Greek omicron"},
	{".curs\u1d0fr/rules/x.mdc", "Latin small capital O"},
	{".claude/hoo\u212as/pre.sh", "Kelvin sign"},
	{"\uff0eenvrc", "full-width full stop"},
	{".\uff56\uff53\uff43\uff4f\uff44\uff45/settings.json", "full-width letters"},
	{".cl\u200daude/settings.json", "zero-width joiner"},
	{".envrc\u200b", "zero-width space at the end"},
	{"\u00ad.mcp.json", "soft hyphen"},
	{".env\u202erc", "right-to-left override"},
	{".mcp\ufe0f.json", "variation selector"},
	{".en\u034fvrc", "combining grapheme joiner"},
	{".envrc.", "trailing dot"},
	{".vscode /tasks.json", "trailing space in a directory"},
	{".mcp.json. ", "trailing dot and space"},
	{".envrc::$DATA", "NTFS stream"},
	{".vscode\u2024/tasks.json", "one dot leader (NFKC: a full stop, then trimmed)"},
	// Agent and editor configuration that runs code on the host.
	{".vscode/mcp.json", "MCP servers VS Code starts"},
	{".devcontainer.json", "initializeCommand runs on the host"},
	{"svc/.devcontainer.json", "nested"},
	{".gemini/settings.json", "Gemini CLI: MCP servers, hooks"},
	{".gemini/commands/deploy.toml", "Gemini CLI: a command"},
	{".amazonq/mcp.json", "Amazon Q: MCP servers"},
	{".amazonq/rules/style.md", "Amazon Q: rules"},
	{".roo/mcp.json", "Roo Code: MCP servers"},
	{".kiro/hooks/lint.kiro.hook", "Kiro: a hook runs a command on save"},
	{".windsurf/hooks.json", "Windsurf: hooks"},
	{".continue/config.yaml", "Continue: MCP servers"},
	{".clinerules/hooks/PreToolUse", "Cline: a hook"},
	{"sub/.clinerules", "Cline: rules as one file"},
	{".opencode/plugin/x.ts", "opencode: a plugin runs when it starts"},
	{".zed/settings.json", "Zed: language and context servers"},
	{".zed/tasks.json", "Zed: tasks"},
	{".exrc", "Vim and Neovim with 'exrc'"},
	{".vimrc", "Vim with 'exrc'"},
	{".gvimrc", "gVim with 'exrc'"},
	{".nvimrc", "Neovim with 'exrc'"},
	{".nvim.lua", "Neovim with 'exrc'"},
	{"sub/.Nvim.lua", "nested and case"},
	{".G\u0435mini/settings.json", "Cyrillic е and case"},
}

// Allowed are paths the default policy lets agents write and a change set
// applies: ordinary names near the protected ones.
var Allowed = []Name{
	{"docs/claude.md", "a document about Claude"},
	{"CLAUDE.md", "agent instructions: labelled, not refused"},
	{"sub/AGENTS.md", "agent instructions: labelled, not refused"},
	{".claude/agents/reviewer.md", "labelled, not refused"},
	{".claude/commands/ship.md", "labelled, not refused"},
	{".claude/notes.txt", "beside protected files"},
	{".claude.md", "not the directory"},
	{".vscode/extensions.json", "not a protected file of .vscode"},
	{".zed/themes.json", "not a protected file of .zed"},
	{"docs/gemini/settings.json", "no dot"},
	{".exrc.md", "not .exrc"},
	{"vimrc", "no dot"},
	{".clinerules.md", "not .clinerules"},
	{"docs/.envrc.md", "a document about .envrc"},
	{".envrc.example", "not .envrc"},
	{"envrc", "no dot"},
	{"docs/vscode/tasks.json", "no dot"},
	{"Makefile", "runs code: labelled, not refused"},
	{"caf\u00e9.txt", "NFC"},
	{"cafe\u0301.txt", "NFD"},
	{"stra\u00dfe.txt", "sharp s"},
	{"\u043f\u0440\u0438\u0432\u0435\u0442.txt", "Cyrillic word"},
	{"\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac.md", "Greek word"},
	{"l0g.txt", "ASCII is never mapped"},
	{"src/main.go", "ordinary"},
}

// RunsCode are paths a change set labels runs_code: what builds, tests,
// installs or editors run, at any depth, however spelled.
var RunsCode = []string{
	"Makefile", "sub/GNUmakefile", "makefile", "justfile", "x/Justfile", "build.rs", "crates/a/build.rs",
	"conftest.py", "tests/conftest.py", ".pre-commit-config.yaml", ".npmrc", "web/.npmrc", ".yarnrc.yml",
	".cargo/config.toml", "sub/.cargo/config", ".mise.toml", ".tool-versions", "app.code-workspace",
	".idea/workspace.xml", "mod/.idea/runConfigurations/x.xml", "Mak\u0435file",
	".aider.conf.yml", "sub/.aider.conf.yml", "opencode.json", "opencode.jsonc",
}

// AgentInstructions are paths a change set labels agent_instructions: what
// the next agent reads as its orders, at any depth, however spelled.
var AgentInstructions = []string{
	"CLAUDE.md", "docs/claude.md", "AGENTS.md", "pkg/Agents.md", ".claude/commands/ship.md",
	".claude/agents/reviewer.md", "sub/.claude/commands/x.md", "CLAUDE.local.md", "GEMINI.md",
	".github/copilot-instructions.md", "CL\u0410UDE.md", ".github/instructions/go.instructions.md",
	".cursorrules", ".windsurfrules", ".roomodes", "sub/.Roomodes",
}

// Unlabelled are near misses that neither label may take.
var Unlabelled = []string{
	"docs/claude.md.txt", "Makefile.md", "build.rs.bak", "conftest.py.orig", "docs/make.md", "src/main.go",
	"claude.txt", ".claude/notes.txt", "notes/agents.txt", "idea/x.xml", "aider.conf.yml", "docs/opencode.json.md",
	"roomodes", ".github/instructions.md",
}
