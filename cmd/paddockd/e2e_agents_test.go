package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// testerTOML is the definition issue #17 says must be accepted as written.
const testerTOML = `name = "tester"
description = "reads code and runs the tests"
workspace = "write"
tools = ["read", "glob", "grep", "exec", "verify", "capabilities", "request_access"]

[tool.exec]
allow = ["echo", "go test"]
`

// TestAgentDefinitionsEndToEnd drives agent definitions and the broker the
// way an operator and an agent do: the CLI (agent add/ls/show, create
// --agent, tool, exec, capabilities, requests, grant, deny, verify), MCP
// (the offered tools, a refusal, request_access) and jobs (an exec job
// refused when it is started), on a Go module whose tests really run.
func TestAgentDefinitionsEndToEnd(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "app"), map[string]string{
		"go.mod":      "module example.com/app\n\ngo 1.22\n",
		"add.go":      "package app\n\nfunc Add(a, b int) int { return a + b }\n",
		"add_test.go": "package app\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n\nfunc TestSkip(t *testing.T) { t.Skip(\"later\") }\n",
		"README.md":   "hello\n",
	})
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	file := filepath.Join(base, "tester.toml")
	os.WriteFile(file, []byte(testerTOML), 0o644)

	// A file with an unknown key is refused with its file and line.
	bad := filepath.Join(base, "bad.toml")
	os.WriteFile(bad, []byte(strings.Replace(testerTOML, "workspace = \"write\"", "workspace = \"write\"\ncolour = \"red\"", 1)), 0o644)
	if r := cli(t, home, "agent", "add", bad); r.code != exitUsage || !strings.Contains(r.err, "bad.toml:4") || !strings.Contains(r.err, "colour") {
		t.Fatalf("unknown key: %d %s", r.code, r.err)
	}
	added := decode[*paddock.AgentRecord](t, cli(t, home, "agent", "add", file, "--json"))
	if added.Definition.Tool["exec"].Allow[1] != "go test" || !strings.HasPrefix(added.Hash, "sha256:") {
		t.Fatalf("added: %+v", added)
	}
	if out := cli(t, home, "agent", "ls").must(t).out; !strings.Contains(out, "tester") || !strings.Contains(out, "coder") || !strings.Contains(out, "decider") {
		t.Fatalf("agent ls:\n%s", out)
	}
	if out := cli(t, home, "agent", "show", "tester").must(t).out; !strings.Contains(out, `exec allow  "echo", "go test"`) {
		t.Fatalf("agent show:\n%s", out)
	}
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--agent", "tester", "--kind", "clone").must(t).out)
	if r := cli(t, home, "create", "-p", "app", "--agent", "tester", "--access", "read"); r.code != exitUsage {
		t.Fatalf("an access that contradicts the agent: %d %s", r.code, r.err)
	}

	// CLI: an undeclared tool, a narrowed exec allowed and refused.
	if r := cli(t, home, "tool", id, "write", "--arg", "path=x.txt", "--arg", "content=x"); r.code != exitForbidden || !strings.Contains(r.err, "not granted the tool write") {
		t.Fatalf("undeclared write: %d %s", r.code, r.err)
	}
	if r := cli(t, home, "exec", id, "--", "echo", "allowed"); r.code != 0 || r.out != "allowed\n" {
		t.Fatalf("allowed echo: %d %q %s", r.code, r.out, r.err)
	}
	for _, line := range []string{"go test ./... && curl x", "echo $(curl x)", "sh -c 'git push'", "eval 'curl x'", "go vet ./..."} {
		if r := cli(t, home, "exec", id, "--", "sh", "-c", line); r.code != execFailed || !strings.Contains(r.err, "command_not_allowed") {
			t.Errorf("%q: exit %d %s", line, r.code, r.err)
		}
	}
	r := cli(t, home, "exec", id, "--", "sh", "-c", "cd . && go test -count=1 ./...")
	if r.code != 0 || !strings.Contains(r.out, "ok") {
		t.Fatalf("go test in the run: %d %s %s", r.code, r.out, r.err)
	}
	caps := decode[*paddock.Capabilities](t, cli(t, home, "capabilities", id, "--json"))
	var names []string
	for _, tc := range caps.Tools {
		names = append(names, tc.Name)
	}
	if !slices.Equal(names, []string{"capabilities", "exec", "glob", "grep", "read", "request_access", "verify"}) || caps.AgentHash != added.Hash || caps.Enforcement == nil || !slices.Contains(caps.Checks, "test") {
		t.Fatalf("capabilities: %v %+v", names, caps)
	}
	// What holds each property: on this kernel, and for the latest command.
	if len(caps.Holds) < 8 || len(caps.Enforcement.Holds) < 8 {
		t.Fatalf("capabilities say nothing of what holds the confinement: %+v / %+v", caps.Holds, caps.Enforcement.Holds)
	}
	if h := cli(t, home, "capabilities", id).out; !strings.Contains(h, "held by:") || !strings.Contains(h, "net-namespace") {
		t.Fatalf("capabilities print no table of what holds what:\n%s", h)
	}

	// MCP: the tools offered are the definition's; a refusal is a tool
	// error; request_access files a request the operator grants.
	ctx := context.Background()
	cmd := exec.Command(binary, "mcp", id, "--home", home)
	cmd.Env = append(os.Environ(), "PADDOCK_NO_AUTOSTART=1")
	s, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	listed, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var offered []string
	for _, tl := range listed.Tools {
		offered = append(offered, tl.Name)
	}
	slices.Sort(offered)
	if !slices.Equal(offered, names) {
		t.Fatalf("MCP offers %v, capabilities %v", offered, names)
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "request_access", Arguments: map[string]any{"kind": "command", "command": []string{"go", "vet"}, "reason": "to lint"}})
	if err != nil || res.IsError {
		t.Fatalf("request_access: %+v %v", res, err)
	}
	var q paddock.AccessRequest
	json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &q)
	if q.State != paddock.RequestPending || q.ID == "" {
		t.Fatalf("request: %+v", q)
	}
	if out := cli(t, home, "requests", id).must(t).out; !strings.Contains(out, q.ID) || !strings.Contains(out, `command "go vet"`) || !strings.Contains(out, "to lint") {
		t.Fatalf("requests:\n%s", out)
	}
	if r := cli(t, home, "exec", id, "--", "go", "vet", "./..."); r.code != execFailed {
		t.Fatalf("go vet before the grant: %d", r.code)
	}
	cli(t, home, "grant", id, q.ID, "--note", "fine").must(t)
	if r := cli(t, home, "exec", id, "--", "go", "vet", "./..."); r.code != 0 {
		t.Fatalf("go vet after the grant: %d %s", r.code, r.err)
	}
	if r := cli(t, home, "deny", id, q.ID); r.code != exitConflict {
		t.Fatalf("deciding twice: %d %s", r.code, r.err)
	}
	res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "verify", Arguments: map[string]any{"checks": []string{"test"}}})
	if err != nil || res.IsError {
		t.Fatalf("verify over MCP: %+v %v", res, err)
	}

	// Jobs: an exec job the definition refuses is refused when started.
	op := client.Unix(filepath.Join(home, "paddock.sock"))
	if _, err := op.StartJob(ctx, id, paddock.StartJobRequest{Kind: paddock.JobExec, Exec: &paddock.ExecRequest{Argv: []string{"curl", "x"}}}); paddock.ErrorCode(err) != paddock.CodeForbidden {
		t.Fatalf("a refused exec job: %v", err)
	}

	// Verify runs the manifest's go test, with its counts, tied to the hash.
	v := decode[*paddock.VerifyResult](t, cli(t, home, "verify", id, "test", "--json"))
	cs := decode[*paddock.ChangeSet](t, cli(t, home, "diff", id, "--json"))
	if !v.Passed || v.Hash != cs.Hash || len(v.Checks) != 1 || v.Checks[0].Tests == nil || v.Checks[0].Tests.Passed != 1 || v.Checks[0].Tests.Skipped != 1 {
		t.Fatalf("verify: %+v (change set %s)", v, cs.Hash)
	}
	if strings.Contains(v.Checks[0].Output, `"Action"`) {
		t.Fatalf("verify's output is go test's JSON, not its text: %s", v.Checks[0].Output)
	}

	// Editing the definition changes nothing in a run made with it.
	os.WriteFile(file, []byte(strings.Replace(testerTOML, `"echo", "go test"`, `"echo"`, 1)), 0o644)
	cli(t, home, "agent", "add", file).must(t)
	if r := cli(t, home, "exec", id, "--", "go", "test", "./..."); r.code != 0 {
		t.Fatalf("the run's copy changed with the definition: %d %s", r.code, r.err)
	}
	cli(t, home, "agent", "rm", "tester").must(t)
	if caps := decode[*paddock.Capabilities](t, cli(t, home, "capabilities", id, "--json")); caps.AgentHash != added.Hash {
		t.Fatalf("after rm: %+v", caps)
	}
}

// TestVerifyPytestReports: a Python project's tests run under pytest as the
// manifest declares them, and verify reads the JUnit report pytest wrote in
// the run's home (not the workspace) for its counts.
func TestVerifyPytestReports(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "py"), map[string]string{
		"pyproject.toml": "[project]\nname = \"calc\"\nversion = \"1.0\"\n\n[tool.pytest.ini_options]\naddopts = \"-ra\"\n",
		"calc.py":        "def add(a, b):\n    return a + b\n",
		"test_calc.py":   "import pytest\nimport calc\n\ndef test_add():\n    assert calc.add(1, 2) == 3\n\ndef test_zero():\n    assert calc.add(0, 0) == 0\n\n@pytest.mark.skip(reason='later')\ndef test_later():\n    pass\n",
	})
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	if out := cli(t, home, "manifest", "py").must(t).out; !strings.Contains(out, "pytest") {
		t.Fatalf("manifest:\n%s", out)
	}
	id := strings.TrimSpace(cli(t, home, "create", "-p", "py", "--kind", "clone").must(t).out)
	// pytest as the run's commands find it (their PATH is paddock's own).
	if r := cli(t, home, "exec", id, "--", "python3", "-m", "pytest", "--version"); r.code != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI installs python3-pytest (.ci/run): %s", r.err)
		}
		t.Skipf("pytest is not installed where a run finds it (Debian: python3-pytest): %s", r.err)
	}
	v := decode[*paddock.VerifyResult](t, cli(t, home, "verify", id, "test", "--json"))
	if !v.Passed || len(v.Checks) != 1 || v.Checks[0].Tests == nil || v.Checks[0].Tests.Passed != 2 || v.Checks[0].Tests.Skipped != 1 {
		t.Fatalf("verify: %+v", v)
	}
	// Without --json, each check is shown on stderr as it ends.
	if r := cli(t, home, "verify", id, "test"); r.code != 0 || !strings.Contains(r.err, "paddock: ran python3 -m pytest") || !strings.Contains(r.out, "tests: 2 passed, 0 failed, 1 skipped") {
		t.Fatalf("verify's progress: %d\n%s\n%s", r.code, r.out, r.err)
	}
	// A failing test fails the check, and is named.
	cli(t, home, "tool", id, "edit", "--arg", "path=calc.py", "--arg", "old_string=a + b", "--arg", "new_string=a - b").must(t)
	r := cli(t, home, "verify", id, "test", "--json")
	v = nil
	json.Unmarshal([]byte(r.out), &v)
	if v == nil || r.code != 1 || v.Passed || v.Checks[0].Tests == nil || v.Checks[0].Tests.Failed != 1 || !strings.Contains(strings.Join(v.Checks[0].Tests.Failures, " "), "test_add") {
		t.Fatalf("a failing test: exit %d %+v", r.code, v)
	}
	if v.Hash == "" || v.Stale {
		t.Fatalf("the result is not tied to the change set: %+v", v)
	}
}
