package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/internal/paddockcli"
)

// TestAgentInsideARun: a run's commands find their own run through the
// socket and the binary the daemon shows them, with no network and no
// token: paddock's CLI inside the run writes through the broker (an
// agent's recorded call), and is refused the operator's verbs and other
// runs.
func TestAgentInsideARun(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "app"), map[string]string{"README.md": "hello\n"})
	startDaemon(t, home)
	cli(t, home, "project", "add", repo, "--name", "app").must(t)
	run := decode[paddock.Run](t, cli(t, home, "create", "--project", "app", "--json"))
	other := decode[paddock.Run](t, cli(t, home, "create", "--project", "app", "--json"))

	script := `p=/run/paddock/bin/paddock
echo "run=$PADDOCK_RUN socket=$PADDOCK_SOCKET"
$p tool "$PADDOCK_RUN" write --arg path=inside.txt --arg content=through-the-socket >/dev/null && echo WROTE
$p approve "$PADDOCK_RUN" --hash sha256:` + strings.Repeat("0", 64) + ` 2>&1
$p tools ` + other.ID + ` 2>&1
$p ls 2>&1
$p --addr 127.0.0.1:1 tools "$PADDOCK_RUN" >/dev/null 2>&1 || echo "NO TOKEN FILE"
cat "$PADDOCK_MCP_CONFIG"
rm -f /run/paddock/api/paddock.sock 2>/dev/null || echo "SOCKET KEPT"
$p version
`
	r := cli(t, home, "exec", run.ID, "--", "sh", "-c", script)
	for _, want := range []string{
		"run=" + run.ID + " socket=/run/paddock/api/paddock.sock",
		"WROTE",
		"does not reach POST /v1/runs/{id}/approve",
		"run " + run.ID + "'s agent (its token, or its own socket), not " + other.ID + "'s",
		"does not reach GET /v1/runs;",
		"NO TOKEN FILE",
		`"command": "/run/paddock/bin/paddock"`,
		"SOCKET KEPT",
		"daemon  answers on this run's socket (/run/paddock/api/paddock.sock)",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("inside the run, want %q in:\n%s\n%s", want, r.out, r.err)
		}
	}
	// The write is the agent's, in the run's change set and event log.
	cs := decode[paddock.ChangeSet](t, cli(t, home, "diff", run.ID, "--json"))
	if len(cs.Entries) != 1 || cs.Entries[0].Path != "inside.txt" {
		t.Fatalf("the change set after a write from inside: %+v", cs.Entries)
	}
	events := cli(t, home, "events", run.ID, "--json").must(t).out
	if !strings.Contains(events, `"tool":"write"`) && !strings.Contains(events, `"tool": "write"`) {
		t.Errorf("the write from inside is not in the run's events:\n%s", events)
	}
	if cs := decode[paddock.ChangeSet](t, cli(t, home, "diff", other.ID, "--json")); len(cs.Entries) != 0 {
		t.Errorf("the other run changed: %+v", cs.Entries)
	}
}

// TestRealAgentsFindPaddock: Claude Code and Codex, as installed from npm
// (into a user's prefix, as .ci/run does, shown to the run read-only), run
// inside a run with no model and no network, and find paddock's MCP
// server configured in the run's home; Claude Code's health check starts
// it and connects. Neither can do more offline: a session needs a model.
func TestRealAgentsFindPaddock(t *testing.T) {
	needAgents(t, "claude", "codex")
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "app"), map[string]string{"README.md": "hello\n"})
	startDaemon(t, home)
	script := `export DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
claude --version
claude mcp list 2>&1
echo ==codex
codex mcp list --json 2>/dev/null`
	args := append([]string{"run", "--project", repo, "--no-verify"}, agentMountFlags(t, "claude", "codex")...)
	r := cli(t, home, append(args, "--", "sh", "-c", script)...)
	if r.code != 0 || !strings.Contains(r.out, "(Claude Code)") {
		t.Fatalf("paddock run -- claude: %d\n%s\n%s", r.code, r.out, r.err)
	}
	if !regexp.MustCompile(`paddock: /run/paddock/bin/paddock mcp r-\S+ - ✔ Connected`).MatchString(r.out) {
		t.Errorf("claude mcp list does not show paddock connected:\n%s", r.out)
	}
	_, codexOut, _ := strings.Cut(r.out, "==codex\n")
	var servers []struct {
		Name      string `json:"name"`
		Enabled   bool   `json:"enabled"`
		Transport struct {
			Type    string   `json:"type"`
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"transport"`
	}
	if err := json.Unmarshal([]byte(codexOut[:strings.LastIndex(codexOut, "]")+1]), &servers); err != nil {
		t.Fatalf("codex mcp list --json: %v\n%s", err, codexOut)
	}
	if len(servers) != 1 || servers[0].Name != "paddock" || !servers[0].Enabled || servers[0].Transport.Command != "/run/paddock/bin/paddock" {
		t.Errorf("codex's MCP servers: %+v", servers)
	}
}

// needAgents skips (or, under CI=true, fails) a test whose agents are not
// installed, and puts where they are on PATH. Users install them with npm
// into their own prefix (npm install -g with prefix ~/.npm-global, as
// .ci/run does; PADDOCK_AGENTS_BIN names another bin directory), not
// where a run's view shows them: paddock run finds them there (#30 item 2).
func needAgents(t *testing.T, bins ...string) {
	t.Helper()
	var missing, dirs []string
	for _, bin := range bins {
		p, err := exec.LookPath(bin)
		if err != nil {
			p = filepath.Join(agentsBin(), bin)
			if _, err = os.Stat(p); err != nil {
				missing = append(missing, bin)
				continue
			}
		}
		if d := filepath.Dir(p); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	if len(missing) > 0 {
		msg := "not installed (npm install -g --prefix ~/.npm-global @anthropic-ai/claude-code @openai/codex, as .ci/run does): " + strings.Join(missing, ", ")
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Setenv("PATH", strings.Join(append(dirs, os.Getenv("PATH")), ":"))
}

// agentsBin is where .ci/run installs the agents.
func agentsBin() string {
	if d := os.Getenv("PADDOCK_AGENTS_BIN"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".npm-global", "bin")
}

// agentMountFlags are the --mount-ro flags that show a run the agents, for
// a CMD that is a shell calling them rather than an agent itself.
func agentMountFlags(t *testing.T, bins ...string) []string {
	t.Helper()
	var flags []string
	for _, bin := range bins {
		mounts, err := paddockcli.CommandMounts(bin, os.Getenv("PATH"), "/")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mounts {
			if !slices.Contains(flags, m) {
				flags = append(flags, "--mount-ro", m)
			}
		}
	}
	return flags
}

// fakeModel plays Anthropic's Messages API for Claude Code, with a
// script: on the first request that offers paddock's write tool it asks
// for a write, and once the tool's result comes back it ends the turn.
// Every other request (a title, a summary) gets a short text.
type fakeModel struct {
	mu       sync.Mutex
	requests []map[string]any
	// keys are the credentials the requests carried (x-api-key, or
	// Authorization), one per request.
	keys []string
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == "POST" && r.URL.Path == "/v1/responses" {
		f.responses(w, r)
		return
	}
	if r.Method != "POST" || !strings.HasPrefix(r.URL.Path, "/v1/messages") || strings.Contains(r.URL.Path, "count_tokens") {
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"not here"}}`, http.StatusNotFound)
		return
	}
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.keys = append(f.keys, r.Header.Get("x-api-key"))
	f.mu.Unlock()
	raw, _ := json.Marshal(req["messages"])
	tools, _ := json.Marshal(req["tools"])
	var block map[string]any
	stop := "end_turn"
	// The script: write, then (where the model is told to go on, by a
	// system prompt naming paddock's exec) exec and verify, then done.
	more := strings.Contains(string(raw), "then exec and verify")
	switch {
	case strings.Contains(string(raw), `"tool_use_id":"toolu_paddock_3"`),
		!more && strings.Contains(string(raw), `"tool_use_id":"toolu_paddock_1"`):
		block = map[string]any{"type": "text", "text": "Done: hello.txt is written."}
	case strings.Contains(string(raw), `"tool_use_id":"toolu_paddock_2"`):
		block = map[string]any{"type": "tool_use", "id": "toolu_paddock_3", "name": "mcp__paddock__verify", "input": map[string]any{}}
		stop = "tool_use"
	case strings.Contains(string(raw), `"tool_use_id":"toolu_paddock_1"`):
		block = map[string]any{"type": "tool_use", "id": "toolu_paddock_2", "name": "mcp__paddock__exec",
			"input": map[string]any{"argv": []string{"sh", "-c", `echo "key: $(printf %s "$ANTHROPIC_API_KEY" | rev)"; cat hello.txt`}}}
		stop = "tool_use"
	case strings.Contains(string(tools), `"mcp__paddock__write"`):
		block = map[string]any{"type": "tool_use", "id": "toolu_paddock_1", "name": "mcp__paddock__write",
			"input": map[string]any{"path": "hello.txt", "content": "hello from inside the run\n"}}
		stop = "tool_use"
	default:
		block = map[string]any{"type": "text", "text": "ok"}
	}
	msg := map[string]any{"id": "msg_fake", "type": "message", "role": "assistant", "model": req["model"],
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}
	if stream, _ := req["stream"].(bool); !stream {
		msg["content"], msg["stop_reason"] = []any{block}, stop
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	}
	send("message_start", map[string]any{"type": "message_start", "message": msg})
	start := map[string]any{}
	for k, v := range block {
		start[k] = v
	}
	var delta map[string]any
	if block["type"] == "tool_use" {
		input, _ := json.Marshal(block["input"])
		start["input"] = map[string]any{}
		delta = map[string]any{"type": "input_json_delta", "partial_json": string(input)}
	} else {
		start["text"] = ""
		delta = map[string]any{"type": "text_delta", "text": block["text"]}
	}
	send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": start})
	send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": delta})
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 5}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// responses plays OpenAI's Responses API for Codex, with the same script:
// a write through paddock's tools (which Codex offers as the namespace
// mcp__paddock), then the end of the turn once its output comes back.
func (f *fakeModel) responses(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.keys = append(f.keys, r.Header.Get("Authorization"))
	f.mu.Unlock()
	input, _ := json.Marshal(req["input"])
	var item map[string]any
	if strings.Contains(string(input), `"call_id":"call_paddock_1"`) && strings.Contains(string(input), `"function_call_output"`) {
		item = map[string]any{"type": "message", "id": "msg_1", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": "Done: hello.txt is written.", "annotations": []any{}}}}
	} else {
		args, _ := json.Marshal(map[string]any{"path": "hello.txt", "content": "hello from inside the run\n"})
		item = map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_paddock_1", "namespace": "mcp__paddock",
			"name": "write", "arguments": string(args)}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range []map[string]any{
		{"type": "response.created", "response": map[string]any{"id": "resp_1"}},
		{"type": "response.output_item.done", "output_index": 0, "item": item},
		{"type": "response.completed", "response": map[string]any{"id": "resp_1",
			"usage": map[string]any{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}},
	} {
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev["type"], b)
	}
}

// offeredTools names the tools the model was offered over every request:
// Claude Code's flat list, Codex's namespaces as NAMESPACE__TOOL.
func (f *fakeModel) offeredTools() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	offered := map[string]bool{}
	for _, req := range f.requests {
		tools, _ := req["tools"].([]any)
		for _, tool := range tools {
			m, _ := tool.(map[string]any)
			name, _ := m["name"].(string)
			offered[name] = true
			inner, _ := m["tools"].([]any)
			for _, t := range inner {
				if tm, ok := t.(map[string]any); ok {
					offered[name+"__"+fmt.Sprint(tm["name"])] = true
				}
			}
		}
	}
	return offered
}

// modelRun starts a daemon whose allow-list networks may reach this
// machine's loopback, and a scripted model there; it returns the daemon's
// home, a repository and the model's port.
func modelRun(t *testing.T) (home, repo string, model *fakeModel, port int) {
	model = &fakeModel{}
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)
	base := t.TempDir()
	home = filepath.Join(base, "home")
	os.MkdirAll(home, 0o700)
	if err := os.WriteFile(filepath.Join(home, "paddock.toml"), []byte("net_allow_addresses = [\"127.0.0.1/32\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	repo = gittest.NewRepo(t, filepath.Join(base, "src", "app"), map[string]string{"README.md": "hello\n"})
	startDaemon(t, home)
	return home, repo, model, srv.Listener.Addr().(*net.TCPAddr).Port
}

// checkWroteThroughPaddock checks that paddock run's output shows the
// agent's write submitted, as an event of the run, and the checkout
// untouched.
func checkWroteThroughPaddock(t *testing.T, home, repo string, r result) {
	t.Helper()
	if r.code != 0 || !strings.Contains(r.out, "hello.txt") || !strings.Contains(r.out, "submitted for review") {
		t.Fatalf("paddock run: %d\n%s\n%s", r.code, r.out, r.err)
	}
	if !strings.Contains(r.out, "Done: hello.txt is written.") {
		t.Errorf("the agent did not finish its turn:\n%s", r.out)
	}
	m := regexp.MustCompile(`paddock approve (r-\S+) --hash`).FindStringSubmatch(r.out)
	if m == nil {
		t.Fatalf("no run in:\n%s", r.out)
	}
	events := cli(t, home, "events", m[1], "--json").must(t).out
	if !strings.Contains(strings.ReplaceAll(events, " ", ""), `"tool":"write"`) {
		t.Errorf("the write is not an event of the run:\n%s", events)
	}
	if _, err := os.Stat(filepath.Join(repo, "hello.txt")); !os.IsNotExist(err) {
		t.Errorf("the checkout got hello.txt before any approval: %v", err)
	}
}

// TestCodexWorksThroughPaddock: Codex, as installed from npm, does the
// same task with a scripted Responses API in place of OpenAI's: it
// starts paddock's MCP server from the run's home configuration, offers
// its tools, and its write lands in the change set through the broker
// (without a prompt of Codex's own: paddock decides the call).
func TestCodexWorksThroughPaddock(t *testing.T) {
	needAgents(t, "codex")
	home, repo, model, port := modelRun(t)
	const key = "sk-openai-real-key-of-the-daemon-6060"
	writeSecret(t, home, "OPENAI_API_KEY", key)
	r := cli(t, home, "run", "--project", repo, "--no-verify", "--timeout", "3m",
		"--credential", "use=openai,host=localhost,env=FAKE_KEY", "--",
		"codex", "exec", "--skip-git-repo-check", "-c", "model=fake-model", "-c", "model_provider=fake",
		"-c", fmt.Sprintf(`model_providers.fake={name="fake",base_url="http://localhost:%d/v1",wire_api="responses",env_key="FAKE_KEY"}`, port), "Write hello.txt.")
	checkWroteThroughPaddock(t, home, repo, r)
	model.mu.Lock()
	for i, k := range model.keys {
		if k != "Bearer "+key {
			t.Errorf("request %d carried Authorization %q, not the daemon's key", i, k)
		}
	}
	model.mu.Unlock()
	offered := model.offeredTools()
	for _, want := range []string{"read", "write", "edit", "exec", "diff", "submit"} {
		if !offered["mcp__paddock__"+want] {
			t.Errorf("Codex did not offer paddock's %s: %v", want, offered)
		}
	}
	for _, own := range []string{"exec_command", "shell", "apply_patch"} {
		if offered[own] {
			t.Errorf("Codex offered its own %s, around the broker", own)
		}
	}
}

// TestClaudeCodeWorksThroughPaddock: Claude Code, as installed from npm,
// does a task inside a run with a scripted model in place of Anthropic's
// (on this machine's loopback, reached only through the run's allow-list
// proxy; every other address Claude Code asks for is refused there). The
// model is offered paddock's tools and not Claude Code's own acting ones,
// its write goes through paddock's broker into the run's change set, and
// the checkout is untouched until someone approves.
func TestClaudeCodeWorksThroughPaddock(t *testing.T) {
	needAgents(t, "claude")
	home, repo, model, port := modelRun(t)
	const key = "sk-ant-real-key-of-the-daemon-5150"
	writeSecret(t, home, "ANTHROPIC_API_KEY", key)
	r := cli(t, home, "run", "--project", repo, "--no-verify", "--timeout", "3m",
		"--credential", "use=anthropic,host=localhost", "--env", fmt.Sprintf("ANTHROPIC_BASE_URL=http://localhost:%d", port),
		"--env", "ENABLE_TOOL_SEARCH=false", "--env", "DISABLE_AUTOUPDATER=1", "--env", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"--", "claude", "-p", "Write hello.txt, then exec and verify.", "--output-format", "json")
	checkWroteThroughPaddock(t, home, repo, r)
	if !strings.Contains(r.err, "claude is ") || !strings.Contains(r.err, "shown read-only in the run") {
		t.Errorf("paddock run does not say where it found claude:\n%s", r.err)
	}
	offered := model.offeredTools()
	for _, want := range []string{"read", "write", "edit", "grep", "glob", "exec", "diff", "submit", "verify", "capabilities", "plan", "request_access"} {
		if !offered["mcp__paddock__"+want] {
			t.Errorf("the model was not offered paddock's %s: %v", want, offered)
		}
	}
	for _, own := range []string{"Bash", "Write", "Edit"} {
		if offered[own] {
			t.Errorf("the model was offered Claude Code's own %s, around the broker", own)
		}
	}
	// Every request the model received carried the daemon's key, set by
	// the proxy; the run held the placeholder (its exec, which ran while
	// Claude Code held the run's sandbox, printed it reversed).
	model.mu.Lock()
	defer model.mu.Unlock()
	for i, k := range model.keys {
		if k != key {
			t.Errorf("request %d carried x-api-key %q, not the daemon's key", i, k)
		}
	}
	all, _ := json.Marshal(model.requests)
	placeholder := []rune(paddock.CredentialPlaceholder("ANTHROPIC_API_KEY"))
	for a, b := 0, len(placeholder)-1; a < b; a, b = a+1, b-1 {
		placeholder[a], placeholder[b] = placeholder[b], placeholder[a]
	}
	if !strings.Contains(string(all), "key: "+string(placeholder)) || !strings.Contains(string(all), "hello from inside the run") {
		t.Errorf("the exec's result, as the model got it, lacks the placeholder reversed or the file")
	}
	if strings.Contains(string(all), key) || !strings.Contains(string(all), `"tool_use_id":"toolu_paddock_3"`) {
		t.Errorf("the model's requests hold the key, or verify's result never came")
	}
	// The tool's answer came back to the model as paddock gave it.
	last, _ := json.Marshal(model.requests[len(model.requests)-1]["messages"])
	if !strings.Contains(string(last), `"tool_use_id":"toolu_paddock_1"`) || !strings.Contains(string(last), `created`) {
		t.Errorf("the write's result, as the model got it: %s", last)
	}
}

// writeSecret gives the daemon at home the secret name.
func writeSecret(t *testing.T, home, name, value string) {
	t.Helper()
	dir := filepath.Join(home, "secrets")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestClaudeCodeAtATerminal: the everyday path end to end, at a terminal
// (#30's proof): paddock run -- claude, found in the user's npm prefix,
// logged in through the proxy, writes, runs exec and verify; then the
// person at the terminal presses d (the diff through $PAGER) and a, and
// the change set is applied to a branch of the repository.
func TestClaudeCodeAtATerminal(t *testing.T) {
	needAgents(t, "claude")
	home, repo, model, port := modelRun(t)
	writeSecret(t, home, "ANTHROPIC_API_KEY", "sk-ant-real-key-at-a-terminal-7070")
	pager := filepath.Join(t.TempDir(), "pager")
	os.WriteFile(pager, []byte("#!/bin/sh\necho PAGER-START; cat; echo PAGER-END\n"), 0o755)
	out := cliOnTerminalEnv(t, home, map[string]string{"PAGER": pager}, "da", "run", "--project", repo, "--no-verify", "--timeout", "3m",
		"--apply", "branch=from-claude",
		"--credential", "use=anthropic,host=localhost", "--env", fmt.Sprintf("ANTHROPIC_BASE_URL=http://localhost:%d", port),
		"--env", "ENABLE_TOOL_SEARCH=false", "--env", "DISABLE_AUTOUPDATER=1", "--env", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"--", "claude", "-p", "Write hello.txt, then exec and verify.")
	for _, want := range []string{"Done: hello.txt is written.", "PAGER-START", "+hello from inside the run", "PAGER-END", "approved sha256:", "applied to"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal lacks %q:\n%s", want, out)
		}
	}
	if got := gittest.Git(t, repo, "show", "from-claude:hello.txt"); got != "hello from inside the run" {
		t.Fatalf("the branch holds %q", got)
	}
	if _, err := os.Stat(filepath.Join(repo, "hello.txt")); !os.IsNotExist(err) {
		t.Fatalf("the checkout itself was written: %v", err)
	}
	model.mu.Lock()
	defer model.mu.Unlock()
	if all, _ := json.Marshal(model.requests); !strings.Contains(string(all), `"tool_use_id":"toolu_paddock_3"`) {
		t.Fatal("the session never got verify's answer")
	}
}
