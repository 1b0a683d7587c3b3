package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
)

// TestExecLimitsCeiling: the operator's exec_limits are the most a command
// gets; a request with the run's token (or the operator's) may lower a
// limit and is refused when it asks for more. A command that outlives the
// server's write timeout still gets its result, answered and streamed.
func TestExecLimitsCeiling(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	os.MkdirAll(home, 0o700)
	repo := newRepo(t, filepath.Join(base, "src", "app"), 1)
	os.WriteFile(filepath.Join(home, "paddock.toml"), []byte("[exec_limits]\nwall = \"20s\"\noutput = \"1MiB\"\nmemory = \"4GiB\"\n"), 0o600)
	t.Setenv("PADDOCK_TEST_WRITE_TIMEOUT", "1s")
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	ctx := context.Background()
	op := client.Unix(filepath.Join(home, "paddock.sock"))
	b, err := op.Bootstrap(ctx, paddock.BootstrapRequest{Project: "app", Task: "t", Agent: paddock.AgentDefinition{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	agent, id := op.WithToken(b.Token), b.Run.ID
	if _, err := agent.Exec(ctx, id, paddock.ExecRequest{Argv: []string{"true"}}); err != nil {
		if strings.Contains(err.Error(), "unsupported") && os.Getenv("CI") != "true" {
			t.Skipf("the sandbox cannot run here: %v", err)
		}
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  paddock.ExecRequest
	}{
		{"timeout", paddock.ExecRequest{Timeout: "1000h"}},
		{"cpu", paddock.ExecRequest{Limits: paddock.ExecLimits{CPU: "1000h"}}},
		{"memory", paddock.ExecRequest{Limits: paddock.ExecLimits{Memory: 1 << 44}}},
		{"output", paddock.ExecRequest{Limits: paddock.ExecLimits{Output: 1 << 40}}},
		{"file size", paddock.ExecRequest{Limits: paddock.ExecLimits{FileSize: 1 << 44}}},
		{"procs", paddock.ExecRequest{Limits: paddock.ExecLimits{Procs: 1 << 30}}},
		{"tmp", paddock.ExecRequest{Limits: paddock.ExecLimits{Tmp: 1 << 44}}},
	} {
		tc.req.Argv = []string{"true"}
		for who, c := range map[string]*client.Client{"agent": agent, "operator": op} {
			_, err := c.Exec(ctx, id, tc.req)
			if !paddock.IsCode(err, paddock.CodeForbidden) || !strings.Contains(err.Error(), "may only lower") {
				t.Errorf("%s asks for more %s: %v, want forbidden", who, tc.name, err)
			}
		}
	}
	// Lower is allowed, and is what the command gets.
	res, err := agent.Exec(ctx, id, paddock.ExecRequest{Argv: []string{"sleep", "5"}, Timeout: "300ms"})
	if err != nil || !res.TimedOut || res.Enforcement.Limits.Wall.String() != "300ms" {
		t.Fatalf("a lower timeout: %+v %v", res, err)
	}
	if res, err = agent.Exec(ctx, id, paddock.ExecRequest{Argv: []string{"true"}}); err != nil || res.Enforcement.Limits.Wall.String() != "20s" || res.Enforcement.Limits.Output != 1<<20 {
		t.Fatalf("the ceiling is the default: %+v %v", res.Enforcement.Limits, err)
	}
	// Longer than the server's write timeout (1s here), answered and streamed.
	slow := paddock.ExecRequest{Argv: []string{"sh", "-c", "sleep 2; echo done"}}
	if res, err = agent.Exec(ctx, id, slow); err != nil || res.Stdout != "done\n" {
		t.Fatalf("a command longer than the write timeout: %+v %v", res, err)
	}
	var out bytes.Buffer
	if res, err = agent.ExecStream(ctx, id, slow, &out, &out); err != nil || res.ExitCode != 0 || out.String() != "done\n" {
		t.Fatalf("a streamed command longer than the write timeout: %+v %v %q", res, err, out.String())
	}
	if r := cli(t, home, "exec", id, "--", "sh", "-c", "sleep 2; echo done"); r.code != 0 || r.out != "done\n" {
		t.Fatalf("paddock exec of a command longer than the write timeout: %d %q %q", r.code, r.out, r.err)
	}
	// Output past the ceiling is cut, streamed or not.
	big := paddock.ExecRequest{Argv: []string{"sh", "-c", "head -c 5000000 /dev/zero"}}
	if res, err = agent.Exec(ctx, id, big); err != nil || !res.Truncated || len(res.Stdout) > 1<<20+100 {
		t.Fatalf("output over the ceiling: truncated %v, %d bytes, %v", res.Truncated, len(res.Stdout), err)
	}
	out.Reset()
	if res, err = agent.ExecStream(ctx, id, big, &out, &out); err != nil || !res.Truncated || out.Len() != 1<<20 {
		t.Fatalf("streamed output over the ceiling: truncated %v, %d bytes, %v", res != nil && res.Truncated, out.Len(), err)
	}
}

// TestDiskQuota: a command that writes past its overlay run's disk quota
// is killed and the result says why; a quick rm gets the run going again.
func TestDiskQuota(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	os.MkdirAll(home, 0o700)
	repo := newRepo(t, filepath.Join(base, "src", "app"), 1)
	os.WriteFile(filepath.Join(home, "paddock.toml"), []byte("disk_quota = \"8MiB\"\n"), 0o600)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "overlay").out)
	if id == "" {
		t.Skip("no overlay runs here")
	}
	r := cli(t, home, "exec", id, "--json", "--", "sh", "-c", "for i in $(seq 200); do head -c 1048576 /dev/zero > f$i; sleep 0.05; done; echo finished")
	var res paddock.ExecResult
	if err := json.Unmarshal([]byte(r.out), &res); err != nil {
		t.Fatalf("%v: %q %q", err, r.out, r.err)
	}
	if !strings.Contains(res.Killed, "disk quota") || strings.Contains(res.Stdout, "finished") || res.Enforcement.Disk == "" {
		t.Fatalf("a command past the run's disk quota: killed %q, stdout %q, disk %q", res.Killed, res.Stdout, res.Enforcement.Disk)
	}
	if r := cli(t, home, "exec", id, "--", "sh", "-c", "rm -f f*; echo cleaned"); r.code != 0 || r.out != "cleaned\n" {
		t.Fatalf("rm over the quota: %d %q %q", r.code, r.out, r.err)
	}
	if r := cli(t, home, "exec", id, "--", "sh", "-c", "sleep 1; echo ok"); r.code != 0 || r.out != "ok\n" {
		t.Fatalf("back under the quota: %d %q %q", r.code, r.out, r.err)
	}
}
