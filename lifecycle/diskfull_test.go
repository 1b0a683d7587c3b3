package lifecycle_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"golang.org/x/sys/unix"
)

// TestFullStateDisk: a command that fills the state disk faster than the
// watchdog polls (a clone run wrote 390 MB in 0.47 s: issue #29 item 8)
// leaves the daemon's state writable (the held reserve is let go for it),
// its own result recorded, and the agent's rm allowed (on a disk under its
// reserve a command runs, writing nothing); once room is back, commands
// write again and the reserve is held again.
func TestFullStateDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small state disk (tmpfs) needs root")
	}
	e := newEnv(t)
	small := filepath.Join(t.TempDir(), "small")
	os.MkdirAll(small, 0o755)
	if err := unix.Mount("paddock-test", small, "tmpfs", 0, "size=64m,mode=0755"); err != nil {
		t.Skipf("no tmpfs here: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(small, unix.MNT_DETACH) })
	e.m.Store.Close()
	e.state, e.db = filepath.Join(small, "state"), filepath.Join(small, "state", "state.db")
	e.open(t, nil)
	e.m.DiskLimits.Reserve = 16 << 20
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	r := e.create(t, paddock.KindClone, "")
	held := filepath.Join(e.state, "disk-reserve")
	if _, err := e.m.Broker.Exec(agentCtx, r.ID, paddock.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(held); err != nil || fi.Size() != 8<<20 {
		t.Fatalf("the held reserve: %v %v", fi, err)
	}
	// Fill the disk in one go, well inside one poll.
	res, err := e.m.Broker.Exec(agentCtx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "head -c 100000000 /dev/zero > big; echo wrote $?"}})
	if err != nil || res.ExitCode != 0 || res.Stdout == "wrote 0\n" {
		t.Fatalf("the command that filled the disk: %+v %v", res, err)
	}
	if _, err := os.Stat(held); !os.IsNotExist(err) {
		t.Fatalf("the held reserve was not let go: %v", err)
	}
	// The agent's rm runs, and writes nothing else.
	res, err = e.m.Broker.Exec(agentCtx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "rm big && echo removed; echo x > other.txt && echo WROTE"}})
	if err != nil || !strings.Contains(res.Stdout, "removed") || strings.Contains(res.Stdout, "WROTE") || !strings.Contains(res.Enforcement.Disk, "write nothing") {
		t.Fatalf("the agent's rm on a full disk: %+v %v", res, err)
	}
	// Room again: commands write, and the reserve is held again.
	res, err = e.m.Broker.Exec(agentCtx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", "echo x > other.txt && echo WROTE"}})
	if err != nil || res.Stdout != "WROTE\n" {
		t.Fatalf("after the rm: %+v %v", res, err)
	}
	if fi, err := os.Stat(held); err != nil || fi.Size() != 8<<20 {
		t.Fatalf("the reserve is not held again: %v %v", fi, err)
	}
	// Every command was recorded.
	evs, err := e.m.Runs.Events(ctx, r.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == paddock.EventExec {
			n++
		}
	}
	if n != 4 {
		t.Fatalf("%d exec events recorded, want 4", n)
	}
}
