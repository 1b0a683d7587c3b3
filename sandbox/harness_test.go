//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestResident runs the sandbox's tests again, every command forked from
// a harness: the escapes, limits and leftovers must come out the same.
func TestResident(t *testing.T) {
	skipUnlessSandbox(t)
	testPool = &Pool{Dir: t.TempDir()}
	defer func() { testPool.Close(); testPool = nil }()
	for name, f := range map[string]func(*testing.T){
		"Basics": TestBasics, "Escapes": TestEscapes, "AllowedWork": TestAllowedWork, "ReadOnlyRun": TestReadOnlyRun, "ProtectedPaths": TestProtectedPaths,
		"DescriptorsAndEnvironment": TestDescriptorsAndEnvironment, "Limits": TestLimits,
		"NothingOutlivesTheCommand": TestNothingOutlivesTheCommand, "UnprivilegedDaemonPath": TestUnprivilegedDaemonPath,
		"AllowListNetwork": TestAllowListNetwork, "LoopbackWithoutNetwork": TestLoopbackWithoutNetwork, "CredentialTheCommandNeverSees": TestCredentialTheCommandNeverSees, "ForeignABI": TestForeignABI, "ProcessLimitPerCommand": TestProcessLimitPerCommand, "Binds": TestBinds,
		"Stdin": TestStdin, "Terminal": TestTerminal, "TerminalStreamsInput": TestTerminalStreamsInput,
	} {
		t.Run(name, f)
	}
}

func poolRun(t *testing.T, p *Pool, ws string, script string, l Limits) *Result {
	t.Helper()
	res, err := p.Run(context.Background(), "r-test", Spec{Argv: []string{"bash", "-c", script}, Workspace: ws, UID: sandboxUID(),
		Env: []string{"PATH=/usr/bin:/bin", "LANG=C"}, Protected: []string{".git"}, Limits: l})
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	return res
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

func waitGone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if !alive(pid) {
			return
		}
	}
	t.Fatalf("harness %d still runs after %v", pid, within)
}

// abandon drops the pool's connections the way a crashed daemon would:
// no close message, the harnesses left running.
func (p *Pool) abandon() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.hs {
		h.conn.Close()
	}
	p.hs = nil
	p.closed = true
}

// TestHarnessIsReused: commands of a run share one harness; a run whose
// sandbox changes gets a new one.
func TestHarnessIsReused(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	p := &Pool{Dir: t.TempDir()}
	defer p.Close()
	first := poolRun(t, p, ws, "true", Limits{})
	for i := 0; i < 3; i++ {
		res := poolRun(t, p, ws, "echo $$; ls /proc | grep -c '^[0-9]'", Limits{})
		if res.Enforcement.Mode != "resident" || res.Enforcement.HarnessPID != first.Enforcement.HarnessPID || res.Enforcement.HarnessPID == 0 {
			t.Fatalf("not the same harness: %+v vs %+v", res.Enforcement, first.Enforcement)
		}
		// The command is its own pid namespace's init and sees only its own processes.
		if string(res.Stdout) != "1\n2\n" && string(res.Stdout) != "1\n3\n" {
			t.Fatalf("the command's pid namespace: %q", res.Stdout)
		}
	}
	other := poolRun(t, p, ws, "true", Limits{Tmp: 1 << 20})
	if other.Enforcement.HarnessPID == first.Enforcement.HarnessPID {
		t.Fatal("a different /tmp size kept the old harness")
	}
	waitGone(t, first.Enforcement.HarnessPID, 5*time.Second)
}

// TestHarnessSurvivesItsCommands: a command that kills everything it can,
// tries to trace or read its harness, or forks a bomb leaves the harness
// able to run the next one; the harness is not dumpable.
func TestHarnessSurvivesItsCommands(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	withProbe(t, ws)
	p := &Pool{Dir: t.TempDir()}
	defer p.Close()
	pid := poolRun(t, p, ws, "true", Limits{}).Enforcement.HarnessPID
	if os.Getuid() == 0 {
		// /proc files of a process that is not dumpable belong to root.
		var st syscall.Stat_t
		if err := syscall.Stat(fmt.Sprintf("/proc/%d/mem", pid), &st); err != nil || st.Uid != 0 {
			t.Fatalf("the harness's /proc/PID/mem: uid %d (%v): it is dumpable", st.Uid, err)
		}
	}
	attacks := []struct {
		name, script string
		l            Limits
	}{
		{"kill everything", "kill -9 -1; kill -9 1; echo done", Limits{}},
		{"signal by every pid", "for p in $(seq 2 400); do kill -9 $p 2>/dev/null; done; echo done", Limits{}},
		{"ptrace", "./probe probe ptrace 1; for p in /proc/[0-9]*; do ./probe probe ptrace ${p#/proc/}; done", Limits{}},
		{"read memory", "cat /proc/1/mem /proc/*/environ 2>&1 | head -c 200", Limits{}},
		{"fork bomb", "bomb() { bomb | bomb & }; bomb; sleep 2", Limits{Procs: 64, Wall: 4 * time.Second}},
		{"sleep past its wall", "sleep 100", Limits{Wall: 300 * time.Millisecond}},
	}
	for _, a := range attacks {
		res := poolRun(t, p, ws, a.script, a.l)
		if strings.Contains(string(res.Stdout), "ESCAPED") {
			t.Fatalf("%s: escaped: %s", a.name, res.Stdout)
		}
		next := poolRun(t, p, ws, "echo next", Limits{})
		if string(next.Stdout) != "next\n" || next.Enforcement.HarnessPID != pid || !alive(pid) {
			t.Fatalf("after %q the harness did not run the next command the same (%q, pid %d→%d)", a.name, next.Stdout, pid, next.Enforcement.HarnessPID)
		}
	}
}

// TestHarnessOutlivesTheDaemon: after a crash the next daemon re-attaches
// to the run's harness; one that no daemon comes back for exits.
func TestHarnessOutlivesTheDaemon(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	dir := t.TempDir()
	p1 := &Pool{Dir: dir, Orphan: 2 * time.Second}
	pid := poolRun(t, p1, ws, "true", Limits{}).Enforcement.HarnessPID
	p1.abandon()
	time.Sleep(100 * time.Millisecond)
	if !alive(pid) {
		t.Fatal("the harness died with its daemon")
	}
	p2 := &Pool{Dir: dir, Orphan: 2 * time.Second}
	res := poolRun(t, p2, ws, "echo again", Limits{})
	if res.Enforcement.HarnessPID != pid || string(res.Stdout) != "again\n" {
		t.Fatalf("not re-attached: harness %d, was %d (%q)", res.Enforcement.HarnessPID, pid, res.Stdout)
	}
	// A command running when the daemon goes away dies with the connection.
	marker := fmt.Sprint(4000000 + time.Now().UnixNano()%1000000)
	done := make(chan *Result, 1)
	go func() {
		r, _ := p2.Run(context.Background(), "r-test", Spec{Argv: []string{"sleep", marker}, Workspace: ws, UID: sandboxUID(),
			Env: []string{"PATH=/usr/bin:/bin"}, Protected: []string{".git"}})
		done <- r
	}()
	time.Sleep(300 * time.Millisecond)
	p2.abandon()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the command's caller was not told its harness connection ended")
	}
	time.Sleep(200 * time.Millisecond)
	if out, _ := exec.Command("pgrep", "-f", "sleep "+marker).Output(); len(out) > 0 {
		exec.Command("pkill", "-f", "sleep "+marker).Run()
		t.Fatal("a command outlived its daemon's connection")
	}
	// No daemon comes back: the harness exits after its orphan time, and
	// the next daemon sweeps what it left.
	waitGone(t, pid, 6*time.Second)
	(&Pool{Dir: dir}).Close()
}

// TestHarnessIdleAndRelease: an idle harness is given back, and the next
// command gets a new one; Release gives one back at once.
func TestHarnessIdleAndRelease(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	p := &Pool{Dir: t.TempDir(), Idle: 300 * time.Millisecond}
	defer p.Close()
	pid := poolRun(t, p, ws, "true", Limits{}).Enforcement.HarnessPID
	waitGone(t, pid, 5*time.Second)
	pid2 := poolRun(t, p, ws, "true", Limits{}).Enforcement.HarnessPID
	if pid2 == pid || pid2 == 0 {
		t.Fatalf("no new harness after idling: %d", pid2)
	}
	p.Release("r-test")
	waitGone(t, pid2, 3*time.Second)
	if len(p.Keys()) != 0 {
		t.Fatalf("sockets left: %v", p.Keys())
	}
}

// TestHarnessCancel: a cancelled command dies at once; the harness stays.
func TestHarnessCancel(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	p := &Pool{Dir: t.TempDir()}
	defer p.Close()
	pid := poolRun(t, p, ws, "true", Limits{}).Enforcement.HarnessPID
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := p.Run(ctx, "r-test", Spec{Argv: []string{"sleep", "100"}, Workspace: ws, UID: sandboxUID(),
		Env: []string{"PATH=/usr/bin:/bin"}, Protected: []string{".git"}})
	if err != nil || res.Signal != "killed" || time.Since(start) > 5*time.Second {
		t.Fatalf("cancel: %+v %v after %v", res, err, time.Since(start))
	}
	if poolRun(t, p, ws, "true", Limits{}).Enforcement.HarnessPID != pid {
		t.Fatal("the cancel took the harness down")
	}
	// A cancel that reaches the harness before the command's fork.
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(time.Duration(i%4) * 100 * time.Microsecond); cancel() }()
		start := time.Now()
		res, err := p.Run(ctx, "r-test", Spec{Argv: []string{"sleep", "100"}, Workspace: ws, UID: sandboxUID(),
			Env: []string{"PATH=/usr/bin:/bin"}, Protected: []string{".git"}})
		if err != nil || time.Since(start) > 5*time.Second {
			t.Fatalf("an early cancel: %+v %v after %v", res, err, time.Since(start))
		}
	}
	_, err = p.Run(context.Background(), "r-test", Spec{Argv: []string{"no-such-command"}, Workspace: ws, UID: sandboxUID(),
		Env: []string{"PATH=/usr/bin:/bin"}, Protected: []string{".git"}})
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("a missing command: %v", err)
	}
}

// TestHarnessKeepsRunningCommands: a command made for another sandbox
// configuration while one runs does not end it.
func TestHarnessKeepsRunningCommands(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	p := &Pool{Dir: t.TempDir()}
	defer p.Close()
	done := make(chan *Result, 1)
	go func() {
		res, _ := p.Run(context.Background(), "r-test", Spec{Argv: []string{"sh", "-c", "sleep 1; echo survived"}, Workspace: ws, UID: sandboxUID(),
			Env: []string{"PATH=/usr/bin:/bin"}, Protected: []string{".git"}})
		done <- res
	}()
	time.Sleep(300 * time.Millisecond)
	other := poolRun(t, p, ws, "echo other", Limits{Tmp: 1 << 20})
	if string(other.Stdout) != "other\n" || other.Enforcement.Mode != "per-exec" {
		t.Fatalf("the other command: %q %s", other.Stdout, other.Enforcement.Mode)
	}
	if res := <-done; res == nil || string(res.Stdout) != "survived\n" {
		t.Fatalf("the running command was ended: %+v", res)
	}
}

// TestReleaseOfAnOrphan: a harness whose daemon died is ended at once by
// the next daemon's Release, without re-attaching to it, however quickly
// that daemon lets go of the connection (the harness greets first, and
// once missed the close that came before its greeting), many times over.
func TestReleaseOfAnOrphan(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	dir := t.TempDir()
	for i := 0; i < 5; i++ {
		p1 := &Pool{Dir: dir, Orphan: time.Minute}
		pid := poolRun(t, p1, ws, "true", Limits{}).Enforcement.HarnessPID
		p1.abandon()
		p2 := &Pool{Dir: dir, Orphan: time.Minute}
		p2.Release("r-test")
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("round %d: the orphaned harness %d outlived Release", i, pid)
		}
		if len(p2.Keys()) != 0 {
			t.Fatalf("round %d: its socket is left: %v", i, p2.Keys())
		}
	}
}

// TestConcurrentFirstCommands: commands of a run that arrive together
// while its harness is still being made share that harness; none of them
// takes the new harness, busy greeting another, for a stale one.
func TestConcurrentFirstCommands(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	p := &Pool{Dir: t.TempDir()}
	defer p.Close()
	type out struct {
		res *Result
		err error
	}
	results := make(chan out, 4)
	for i := 0; i < 4; i++ {
		go func() {
			res, err := p.Run(context.Background(), "r-test", Spec{Argv: []string{"sh", "-c", "sleep 0.3; echo ok"}, Workspace: ws, UID: sandboxUID(),
				Env: []string{"PATH=/usr/bin:/bin"}, Protected: []string{".git"}})
			results <- out{res, err}
		}()
	}
	pid := 0
	for i := 0; i < 4; i++ {
		o := <-results
		if o.err != nil || string(o.res.Stdout) != "ok\n" {
			t.Fatalf("command %d: %+v %v", i, o.res, o.err)
		}
		if pid == 0 {
			pid = o.res.Enforcement.HarnessPID
		}
		if o.res.Enforcement.HarnessPID != pid {
			t.Fatalf("two harnesses for one run: %d and %d", pid, o.res.Enforcement.HarnessPID)
		}
	}
}
