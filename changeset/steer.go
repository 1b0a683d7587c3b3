package changeset

import (
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
)

// runsCode are files that a build, a test run, an installer or an editor
// executes or obeys when a person works in the project: a change to one runs
// on the next `make`, `cargo build`, `pytest`, `npm install`, `git commit`
// (pre-commit) or opening of the IDE. Matched by folding, at any depth.
var runsCode = []string{
	"makefile", "gnumakefile", "justfile", ".justfile", "build.rs", "conftest.py",
	".pre-commit-config.yaml", ".npmrc", ".yarnrc.yml", ".cargo/config.toml", ".cargo/config",
	".mise.toml", ".tool-versions", "*.code-workspace", ".idea/**",
	// Agent configuration that runs code (aider's lint and test commands,
	// opencode's MCP servers and plugins) but that the agent itself reads
	// when it starts: protecting it would put a directory where a run's
	// aider or opencode reads its configuration (see
	// confine.DefaultProtected), so it is labelled, not refused.
	".aider.conf.yml", "opencode.json", "opencode.jsonc",
}

// agentInstructions are files that the next agent reads as its orders.
var agentInstructions = []string{
	"claude.md", "claude.local.md", "agents.md", "gemini.md", ".claude/commands/**", ".claude/agents/**",
	".github/copilot-instructions.md", ".github/instructions/**", ".cursorrules", ".windsurfrules", ".roomodes",
}

// labelSteering labels what runs code or steers agents. These are not
// refused (a project's Makefile is ordinary work) but a reviewer should read
// them as code that runs on their machine.
func labelSteering(e *paddock.ChangeEntry) {
	if confine.MatchAnyDepth(runsCode, e.Path) != "" {
		e.Risks = append(e.Risks, "runs_code")
	}
	if confine.MatchAnyDepth(agentInstructions, e.Path) != "" {
		e.Risks = append(e.Risks, "agent_instructions")
	}
}

// blockProtected marks an entry the project's policy protects as never
// applied, whatever its spelling or depth: agents may not write it through
// the tools, and what the shell made of it is not applied either.
func blockProtected(e *paddock.ChangeEntry, policy *confine.Policy) {
	if why := policy.Match(e.Path); why != "" && policy.MatchHooks(e.Path) == "" {
		e.Risks = append(e.Risks, "agent_config")
		e.Blocked = why + ": never applied"
	}
}
