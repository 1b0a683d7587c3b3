package broker

import (
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
)

func tester() *paddock.AgentDefinition {
	return &paddock.AgentDefinition{Name: "tester", Workspace: "write",
		Tools: []string{"read", "glob", "grep", "exec", "verify", "capabilities", "request_access", "write"},
		Tool: map[string]paddock.ToolRule{
			"exec":  {Allow: []string{"echo", "go test"}, Ask: []string{"git push"}, Deny: []string{"go test -exec"}},
			"write": {Allow: []string{"docs/**", "*.md"}, Deny: []string{"docs/secret/**"}},
		},
		Env: []string{"GOFLAGS", "CI=1"}, Net: "allow=proxy.golang.org,*.example.com",
		Limits: paddock.AgentLimits{Timeout: "5m", Procs: 64}}
}

var active = State{Access: paddock.AccessWrite, Workspace: paddock.StateActive}

func sh(s string) []string { return []string{"sh", "-c", s} }

func TestDecide(t *testing.T) {
	grantVet := &paddock.AccessRequest{Kind: paddock.AccessCommand, Command: []string{"go", "vet"}, State: paddock.RequestGranted}
	pendingCurl := &paddock.AccessRequest{Kind: paddock.AccessCommand, Command: []string{"curl"}, State: paddock.RequestPending}
	grantStat := &paddock.AccessRequest{Kind: paddock.AccessTool, Tool: "stat", State: paddock.RequestGranted}
	grantPath := &paddock.AccessRequest{Kind: paddock.AccessPath, Tool: "write", Path: "src/**", State: paddock.RequestGranted}
	grantNet := &paddock.AccessRequest{Kind: paddock.AccessNetwork, Domain: "sum.golang.org", State: paddock.RequestGranted}
	grantLimit := &paddock.AccessRequest{Kind: paddock.AccessLimit, Limit: "timeout", Value: "30m", State: paddock.RequestGranted}
	all := []*paddock.AccessRequest{grantVet, pendingCurl, grantStat, grantPath, grantNet, grantLimit}
	cases := []struct {
		name   string
		def    *paddock.AgentDefinition
		grants []*paddock.AccessRequest
		call   Call
		state  State
		want   paddock.Decision
		rule   paddock.Rule
	}{
		{"no definition", nil, nil, Call{Tool: "read"}, active, paddock.DecisionDeny, RuleNoDefinition},
		{"unknown tool", tester(), nil, Call{Tool: "launch"}, active, paddock.DecisionDeny, RuleUnknownTool},
		{"declared tool", tester(), nil, Call{Tool: "read"}, active, paddock.DecisionAllow, ""},
		{"undeclared tool", tester(), nil, Call{Tool: "edit"}, active, paddock.DecisionDeny, RuleUndeclared},
		{"undeclared submit", tester(), nil, Call{Tool: "submit"}, active, paddock.DecisionDeny, RuleUndeclared},
		{"tool granted", tester(), all, Call{Tool: "stat"}, active, paddock.DecisionAllow, ""},
		{"tool asked, pending", tester(), []*paddock.AccessRequest{{Kind: paddock.AccessTool, Tool: "stat", State: paddock.RequestPending}}, Call{Tool: "stat"}, active, paddock.DecisionDeny, RuleUndeclared},
		{"tool denied stays denied", tester(), []*paddock.AccessRequest{{Kind: paddock.AccessTool, Tool: "stat", State: paddock.RequestDenied}}, Call{Tool: "stat"}, active, paddock.DecisionDeny, RuleUndeclared},
		{"read run writes", tester(), nil, Call{Tool: "write", Paths: []string{"a.md"}}, State{Access: paddock.AccessRead, Workspace: paddock.StateActive}, paddock.DecisionDeny, RuleReadOnly},
		{"none run reads", tester(), nil, Call{Tool: "read"}, State{Access: paddock.AccessNone}, paddock.DecisionDeny, paddock.RuleAccessNone},
		{"none run asks", tester(), nil, Call{Tool: "capabilities"}, State{Access: paddock.AccessNone}, paddock.DecisionAllow, ""},
		{"none run's exec", tester(), nil, Call{Tool: "exec", Argv: []string{"echo"}}, State{Access: paddock.AccessNone}, paddock.DecisionDeny, paddock.RuleAccessNone},
		{"none run's start command", &paddock.AgentDefinition{Name: "judge", Workspace: "none", Command: []string{"judge"}}, nil, Call{Tool: "exec", Argv: []string{"judge"}, Start: true}, State{Access: paddock.AccessNone}, paddock.DecisionAllow, ""},
		{"none run's start, another tool", tester(), nil, Call{Tool: "read", Start: true}, State{Access: paddock.AccessNone}, paddock.DecisionDeny, paddock.RuleAccessNone},
		{"rejected run", tester(), nil, Call{Tool: "read"}, State{Access: paddock.AccessWrite, Workspace: paddock.StateRejected}, paddock.DecisionDeny, RuleState},

		{"exec allowed", tester(), nil, Call{Tool: "exec", Argv: []string{"go", "test", "./..."}}, active, paddock.DecisionAllow, ""},
		{"exec echo", tester(), nil, Call{Tool: "exec", Argv: []string{"echo", "hi"}}, active, paddock.DecisionAllow, ""},
		{"exec other", tester(), nil, Call{Tool: "exec", Argv: []string{"go", "build"}}, active, paddock.DecisionDeny, RuleCommand},
		{"exec by path", tester(), nil, Call{Tool: "exec", Argv: []string{"/tmp/go", "test"}}, active, paddock.DecisionDeny, RuleCommand},
		{"exec chain", tester(), nil, Call{Tool: "exec", Argv: sh("go test ./... && curl x")}, active, paddock.DecisionDeny, RuleCommand},
		{"exec chain ok", tester(), nil, Call{Tool: "exec", Argv: sh("cd sub && go test ./... | tee /dev/null; echo done")}, active, paddock.DecisionDeny, RuleCommand},
		{"exec chain all allowed", tester(), nil, Call{Tool: "exec", Argv: sh("cd sub && go test ./... || echo failed; echo done")}, active, paddock.DecisionAllow, ""},
		{"exec substitution", tester(), nil, Call{Tool: "exec", Argv: sh("echo $(curl x)")}, active, paddock.DecisionDeny, RuleCommand},
		{"exec backticks", tester(), nil, Call{Tool: "exec", Argv: sh("echo `curl x`")}, active, paddock.DecisionDeny, RuleCommand},
		{"exec process substitution", tester(), nil, Call{Tool: "exec", Argv: []string{"bash", "-c", "echo <(curl x)"}}, active, paddock.DecisionDeny, RuleCommand},
		{"exec sh -c", tester(), nil, Call{Tool: "exec", Argv: []string{"sh", "-c", "git push"}}, active, paddock.DecisionNeedsApproval, RuleNeedsApproval},
		{"exec nested sh", tester(), nil, Call{Tool: "exec", Argv: sh(`bash -ec "sh -c 'curl x'"`)}, active, paddock.DecisionDeny, RuleCommand},
		{"exec login shell", tester(), nil, Call{Tool: "exec", Argv: sh(`bash -lc "go test"`)}, active, paddock.DecisionDeny, RuleUnsure},
		{"exec eval", tester(), nil, Call{Tool: "exec", Argv: sh(`eval "curl x"`)}, active, paddock.DecisionDeny, RuleCommand},
		{"exec eval expansion", tester(), nil, Call{Tool: "exec", Argv: sh(`eval "$CMD"`)}, active, paddock.DecisionDeny, RuleUnsure},
		{"exec name expansion", tester(), nil, Call{Tool: "exec", Argv: sh(`$GO test`)}, active, paddock.DecisionDeny, RuleUnsure},
		{"exec glob name", tester(), nil, Call{Tool: "exec", Argv: sh(`ec* hi`)}, active, paddock.DecisionDeny, RuleUnsure},
		{"exec quoted name", tester(), nil, Call{Tool: "exec", Argv: sh(`"go" 'test' ./...`)}, active, paddock.DecisionAllow, ""},
		{"exec escaped name", tester(), nil, Call{Tool: "exec", Argv: sh(`c\url x`)}, active, paddock.DecisionDeny, RuleCommand},
		{"exec function body", tester(), nil, Call{Tool: "exec", Argv: sh(`f() { curl x; }; f`)}, active, paddock.DecisionDeny, RuleCommand},
		{"exec env wrapper", tester(), nil, Call{Tool: "exec", Argv: []string{"env", "curl", "x"}}, active, paddock.DecisionDeny, RuleCommand},
		{"exec timeout wrapper", tester(), nil, Call{Tool: "exec", Argv: sh(`timeout 5 curl x`)}, active, paddock.DecisionDeny, RuleCommand},
		{"exec xargs sh", tester(), nil, Call{Tool: "exec", Argv: sh(`echo x | xargs sh -c`)}, active, paddock.DecisionDeny, RuleUnsure},
		{"exec find -exec", tester(), nil, Call{Tool: "exec", Argv: []string{"find", ".", "-exec", "curl", "{}", ";"}}, active, paddock.DecisionDeny, RuleCommand},
		{"exec parse error", tester(), nil, Call{Tool: "exec", Argv: sh(`echo "unterminated`)}, active, paddock.DecisionDeny, RuleUnsure},
		{"exec denied prefix", tester(), nil, Call{Tool: "exec", Argv: []string{"go", "test", "-exec", "curl"}}, active, paddock.DecisionDeny, RuleCommand},
		{"exec ask", tester(), nil, Call{Tool: "exec", Argv: []string{"git", "push"}}, active, paddock.DecisionNeedsApproval, RuleNeedsApproval},
		{"exec granted command", tester(), all, Call{Tool: "exec", Argv: sh("go vet ./... && go test ./...")}, active, paddock.DecisionAllow, ""},
		{"exec pending command", tester(), all, Call{Tool: "exec", Argv: []string{"curl", "x"}}, active, paddock.DecisionDeny, RuleCommand},
		{"exec assignment not allowed", tester(), nil, Call{Tool: "exec", Argv: sh("PATH=/tmp go test")}, active, paddock.DecisionDeny, RuleEnv},
		{"exec assignment allowed", tester(), nil, Call{Tool: "exec", Argv: sh("GOFLAGS=-count=1 go test")}, active, paddock.DecisionAllow, ""},
		{"exec export", tester(), nil, Call{Tool: "exec", Argv: []string{"bash", "-c", "export LD_PRELOAD=/x.so; go test"}}, active, paddock.DecisionDeny, RuleEnv},
		{"exec env asked", tester(), nil, Call{Tool: "exec", Argv: []string{"echo"}, Env: []string{"HOME=/x"}}, active, paddock.DecisionDeny, RuleEnv},
		{"exec env allowed", tester(), nil, Call{Tool: "exec", Argv: []string{"echo"}, Env: []string{"GOFLAGS=-v"}}, active, paddock.DecisionAllow, ""},
		{"exec net host", tester(), nil, Call{Tool: "exec", Argv: []string{"echo"}, Net: "host"}, active, paddock.DecisionDeny, RuleNetwork},
		{"exec net listed", tester(), nil, Call{Tool: "exec", Argv: []string{"echo"}, Net: "allow=proxy.golang.org,api.example.com"}, active, paddock.DecisionAllow, ""},
		{"exec net unlisted", tester(), nil, Call{Tool: "exec", Argv: []string{"echo"}, Net: "allow=sum.golang.org"}, active, paddock.DecisionDeny, RuleNetwork},
		{"exec net granted", tester(), all, Call{Tool: "exec", Argv: []string{"echo"}, Net: "allow=sum.golang.org"}, active, paddock.DecisionAllow, ""},
		{"exec limit over", tester(), nil, Call{Tool: "exec", Argv: []string{"echo"}, Limits: paddock.AgentLimits{Timeout: "10m"}}, active, paddock.DecisionDeny, RuleLimit},
		{"exec limit granted", tester(), all, Call{Tool: "exec", Argv: []string{"echo"}, Limits: paddock.AgentLimits{Timeout: "10m"}}, active, paddock.DecisionAllow, ""},
		{"exec procs over", tester(), nil, Call{Tool: "exec", Argv: []string{"echo"}, Limits: paddock.AgentLimits{Procs: 65}}, active, paddock.DecisionDeny, RuleLimit},

		{"write allowed path", tester(), nil, Call{Tool: "write", Paths: []string{"docs/a/b.txt"}}, active, paddock.DecisionAllow, ""},
		{"write top md", tester(), nil, Call{Tool: "write", Paths: []string{"./README.md"}}, active, paddock.DecisionAllow, ""},
		{"write outside globs", tester(), nil, Call{Tool: "write", Paths: []string{"main.go"}}, active, paddock.DecisionDeny, RulePath},
		{"write denied glob", tester(), nil, Call{Tool: "write", Paths: []string{"docs/secret/k"}}, active, paddock.DecisionDeny, RulePath},
		{"write granted path", tester(), all, Call{Tool: "write", Paths: []string{"src/x.go"}}, active, paddock.DecisionAllow, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(tc.def, tc.grants, tc.call, tc.state)
			if v.Decision != tc.want || v.Rule != tc.rule {
				t.Fatalf("Decide = %s (%s: %s), want %s (%s)", v.Decision, v.Rule, v.Reason, tc.want, tc.rule)
			}
			if v.Decision != paddock.DecisionAllow && v.Reason == "" {
				t.Fatal("a refusal without its reason")
			}
		})
	}
}

// An unrestricted exec (the built-in coder's) still checks env, network
// and limits, and reads no shell.
func TestUnrestrictedExec(t *testing.T) {
	def := &paddock.AgentDefinition{Name: "coder", Tools: []string{"exec"}, Net: "host", Env: []string{"*"}}
	for _, argv := range [][]string{{"curl", "x"}, sh("echo \"unterminated"), sh("$X")} {
		if v := Decide(def, nil, Call{Tool: "exec", Argv: argv, Net: "host", Env: []string{"A=1"}}, active); v.Decision != paddock.DecisionAllow {
			t.Fatalf("%q: %+v", argv, v)
		}
	}
}

func TestCheckRequest(t *testing.T) {
	ok := []paddock.AccessRequestInput{
		{Kind: paddock.AccessTool, Tool: "edit", Reason: "r"},
		{Kind: paddock.AccessCommand, Command: []string{"go", "vet"}, Reason: "r"},
		{Kind: paddock.AccessPath, Tool: "write", Path: "src/**", Reason: "r"},
		{Kind: paddock.AccessNetwork, Domain: "proxy.golang.org", Reason: "r"},
		{Kind: paddock.AccessLimit, Limit: "timeout", Value: "30m", Reason: "r"},
	}
	for _, in := range ok {
		if err := CheckRequest(in); err != nil {
			t.Fatalf("%+v: %v", in, err)
		}
	}
	bad := []paddock.AccessRequestInput{
		{Kind: paddock.AccessTool, Tool: "edit"},
		{Kind: "root", Reason: "r"},
		{Kind: paddock.AccessTool, Tool: "sudo", Reason: "r"},
		{Kind: paddock.AccessPath, Tool: "read", Path: "x", Reason: "r"},
		{Kind: paddock.AccessPath, Tool: "write", Path: "../x", Reason: "r"},
		{Kind: paddock.AccessNetwork, Domain: "a.com,b.com", Reason: "r"},
		{Kind: paddock.AccessLimit, Limit: "timeout", Value: "soon", Reason: "r"},
		{Kind: paddock.AccessLimit, Limit: "nproc", Value: "1", Reason: "r"},
	}
	for _, in := range bad {
		if err := CheckRequest(in); err == nil || paddock.ErrorCode(err) != paddock.CodeBadRequest {
			t.Fatalf("%+v accepted: %v", in, err)
		}
	}
}

// A limit request that lifts a ceiling while it reads as asking for less
// is refused (found by red-teaming the broker, issue #17).
func TestCheckRequestRefusesLimitsThatLiftACeiling(t *testing.T) {
	for _, v := range []string{"0", "-1"} {
		if err := CheckRequest(paddock.AccessRequestInput{Kind: paddock.AccessLimit, Limit: "procs", Value: v, Reason: "fewer"}); err == nil {
			t.Errorf("procs %s accepted", v)
		}
	}
}

// The broker's added cost per call, beside the call it decides (the
// target is under 50 µs: see docs/PERFORMANCE.md).
func BenchmarkDecideRead(b *testing.B) {
	def := tester()
	for b.Loop() {
		Decide(def, nil, Call{Tool: "read"}, active)
	}
}

func BenchmarkDecideExecShell(b *testing.B) {
	def := tester()
	argv := sh("cd sub && go test ./... -run TestX | tee out.txt; echo done")
	for b.Loop() {
		Decide(def, nil, Call{Tool: "exec", Argv: argv}, active)
	}
}

// TestUnmodelledRunnersAreRefused: a program that runs a command from its
// arguments, whose grammar the broker does not model, hides that command
// from the rules; under a narrowed exec it is refused as unreadable, not
// matched by its own name (#29 item 4, what the wrappers left).
func TestUnmodelledRunnersAreRefused(t *testing.T) {
	denyRm := &paddock.AgentDefinition{Name: "careful", Workspace: "write", Tools: []string{"exec"},
		Tool: map[string]paddock.ToolRule{"exec": {Deny: []string{"rm"}}}}
	for _, argv := range [][]string{
		{"flock", "/tmp/l", "rm", "-rf", "src"},
		{"ionice", "-c3", "rm", "x"},
		{"busybox", "rm", "x"},
		{"sudo", "-u", "nobody", "rm", "x"},
		{"unshare", "-r", "rm", "x"},
		{"sh", "-c", "taskset 1 rm x"},
		{"env", "strace", "-f", "rm", "x"},
		{"/usr/bin/watch", "-n1", "rm x"},
	} {
		v := Decide(denyRm, nil, Call{Tool: "exec", Argv: argv}, active)
		if v.Decision != paddock.DecisionDeny || v.Rule != RuleUnsure || !strings.Contains(v.Reason, "run that command itself") {
			t.Errorf("%q under a deny of rm: %+v, want %s", argv, v, RuleUnsure)
		}
	}
	// The command itself, and a runner where nothing is narrowed, pass.
	if v := Decide(denyRm, nil, Call{Tool: "exec", Argv: []string{"ls", "-l"}}, active); v.Decision != paddock.DecisionAllow {
		t.Errorf("ls under a deny of rm: %+v", v)
	}
	open := &paddock.AgentDefinition{Name: "open", Workspace: "write", Tools: []string{"exec"}}
	if v := Decide(open, nil, Call{Tool: "exec", Argv: []string{"flock", "/tmp/l", "make"}}, active); v.Decision != paddock.DecisionAllow {
		t.Errorf("flock where nothing is narrowed: %+v", v)
	}
}

// TestPlanTool: the plan needs no workspace (a none run plans), is a
// declared tool like any other, and a run that takes no more work takes
// no more plans.
func TestPlanTool(t *testing.T) {
	planner := &paddock.AgentDefinition{Name: "planner", Workspace: "none", Tools: []string{paddock.ToolPlan}}
	for _, tc := range []struct {
		name string
		def  *paddock.AgentDefinition
		st   State
		want paddock.Decision
		rule paddock.Rule
	}{
		{"none run", planner, State{Access: paddock.AccessNone}, paddock.DecisionAllow, ""},
		{"active run", planner, active, paddock.DecisionAllow, ""},
		{"retained run", planner, State{Access: paddock.AccessWrite, Workspace: paddock.StateRetained}, paddock.DecisionAllow, ""},
		{"rejected run", planner, State{Access: paddock.AccessWrite, Workspace: paddock.StateRejected}, paddock.DecisionDeny, RuleState},
		{"undeclared", tester(), active, paddock.DecisionDeny, RuleUndeclared},
	} {
		if v := Decide(tc.def, nil, Call{Tool: paddock.ToolPlan}, tc.st); v.Decision != tc.want || v.Rule != tc.rule {
			t.Errorf("%s: %+v, want %s %s", tc.name, v, tc.want, tc.rule)
		}
	}
}
