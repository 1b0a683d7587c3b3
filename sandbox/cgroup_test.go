//go:build linux

package sandbox

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProcessLimitPerCommand: a command's process limit counts its own
// processes, not its uid's: a command with a low limit can still fork while
// other processes of the same uid exist (other runs'), and cannot start
// more than its limit (TestResident runs it again through a harness).
func TestProcessLimitPerCommand(t *testing.T) {
	skipUnlessSandbox(t)
	if root, _ := findPids(); root == "" {
		if os.Getenv("CI") == "true" && os.Getuid() == 0 {
			t.Fatal("no pids cgroup on this CI machine")
		}
		t.Skip("no pids cgroup reachable here: the process limit counts the whole uid (Enforcement.ProcsScope says so)")
	}
	// Another command of the same run holds 24 processes meanwhile (the
	// commands of a run share its harness's user namespace, where
	// RLIMIT_NPROC counts them together).
	ws, _ := newWorkspace(t)
	withProbe(t, ws)
	p := testPool
	if p == nil {
		p = &Pool{Dir: t.TempDir()}
		defer p.Close()
	}
	held := make(chan struct{})
	go func() {
		defer close(held)
		p.Run(context.Background(), "r-test", Spec{Argv: []string{"./probe", "probe", "spawn", "24"}, Workspace: ws, UID: sandboxUID(),
			Env: []string{"PATH=/usr/bin:/bin"}, Protected: []string{".git"}, Limits: Limits{Procs: 64}})
	}()
	time.Sleep(500 * time.Millisecond)
	res, err := p.Run(context.Background(), "r-test", Spec{Argv: []string{"sh", "-c", "sleep 0.2 & sleep 0.2 & wait && echo forked"}, Workspace: ws,
		UID: sandboxUID(), Env: []string{"PATH=/usr/bin:/bin"}, Protected: []string{".git"}, Limits: Limits{Procs: 8}})
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "forked" || res.Enforcement.ProcsScope != ProcsPerCommand {
		t.Fatalf("a low limit beside the run's other processes: %+v %v", res, err)
	}
	<-held
	spawn := func(limit int) int {
		t.Helper()
		res := runSpec(t, Spec{Argv: []string{"./probe", "probe", "spawn", "30"}, Workspace: ws, Limits: Limits{Procs: limit, Wall: 20 * time.Second}})
		n, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
		if err != nil {
			t.Fatalf("spawn: %q %q", res.Stdout, res.Stderr)
		}
		return n
	}
	// The probe's own threads count too: a limit of 16 leaves it fewer children.
	if n, all := spawn(16), spawn(128); n >= 16 || n == 0 || all != 30 {
		t.Fatalf("children started: %d under a limit of 16, %d of 30 under 128", n, all)
	}
}
