//go:build linux

package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestProcessLimitPerCommand: a command's process limit counts its own
// processes, not its uid's: a command with a low limit can still fork while
// other processes of the same uid exist (other runs'), and cannot start
// more than its limit (TestResident runs it again through a harness).
func TestProcessLimitPerCommand(t *testing.T) {
	skipUnlessSandbox(t)
	if findPids().path == "" {
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

// TestCgroupV2Files: a command's cgroup v2 gets its limits as the kernel's
// files spell them, and its accounting is read back from them (on a
// directory standing in for the cgroup; the VM tests, package vmtest, run
// the same against real cgroup v2 kernels).
func TestCgroupV2Files(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"pids.max", "memory.max", "memory.swap.max", "memory.oom.group", "cpu.max", "io.max"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	p := &pidsHierarchy{v2: true, mem: true, cpu: true}
	p.io = true
	l := p.held(Limits{Procs: 32, Memory: 64 << 20, CPUs: 0.5, IOBps: 10 << 20}, "8:0")
	if !l.MemoryCgroup || l.CPUs != 0.5 || l.IOBps != 10<<20 {
		t.Fatalf("held: %+v", l)
	}
	if err := p.limit(dir, l, "8:0"); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"pids.max": "32", "memory.max": "67108864", "memory.swap.max": "0", "memory.oom.group": "1", "cpu.max": "50000 100000", "io.max": "8:0 rbps=10485760 wbps=10485760"} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != want {
			t.Errorf("%s = %q, want %q", f, b, want)
		}
	}
	if addressSpace(l) != unix.RLIM_INFINITY || addressSpace(Limits{Memory: 1 << 30}) != 1<<30 {
		t.Errorf("RLIMIT_AS is not lifted where memory.max holds the memory, or lifted where it does not")
	}
	// Without the controllers, nothing claims them.
	if l := (&pidsHierarchy{}).held(Limits{Memory: 1 << 20, CPUs: 2, IOBps: 1}, "8:0"); l.MemoryCgroup || l.CPUs != 0 || l.IOBps != 0 {
		t.Errorf("a v1 hierarchy claims memory or CPU bandwidth: %+v", l)
	}
	if l := (*pidsHierarchy)(nil).held(Limits{Memory: 1 << 20, CPUs: 2, IOBps: 1}, "8:0"); l.MemoryCgroup || l.CPUs != 0 || l.IOBps != 0 {
		t.Errorf("no hierarchy claims memory or CPU bandwidth: %+v", l)
	}

	if l := p.held(Limits{IOBps: 1}, ""); l.IOBps != 0 {
		t.Errorf("an unknown disk claims an I/O limit: %+v", l)
	}

	os.WriteFile(filepath.Join(dir, "memory.peak"), []byte("52428800\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "memory.events"), []byte("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 1\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "cpu.stat"), []byte("usage_usec 2000000\nuser_usec 1900000\nsystem_usec 100000\nnr_periods 40\nnr_throttled 20\nthrottled_usec 1500000\n"), 0o644)
	u := p.usage(dir)
	if u.MemoryPeak != 50<<20 || !u.OOMKilled || u.Throttled != 1500*time.Millisecond || u.CPU != 2*time.Second {
		t.Fatalf("usage: %+v", u)
	}
	var res Result
	res.account(u)
	if res.MemoryPeak != 50<<20 || !res.OOMKilled || res.Throttled != u.Throttled || res.CPU != u.CPU {
		t.Fatalf("result: %+v", res)
	}
}

// TestCgroupRemovalRace: per-exec commands of every daemon share one run
// cgroup, and whichever command ends last removes it (and the state
// directory's). A command starting meanwhile, in this process or another,
// or a sweep by another daemon, must not fail because the cgroup it was
// about to use vanished (CI saw "stat …/per-exec: no such file or
// directory" from a parallel test binary's command).
func TestCgroupRemovalRace(t *testing.T) {
	skipUnlessSandbox(t)
	if findPids().path == "" {
		t.Skip("no pids cgroup reachable here")
	}
	key := "race-" + strconv.Itoa(os.Getpid())
	// Two hierarchies on one base, as two daemons' per-exec commands have.
	a, b := pidsFor(t.Name()), pidsFor(t.Name())
	if a == nil || b == nil {
		t.Skip("no pids cgroup of our own here")
	}
	mount, path, _, err := pidsMount()
	if err != nil {
		t.Fatal(err)
	}
	origin := filepath.Join(mount, path) // where the commands go back to
	t.Cleanup(func() { a.removeRun(key) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make(chan error, 4)
	for _, p := range []*pidsHierarchy{a, b, a, b} {
		cmd := exec.Command("sleep", "60") // the command
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		go func() {
			for i := 0; i < 150 && ctx.Err() == nil; i++ {
				dir, err := p.enter(key, Limits{Procs: 8}, "", 0, cmd.Process.Pid)
				if err != nil {
					errs <- err
					return
				}
				// Out again, as a command's end leaves its cgroup empty,
				// and removed as a command's end removes it.
				if err := join(origin, cmd.Process.Pid); err != nil {
					errs <- err
					return
				}
				p.removeCommand(dir)
			}
			errs <- nil
		}()
	}
	go func() { // another daemon sweeping its leftovers meanwhile
		for ctx.Err() == nil {
			b.sweep(func(string) bool { return false })
			time.Sleep(time.Millisecond)
		}
	}()
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("a command could not get its cgroup: %v", err)
		}
	}
}
