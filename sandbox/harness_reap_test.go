//go:build linux

package sandbox

import (
	"os"
	"slices"
	"syscall"
	"testing"
	"time"
)

// leftHarness starts the harness of run r-test in a pool on dir and drops
// the pool as a daemon killed with -9 would; the harness is killed when
// the test ends, whatever happened.
func leftHarness(t *testing.T, dir string) int {
	t.Helper()
	ws, _ := newWorkspace(t)
	p := &Pool{Dir: dir, Orphan: time.Minute}
	pid := poolRun(t, p, ws, "true", Limits{}).Enforcement.HarnessPID
	p.abandon()
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGKILL)
		waitPidGone(pid, 5*time.Second)
		SweepCgroupsOf(dir)
	})
	if !alive(pid) {
		t.Fatal("the harness died with its daemon")
	}
	return pid
}

// TestCloseGivesBackWhatAKilledDaemonLeft: a daemon killed with -9 left
// a run's harness; the next daemon ran nothing in that run and stopped
// cleanly. Its Close gave back only the harnesses it had re-attached: the
// one left ran on, for its orphan time (bench/soak counted 17 at its end).
func TestCloseGivesBackWhatAKilledDaemonLeft(t *testing.T) {
	skipUnlessSandbox(t)
	dir := t.TempDir()
	pid := leftHarness(t, dir)
	p := &Pool{Dir: dir}
	p.Close()
	waitGone(t, pid, 10*time.Second)
	if keys := p.Keys(); len(keys) != 0 {
		t.Fatalf("sockets left: %v", keys)
	}
}

// TestReapFindsAHarnessWithoutItsSocket: a harness whose socket was
// removed while it ran (given back when it did not answer, or replaced)
// is found by its process, and killed; one whose run is kept stays.
func TestReapFindsAHarnessWithoutItsSocket(t *testing.T) {
	skipUnlessSandbox(t)
	dir := t.TempDir()
	pid := leftHarness(t, dir)
	if err := os.Remove((&Pool{Dir: dir}).sockPath("r-test")); err != nil {
		t.Fatal(err)
	}
	p := &Pool{Dir: dir}
	if got := p.Reap(func(key string) bool { return key == "r-test" }); len(got) != 0 || !alive(pid) {
		t.Fatalf("Reap gave back %v, the harness of a run kept (alive: %v)", got, alive(pid))
	}
	if got := p.Reap(func(string) bool { return false }); !slices.Equal(got, []string{"r-test"}) {
		t.Fatalf("Reap gave back %v", got)
	}
	waitGone(t, pid, 5*time.Second)
}
