package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/paddock-dev/paddock"
)

// TestDoctorDescribesTheDaemon: what can be enforced depends on the process
// that builds the sandbox. With a daemon running, doctor reports the
// daemon's process (asked over the API), here one running as another user
// than the CLI, and says which process it describes; without one, the
// CLI's own.
func TestDoctorDescribesTheDaemon(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: it runs the daemon as another user than the CLI, to tell their reports apart")
	}
	const nobody = 65534
	base := t.TempDir()
	os.Chmod(base, 0o755)
	os.Chmod(filepath.Dir(base), 0o755)
	home := filepath.Join(base, "home")
	os.MkdirAll(home, 0o700)
	os.Chown(home, nobody, nobody)
	d := startDaemonAs(t, home, &syscall.Credential{Uid: nobody, Gid: nobody})

	rep := decode[paddock.DoctorReport](t, cli(t, home, "doctor", "--json"))
	if p := rep.Process; p.Role != "daemon" || p.PID != d.info.PID || p.UID != nobody || p.EUID != nobody {
		t.Fatalf("doctor describes %+v, want the daemon (pid %d, uid %d)", p, d.info.PID, nobody)
	}
	byName := map[string]paddock.Check{}
	for _, c := range rep.Checks {
		byName[c.Name] = c
	}
	// The CLI runs as root; the daemon, whose checks these are, does not.
	if u := byName["user"]; u.Status != paddock.CheckOK || !strings.Contains(u.Detail, fmt.Sprint(nobody)) {
		t.Fatalf("user check %+v is not the daemon's", u)
	}
	for _, want := range []string{"state directory", "daemon", "git", "landlock", "user namespaces", "seccomp", "sandbox", "sandbox mode"} {
		if _, ok := byName[want]; !ok {
			t.Fatalf("doctor misses %s: %+v", want, rep.Checks)
		}
	}
	human := cli(t, home, "doctor").out
	if !strings.Contains(human, fmt.Sprintf("the daemon's process (pid %d, uid %d)", d.info.PID, nobody)) {
		t.Fatalf("doctor does not say which process it describes:\n%s", human)
	}
	// The table of what holds each property here, from the doctor's own
	// sandboxed command: every property held by something, and printed.
	held := map[string][]string{}
	for _, h := range rep.Holds {
		held[h.Property] = h.HeldBy
	}
	for _, p := range []string{paddock.PropWrites, paddock.PropReads, paddock.PropNetwork, paddock.PropSignals, paddock.PropAbstractSockets, paddock.PropPrivileges, paddock.PropSyscalls, paddock.PropProcesses} {
		if len(held[p]) == 0 {
			t.Errorf("doctor says nothing holds %s: %+v", p, rep.Holds)
		}
	}
	if !strings.Contains(human, "What holds each property") || !strings.Contains(human, "mount-view") {
		t.Errorf("doctor prints no table of what holds what:\n%s", human)
	}

	// Without the daemon the CLI (root) finds the state directory is not
	// its own, a failed check: the report is still printed.
	d.stop()
	r := cli(t, home, "doctor", "--json")
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || r.code != exitInternal || !strings.Contains(r.out, "belongs to uid 65534") {
		t.Fatalf("doctor without a daemon: exit %d, %v\n%s%s", r.code, err, r.out, r.err)
	}
	if p := rep.Process; p.Role != "cli" || p.PID != os.Getpid() || p.UID != 0 {
		t.Fatalf("without a daemon doctor describes %+v, want this process", p)
	}
	if u := rep.Checks; !strings.Contains(fmt.Sprint(u), "running as root") {
		t.Fatalf("the CLI's own report misses that it runs as root: %+v", u)
	}
	if human := cli(t, home, "doctor").out; !strings.Contains(human, "this CLI's own process") {
		t.Fatalf("doctor does not say it describes the CLI:\n%s", human)
	}
}
