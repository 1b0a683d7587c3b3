package agent

import (
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
)

// The issue's file must be accepted as written.
const tester = `name = "tester"
description = "reads code and runs the tests"
workspace = "write"
tools = ["read", "glob", "grep", "exec", "verify", "capabilities", "request_access"]

[tool.exec]
allow = ["echo", "go test"]
`

func TestParseTheIssuesFile(t *testing.T) {
	d, err := Parse("tester.toml", []byte(tester))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "tester" || d.Workspace != "write" || len(d.Tools) != 7 || d.Tool["exec"].Allow[1] != "go test" {
		t.Fatalf("%+v", d)
	}
	if h := d.Hash(); !strings.HasPrefix(h, "sha256:") || h == (&paddock.AgentDefinition{Name: "tester"}).Hash() {
		t.Fatal(h)
	}
}

func TestParseEveryField(t *testing.T) {
	src := `name = "full"
instructions = "be careful"
workspace = "read"
tools = ["read", "exec", "write"]
network = "allow=proxy.golang.org,*.example.com"
env = ["GOFLAGS", "CI=1"]
secrets = ["API_TOKEN"]
command = ["agent", "--stdio"]

[tool.exec]
allow = ["go test"]
deny = ["go test -exec"]
ask = ["git push"]

[tool.write]
allow = ["docs/**"]

[limits]
timeout = "5m"
cpu = "1m"
procs = 64
memory = "2GiB"
file_size = "10MiB"
output = "1MiB"
tmp = "64MiB"
`
	d, err := Parse("full.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := paddock.AgentLimits{Timeout: "5m", CPU: "1m", Procs: 64, Memory: 2 << 30, FileSize: 10 << 20, Output: 1 << 20, Tmp: 64 << 20}
	if d.Limits != want || d.Net != "allow=proxy.golang.org,*.example.com" || d.Command[1] != "--stdio" || d.Tool["write"].Allow[0] != "docs/**" || d.Tool["exec"].Ask[0] != "git push" {
		t.Fatalf("%+v", d)
	}
}

// Bad files are refused with the file and the line.
func TestParseRefuses(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"unknown key", strings.Replace(tester, `workspace = "write"`, "workspace = \"write\"\ncolour = \"red\"", 1), `x.toml:4: unknown key "colour"`},
		{"unknown key in a table", tester + "alow = [\"ls\"]\n", `x.toml:8: unknown key "tool.exec.alow"`},
		{"unknown tool", strings.Replace(tester, `"glob"`, `"teleport"`, 1), `x.toml:4: tools: there is no tool "teleport"`},
		{"narrowing an undeclared tool", tester + "[tool.write]\nallow = [\"docs/**\"]\n", `x.toml:8: [tool.write] narrows a tool that tools does not list`},
		{"narrowing read", strings.Replace(tester, "[tool.exec]", "[tool.read]", 1), `x.toml:6: [tool.read]: only exec`},
		{"no tools", "name = \"x\"\n", `x.toml: no "tools"`},
		{"bad workspace", strings.Replace(tester, `"write"`, `"rw"`, 1), `x.toml:3: workspace "rw"`},
		{"bad name", strings.Replace(tester, `"tester"`, `"Tester!"`, 1), `x.toml:1: name:`},
		{"bad network", "network = \"everywhere\"\n" + tester, `x.toml:1: network "everywhere"`},
		{"bad limit", tester + "[limits]\nmemory = \"lots\"\n", `x.toml:9: limits.memory`},
		{"bad secret", "secrets = [\"lower\"]\n" + tester, `x.toml:1: secret name "lower"`},
		{"LD_ env", "env = [\"LD_PRELOAD\"]\n" + tester, `x.toml:1: env "LD_PRELOAD"`},
		{"syntax", "name = \n", `x.toml:1:`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.toml", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestBuiltins(t *testing.T) {
	for _, d := range Builtins() {
		if err := Validate(d); err != nil {
			t.Errorf("%s: %v", d.Name, err)
		}
	}
	if d := ForAccess(paddock.AccessRead); d.Name != Reviewer || d.Declares("write") || !d.Declares("verify") {
		t.Fatalf("reviewer: %+v", d)
	}
	if d := ForAccess(paddock.AccessNone); d.Declares("read") || d.Declares("exec") {
		t.Fatalf("decider: %+v", d)
	}
	// An inline definition without tools gets its mode's, written down.
	d := Complete(&paddock.AgentDefinition{Name: "greeter", Workspace: "read"})
	if !d.Declares("grep") || d.Declares("write") {
		t.Fatalf("completed: %+v", d)
	}
}
