package vmtest

// The guest's tests: TestKernels runs them inside each guest (as root, in
// the guest's root: the host's files over 9p below a tmpfs) with
// PADDOCK_VM_GUEST=1 and PADDOCK_VM_BIN naming the directory of paddock and
// paddockd; elsewhere they skip. Another file, vmtest/limits_guest_test.go
// (owned by the sandbox's side), adds the limit checks; it runs with these
// (-test.run '^TestGuest').

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// guest skips the test outside a guest and returns the binaries' directory.
func guest(t *testing.T) string {
	t.Helper()
	if os.Getenv("PADDOCK_VM_GUEST") != "1" {
		t.Skip("runs inside a VM guest only (TestKernels boots them)")
	}
	bin := os.Getenv("PADDOCK_VM_BIN")
	if bin == "" {
		t.Fatal("PADDOCK_VM_BIN is not set")
	}
	return bin
}

// underSystemd says whether the guest's PID 1 is systemd.
func underSystemd() bool {
	b, _ := os.ReadFile("/proc/1/comm")
	return strings.TrimSpace(string(b)) == "systemd"
}

// cli runs the paddock CLI against the daemon of home.
type cli struct {
	t         *testing.T
	bin, home string
}

func (c cli) run(args ...string) (string, error) {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(c.bin, "paddock"), append([]string{"--home", c.home}, args...)...)
	cmd.Env = append(os.Environ(), "PADDOCK_NO_AUTOSTART=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	c.t.Logf("paddock %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	return stdout.String(), err
}

// must runs the CLI and decodes its JSON output into v (when not nil).
func (c cli) must(v any, args ...string) {
	c.t.Helper()
	out, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("paddock %s: %v", strings.Join(args, " "), err)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(out), v); err != nil {
			c.t.Fatalf("paddock %s: decoding its JSON: %v", strings.Join(args, " "), err)
		}
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// startDaemon starts paddockd serve on home: under systemd as a transient
// unit with Delegate=yes (the delegation path a packaged daemon takes),
// else as a child. It is stopped with SIGTERM when the test ends.
func startDaemon(t *testing.T, bin, home string) {
	t.Helper()
	daemon := filepath.Join(bin, "paddockd")
	if underSystemd() {
		unit := "paddock-vm-daemon"
		out, err := exec.Command("systemd-run", "--unit", unit, "--collect",
			"-p", "Delegate=yes", "-p", "KillMode=mixed", "-p", "KillSignal=SIGTERM",
			"--setenv", "HOME=/root", daemon, "serve", "--home", home).CombinedOutput()
		if err != nil {
			t.Fatalf("systemd-run: %v\n%s", err, out)
		}
		t.Cleanup(func() {
			out, err := exec.Command("systemctl", "stop", unit).CombinedOutput()
			t.Logf("systemctl stop %s: %v %s", unit, err, out)
			jout, _ := exec.Command("journalctl", "-u", unit, "--no-pager", "-n", "50").CombinedOutput()
			t.Logf("the daemon's journal:\n%s", jout)
		})
		return
	}
	runDaemon(t, exec.Command(daemon, "serve", "--home", home), home)
}

// runDaemon starts cmd, a paddockd serve of home, its output kept in
// home/daemon.out, and stops it with SIGTERM when the test ends.
func runDaemon(t *testing.T, cmd *exec.Cmd, home string) {
	t.Helper()
	log, err := os.Create(filepath.Join(home, "daemon.out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			t.Logf("paddockd exited: %v", err)
		case <-time.After(30 * time.Second):
			t.Errorf("paddockd did not exit 30s after SIGTERM; killed")
			cmd.Process.Kill()
			<-done
		}
		log.Close()
		b, _ := os.ReadFile(log.Name())
		t.Logf("the daemon's output:\n%s", b)
	})
}

// mountsUnder lists the mount points under dir.
func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var under []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			under = append(under, f[4])
		}
	}
	return under
}

// guestProject is a project (a git repository with one commit) and a
// daemon state directory with conf as its paddock.toml, on the guest's
// /tmp; nothing may be left mounted there when the test ends.
func guestProject(t *testing.T, conf string) (repo, home, base string) {
	t.Helper()
	base, err := os.MkdirTemp("", "paddock-guest-")
	if err != nil {
		t.Fatal(err)
	}
	// The sandbox's uid reads the project: the directories are 0755.
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if m := mountsUnder(base); len(m) > 0 {
			t.Errorf("mounted after the daemon stopped: %v", m)
		}
		os.RemoveAll(base)
	})
	repo, home = filepath.Join(base, "repo"), filepath.Join(base, "home")
	for _, d := range []string{repo, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	git(t, repo, "init", "-q", "-b", "main")
	git(t, repo, "config", "user.name", "VM Test")
	git(t, repo, "config", "user.email", "vm@example.invalid")
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", "README")
	git(t, repo, "commit", "-q", "-m", "first")
	if err := os.WriteFile(filepath.Join(home, "paddock.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return repo, home, base
}

// TestGuestEndToEnd: a project on tmpfs, a daemon, and a run made, used,
// reviewed and applied with the CLI as a user would, on this kernel.
func TestGuestEndToEnd(t *testing.T) {
	bin := guest(t)
	repo, home, base := guestProject(t, "sandbox_uid = 65534\napply_name = \"VM Test\"\napply_email = \"vm@example.invalid\"\n")
	startDaemon(t, bin, home)
	c := cli{t: t, bin: bin, home: home}
	waitDaemon(t, c)

	c.must(nil, "project", "add", repo, "--name", "vm")
	var run struct {
		ID        string `json:"id"`
		Workspace struct {
			Kind string `json:"kind"`
		} `json:"workspace"`
	}
	c.must(&run, "create", "--project", "vm", "--json")
	if run.ID == "" {
		t.Fatal("create gave no run id")
	}
	t.Logf("run %s, kind %s", run.ID, run.Workspace.Kind)

	var res struct {
		ExitCode    int             `json:"exit_code"`
		Stdout      string          `json:"stdout"`
		Stderr      string          `json:"stderr"`
		Enforcement json.RawMessage `json:"enforcement"`
	}
	c.must(&res, "exec", run.ID, "--json", "--", "sh", "-c", "echo hi > f.txt; cat /etc/hostname")
	var pretty bytes.Buffer
	json.Indent(&pretty, res.Enforcement, "", "  ")
	t.Logf("enforcement on %s:\n%s", kernelRelease(), pretty.String())
	if res.ExitCode != 0 {
		t.Fatalf("exec exited %d: %s", res.ExitCode, res.Stderr)
	}

	outside := filepath.Join(base, "escaped")
	var esc struct {
		ExitCode int    `json:"exit_code"`
		Stderr   string `json:"stderr"`
	}
	c.must(&esc, "exec", run.ID, "--json", "--", "sh", "-c", "echo x > "+outside+"; echo y > /etc/paddock-escaped")
	if esc.ExitCode == 0 {
		t.Errorf("a write outside the workspace succeeded")
	}
	for _, p := range []string{outside, "/etc/paddock-escaped"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written from inside the run", p)
		}
	}

	var cs struct {
		Hash    string `json:"hash"`
		Entries []struct {
			Path string `json:"path"`
		} `json:"entries"`
	}
	c.must(&cs, "diff", run.ID, "--json")
	if cs.Hash == "" || len(cs.Entries) != 1 {
		t.Fatalf("diff: hash %q, entries %+v; want one entry, f.txt", cs.Hash, cs.Entries)
	}
	c.must(nil, "submit", run.ID, "--expect-hash", cs.Hash)
	c.must(nil, "approve", run.ID, "--hash", cs.Hash)
	var applied map[string]any
	c.must(&applied, "apply", run.ID, "--json")
	branch := "paddock/" + run.ID
	if got := git(t, repo, "show", branch+":f.txt"); got != "hi" {
		t.Errorf("f.txt on %s: %q, want hi", branch, got)
	}
	if got := git(t, repo, "log", "-1", "--format=%an <%ae>", branch); got != "VM Test <vm@example.invalid>" {
		t.Errorf("the commit's author: %q", got)
	}
	if s := git(t, repo, "status", "--porcelain"); s != "" {
		t.Errorf("the project's checkout changed: %s", s)
	}
}

func kernelRelease() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}
