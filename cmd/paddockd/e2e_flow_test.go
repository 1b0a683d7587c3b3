package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestIncidentOverMCP replays record 000's incident with agents that
// speak MCP, the coder over stdio (paddock mcp) and the reviewer over
// streamable HTTP: the coder's menu has done, nothing else; the reviewer is
// offered no write tool, and its write, its shell's edit, git config and
// commit, its submit and an approve of a stale head are refused or
// confined; its approve moves the flow to awaiting_approval with an empty
// change set; nothing can be applied; the project and its refs are as
// they were.
func TestIncidentOverMCP(t *testing.T) {
	f := newMCPFixture(t)
	refs := gittest.Git(t, f.repo, "for-each-ref")
	readme, _ := os.ReadFile(filepath.Join(f.repo, "README.md"))
	out := cli(t, f.home, "flow", "start", "task-with-review", "--project", "app", "--task", "fix the typo in README.md", "--json").must(t)
	flow := decode[paddock.Flow](t, out)
	coder := flow.Runs["coding"]

	changed := make(chan struct{}, 8)
	cs := f.connect(t, transport{name: "stdio"}, coder, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	names := toolNames(t, cs)
	if !slices.Contains(names, "done") || slices.Contains(names, "approve") {
		t.Fatalf("the coder's tools: %v", names)
	}
	// The coder commits nothing and says it is done.
	if res := call(t, cs, "done", map[string]any{}); res.IsError {
		t.Fatalf("done: %s", text(res))
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the coder's tool list did not change when its flow moved")
	}
	if names := toolNames(t, cs); slices.Contains(names, "done") {
		t.Fatalf("done stays on the coder's menu: %v", names)
	}

	flow = decode[paddock.Flow](t, cli(t, f.home, "flow", "show", flow.ID, "--json"))
	reviewer := flow.Runs["reviewing"]
	rs := f.connect(t, transport{name: "http", token: f.token}, reviewer, nil)
	names = toolNames(t, rs)
	for _, w := range []string{"write", "edit", "move", "delete", "submit"} {
		if slices.Contains(names, w) {
			t.Errorf("the reviewer is offered %s: %v", w, names)
		}
	}
	if !slices.Contains(names, "approve") || !slices.Contains(names, "request_changes") {
		t.Fatalf("the reviewer's menu: %v", names)
	}
	caps := mustOK(t, "capabilities", call(t, rs, "capabilities", map[string]any{}))
	menu, _ := caps["menu"].(map[string]any)
	head, _ := menu["head"].(string)
	inputs, _ := menu["inputs"].(map[string]any)
	if head == "" || !strings.Contains(inputs["note"].(string), "changed nothing") {
		t.Fatalf("the reviewer's menu: %+v", menu)
	}
	for _, attempt := range []struct {
		tool string
		args map[string]any
	}{
		{"write", map[string]any{"path": "README.md", "content": "edited by the reviewer\n"}},
		{"submit", map[string]any{}},
		{"approve", map[string]any{"head": "sha256:" + strings.Repeat("0", 64)}},
	} {
		// A tool not offered is a protocol error; one offered but refused,
		// a tool error.
		res, err := rs.CallTool(context.Background(), &mcp.CallToolParams{Name: attempt.tool, Arguments: attempt.args})
		if err == nil && !res.IsError {
			t.Errorf("the reviewer's %s went through: %s", attempt.tool, text(res))
		}
	}
	res := call(t, rs, "exec", map[string]any{"argv": []string{"sh", "-c", `echo edited > README.md; git config user.email reviewer@example.com; git commit -qam "LGTM" && echo COMMITTED; cat README.md`}})
	mustOK(t, "exec", res)
	if res := mustOK(t, "exec", call(t, rs, "exec", map[string]any{"argv": []string{"sh", "-c", "cat README.md; git log --oneline | wc -l"}})); res["stdout"] != string(readme)+"2\n" {
		t.Fatalf("the reviewer's edit and commit outlived their command: %q", res["stdout"])
	}
	if res := call(t, rs, "approve", map[string]any{"head": head}); res.IsError {
		t.Fatalf("approve: %s", text(res))
	}
	flow = decode[paddock.Flow](t, cli(t, f.home, "flow", "show", flow.ID, "--json"))
	if flow.State != "awaiting_approval" || flow.Ended.IsZero() {
		t.Fatalf("after the reviewer's approve: %+v", flow)
	}
	// Nothing was approved, nothing applies, nothing moved.
	if r := cli(t, f.home, "apply", coder); r.code == 0 {
		t.Fatalf("an apply after the reviewer's approve: %s", r.out)
	}
	if got := gittest.Git(t, f.repo, "for-each-ref"); got != refs {
		t.Fatalf("the project's refs moved:\n%s", got)
	}
	if got, _ := os.ReadFile(filepath.Join(f.repo, "README.md")); string(got) != string(readme) {
		t.Fatalf("README.md changed: %q", got)
	}
	events := cli(t, f.home, "flow", "events", flow.ID).must(t).out
	if strings.Count(events, "flow.refused") != 1 || !strings.Contains(events, `"event":"approve"`) {
		t.Errorf("the flow's log:\n%s", events)
	}
	// The coder submitted nothing: the flow says there is nothing to
	// approve, rather than ask for an approval approve would refuse.
	if show := cli(t, f.home, "flow", "show", flow.ID).must(t).out; !strings.Contains(show, "nothing to approve: run "+coder) || strings.Contains(show, "waiting for a person") {
		t.Errorf("flow show:\n%s", show)
	}
}

// TestFlowStartsAgentCommands: a flow starts each state's agent command,
// which drives itself through the run's own socket with the paddock binary
// in its view (paddock menu): the coder writes and picks done, the
// reviewer reads what it was given and approves that head; the flow ends
// waiting for a person, who approves and applies the coder's change set.
func TestFlowStartsAgentCommands(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "app"), map[string]string{"README.md": "hello\n"})
	startDaemon(t, home)
	cli(t, home, "project", "add", repo, "--name", "app").must(t)
	defs := map[string]string{
		"scripted-coder.toml": `name = "scripted-coder"
workspace = "write"
tools = ["read", "write", "exec", "diff", "submit", "capabilities"]
command = ["sh", "-c", "echo greetings > hello.txt && /run/paddock/bin/paddock menu \"$PADDOCK_RUN\" done"]
`,
		"scripted-reviewer.toml": `name = "scripted-reviewer"
workspace = "read"
tools = ["read", "exec", "capabilities"]
command = ["sh", "-c", "p=/run/paddock/bin/paddock; test \"$(cat hello.txt)\" = greetings && h=$($p menu \"$PADDOCK_RUN\" --json | grep -o '\"head\": *\"sha256:[0-9a-f]*\"' | head -1 | cut -d'\"' -f4) && $p menu \"$PADDOCK_RUN\" approve --head \"$h\""]
`,
		"scripted.toml": `name = "scripted"
start = "coding"
[[state]]
name = "coding"
agent = "scripted-coder"
  [[state.transition]]
  event = "done"
  to = "reviewing"
[[state]]
name = "reviewing"
agent = "scripted-reviewer"
reviews = "coding"
  [[state.transition]]
  event = "approve"
  to = "awaiting_approval"
  guard = "head == context.head"
[[state]]
name = "awaiting_approval"
end = true
`,
	}
	for name, body := range defs {
		if err := os.WriteFile(filepath.Join(base, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := cli(t, home, "flow", "start", "task-with-review", "--project", "app"); r.code != exitUsage || !strings.Contains(r.err, `"task" not set`) {
		t.Fatalf("flow start without its task: %d %s", r.code, r.err)
	}
	if r := cli(t, home, "flow", "start", "no-such-workflow", "--project", "app", "--task", "t"); r.code != exitNotFound {
		t.Fatalf("an unknown workflow: %d %s", r.code, r.err)
	}
	cli(t, home, "agent", "add", filepath.Join(base, "scripted-coder.toml")).must(t)
	cli(t, home, "agent", "add", filepath.Join(base, "scripted-reviewer.toml")).must(t)
	flow := decode[paddock.Flow](t, cli(t, home, "flow", "start", filepath.Join(base, "scripted.toml"), "--project", "app", "--task", "greet", "--json"))
	for deadline := time.Now().Add(90 * time.Second); flow.Ended.IsZero(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the flow did not end:\n%s\n%s", cli(t, home, "flow", "events", flow.ID).out, cli(t, home, "events", flow.Runs["reviewing"]).out)
		}
		flow = decode[paddock.Flow](t, cli(t, home, "flow", "show", flow.ID, "--json"))
	}
	if flow.State != "awaiting_approval" {
		t.Fatalf("the flow ended in %s:\n%s", flow.State, cli(t, home, "flow", "events", flow.ID).out)
	}
	coder := flow.Runs["coding"]
	// The review is over: its run is given back once its command ended.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r := decode[paddock.Run](t, cli(t, home, "show", flow.Runs["reviewing"], "--json"))
		if r.State() == paddock.StateRejected || r.State() == paddock.StateCleaned {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the finished review run is still %s", r.State())
		}
	}
	cs := decode[paddock.ChangeSet](t, cli(t, home, "diff", coder, "--json"))
	if len(cs.Entries) != 1 || cs.Entries[0].Path != "hello.txt" || cs.Hash != flow.Head {
		t.Fatalf("the coder's change set: %+v, the flow's head %s", cs, flow.Head)
	}
	cli(t, home, "approve", coder, "--hash", cs.Hash).must(t)
	cli(t, home, "apply", coder, "--to", "branch=greeting").must(t)
	if got := gittest.Git(t, repo, "show", "greeting:hello.txt"); got != "greetings" {
		t.Fatalf("the branch holds %q", got)
	}
}
