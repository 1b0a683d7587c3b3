//go:build linux

package sandbox

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/gitx/gittest"
)

// hostState fingerprints what no command may change: the outside directory,
// and whether the files the tests try to make in the host's /tmp and home
// exist (other packages' tests write /tmp concurrently, so not all of it).
func hostState(t *testing.T, outside string) string {
	d, _ := gittest.TreeDigest(t, outside)
	home, _ := os.UserHomeDir()
	for _, p := range []string{"/tmp/paddock-escape", "/tmp/fill", "/tmp/t", filepath.Join(home, "paddock-escape")} {
		if _, err := os.Lstat(p); err == nil {
			d += " " + p
		}
	}
	return d
}

// TestEscapes: each command tries to get out; each must fail (a non-zero
// exit or the text the test looks for), and the host must be unchanged.
func TestEscapes(t *testing.T) {
	skipUnlessSandbox(t)
	home, _ := os.UserHomeDir()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HOST-SERVICE\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	sockDir := t.TempDir()
	os.Chmod(sockDir, 0o755)
	unixLn, err := net.Listen("unix", filepath.Join(sockDir, "host.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unixLn.Close()
	// A name of this call's own: TestResident runs this test again beside
	// the first, and other test processes may be listening too.
	abstractName := fmt.Sprintf("paddock-test-abstract-%d-%d", os.Getpid(), time.Now().UnixNano())
	abstract, err := net.Listen("unix", "@"+abstractName)
	if err != nil {
		t.Fatal(err)
	}
	defer abstract.Close()
	// A host process that is not the test itself: in a container the test
	// can be pid 1, which is also each command's own pid in its pid
	// namespace (containertest runs these tests there).
	host := exec.Command("sleep", "300")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { host.Process.Kill(); host.Wait() }()
	hostPID := host.Process.Pid

	cases := []struct {
		name   string
		script string
		// leak is text whose presence in the output means the escape worked.
		leak string
		// ok: the command may succeed, because what it reaches is the
		// sandbox's own (its /proc, its private /tmp); leak and the host
		// check still apply.
		ok bool
	}{
		{"read the home directory", "ls -a " + home + " && cat " + home + "/.ssh/* " + home + "/.bashrc", "PS1", false},
		{"read another run's workspace", "cat {outside}/secret", "OUTSIDE", false},
		// The test binary runs with -test.timeout=…: its command line must not be readable.
		{"read host processes' command lines", "cat /proc/*/cmdline | tr '\\0' ' '", "test.timeout", true},
		{"see host processes", "ls /proc | grep -x " + fmt.Sprint(hostPID), fmt.Sprint(hostPID), false},
		{"signal a host process", fmt.Sprintf("kill -0 %d && echo SIGNALLED", hostPID), "SIGNALLED", false},
		{"write host /tmp", "echo x > /tmp/paddock-escape && ls /tmp/paddock-escape", "", true},
		{"write /etc", "echo x >> /etc/hostname && echo WROTE", "WROTE", false},
		{"write the home directory", "echo x > " + home + "/paddock-escape && echo WROTE", "WROTE", false},
		{"write the workspace's .git", "echo '[core] hooksPath=/x' >> .git/config && echo WROTE", "WROTE", false},
		{"write a hook", "echo evil > .git/hooks/post-checkout && echo WROTE", "WROTE", false},
		{"hard link out", "ln {outside}/secret x && cat x", "OUTSIDE", false},
		{"symlink out", "ln -s {outside}/secret l && cat l", "OUTSIDE", false},
		{"mknod", "mknod dev c 1 3 && echo MADE", "MADE", false},
		{"setuid bit honoured", "cp /bin/sh ./suid && chmod u+s ./suid && ./suid -c 'id -u' | grep -x 0", "0", false},
		{"su", "su -c id root", "uid=0", false},
		{"new user namespace", "unshare -Ur id -u && echo UNSHARED", "UNSHARED", false},
		{"mount", "mount -t tmpfs x /tmp && echo MOUNTED", "MOUNTED", false},
		{"TCP to the host's loopback service", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && cat <&3", port), "HOST-SERVICE", false},
		{"TCP egress", "exec 3<>/dev/tcp/1.1.1.1/443 && echo CONNECTED", "CONNECTED", false},
		{"UDP egress", "echo x > /dev/udp/1.1.1.1/53 && echo SENT", "SENT", false},
		{"DNS", "getent hosts example.com", "example", false},
		{"the host's unix socket", "ls " + sockDir + " && cat < " + sockDir + "/host.sock", "host.sock", false},
		{"the host's abstract socket", "./probe probe abstract " + abstractName, "ESCAPED", false},
		{"ptrace the helper", "./probe probe ptrace 1", "ESCAPED", false},
		{"ptrace a sibling", "sleep 5 & ./probe probe ptrace $!", "ESCAPED", false},
		{"AF_VSOCK", "./probe probe vsock", "ESCAPED", false},
		{"AF_VSOCK with high bits", "./probe probe vsock-high", "ESCAPED", false},
		{"the kernel keyring", "./probe probe keyring", "ESCAPED", false},
		{"bpf", "./probe probe bpf", "ESCAPED", false},
		{"TIOCSTI", "./probe probe tiocsti", "ESCAPED", false},
		{"TIOCSTI with high bits", "./probe probe tiocsti-high", "ESCAPED", false},
		{"the Docker socket", "ls -l /run/docker.sock /var/run/docker.sock", "docker.sock", false},
		{"the state of paddock", "ls /root/.local/state /var/lib", "paddock", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws, outside := newWorkspace(t)
			if strings.Contains(tc.script, "./probe") {
				withProbe(t, ws)
			}
			before := hostState(t, outside)
			script := strings.ReplaceAll(tc.script, "{outside}", outside)
			res := run(t, ws, "bash", "-c", script)
			out := string(res.Stdout) + string(res.Stderr)
			if res.ExitCode == 0 && !tc.ok {
				t.Errorf("exit 0:\n%s", out)
			}
			if tc.leak != "" && strings.Contains(string(res.Stdout), tc.leak) {
				t.Errorf("escaped (%q in the output):\n%s", tc.leak, out)
			}
			if after := hostState(t, outside); after != before {
				t.Errorf("the host changed")
			}
			if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
				t.Errorf(".git/config changed: %q", b)
			}
		})
	}
}

// TestAllowedWork: the ordinary work of an agent succeeds.
func TestAllowedWork(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	res := run(t, ws, "bash", "-c", `set -e
		echo new > new.txt; mkdir -p a/b; echo x > a/b/c; rm new.txt
		echo tmp > /tmp/t; cat /tmp/t
		cat README.md | tr a-z A-Z
		ls /proc/self/fd | wc -l
		test -z "$SECRET_NOT_PASSED"`)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if !bytes.Contains(res.Stdout, []byte("HELLO")) {
		t.Fatalf("stdout: %s", res.Stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a/b/c")); string(b) != "x\n" {
		t.Fatal("the workspace write did not land")
	}
}

func TestReadOnlyRun(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	res := runSpec(t, Spec{Argv: []string{"bash", "-c", "cat README.md && echo x > new.txt"}, Workspace: ws, ReadOnly: true})
	if res.ExitCode == 0 || !bytes.Contains(res.Stdout, []byte("hello")) {
		t.Fatalf("read-only run: exit %d %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err == nil {
		t.Fatal("a read-only run wrote its workspace")
	}
	if !res.Enforcement.ReadOnly || len(res.Denied) == 0 {
		t.Fatalf("enforcement %+v, denied %v", res.Enforcement, res.Denied)
	}
	// With a scratch layer the command writes freely (a build, a test), the
	// next command sees none of it, and the workspace never does.
	before, _ := gittest.TreeDigest(t, ws)
	spec := Spec{Argv: []string{"bash", "-c", "echo x > new.txt && echo more >> README.md && mkdir -p cache/a && rm -f .git/config; cat new.txt README.md"},
		Workspace: ws, ReadOnly: true, Scratch: true}
	res = runSpec(t, spec)
	if res.ExitCode != 0 || string(res.Stdout) != "x\nhello\nmore\n" || !res.Enforcement.Scratch {
		t.Fatalf("a scratch layer: exit %d %q %q %+v", res.ExitCode, res.Stdout, res.Stderr, res.Enforcement)
	}
	spec.Argv = []string{"bash", "-c", "ls new.txt cache 2>&1; cat README.md"}
	if res = runSpec(t, spec); string(res.Stdout) == "" || strings.Contains(string(res.Stdout), "more") || !strings.Contains(string(res.Stdout), "No such file") {
		t.Fatalf("a second command saw the first one's scratch layer: %q", res.Stdout)
	}
	if after, _ := gittest.TreeDigest(t, ws); after != before {
		t.Fatal("a scratch layer's writes reached the workspace")
	}
	// The layer is bounded like /tmp.
	spec.Argv, spec.Limits = []string{"bash", "-c", "head -c 3000000 /dev/zero > big"}, Limits{Tmp: 1 << 20}
	if res = runSpec(t, spec); res.ExitCode == 0 {
		t.Fatal("a scratch layer took more than its limit")
	}
}

// TestDescriptorsAndEnvironment: nothing of the daemon's leaks in.
func TestDescriptorsAndEnvironment(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	f, err := os.Open(filepath.Join(ws, "README.md")) // a descriptor the daemon holds
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	t.Setenv("PADDOCK_TEST_SECRET", "daemon-secret-value")
	res := runSpec(t, Spec{Argv: []string{"env"}, Workspace: ws, Env: []string{"PATH=/usr/bin:/bin", "ALLOWED=yes"}})
	if bytes.Contains(res.Stdout, []byte("daemon-secret-value")) || string(res.Stdout) != "PATH=/usr/bin:/bin\nALLOWED=yes\n" {
		t.Fatalf("environment:\n%s", res.Stdout)
	}
	// find lists the descriptors of its own process: 0-2, and the one it
	// opened to read the directory.
	res = run(t, ws, "bash", "-c", "ls -l /proc/$$/fd")
	// bash runs ls in its own process: 0-2, and the directory ls reads.
	if n := strings.Count(string(res.Stdout), " -> "); n > 4 {
		t.Fatalf("descriptors inherited:\n%s", res.Stdout)
	}
}

func TestLimits(t *testing.T) {
	skipUnlessSandbox(t)
	cases := []struct {
		name   string
		script string
		limits Limits
		check  func(*Result) string
	}{
		{"sleep forever", "sleep infinity", Limits{Wall: 500 * time.Millisecond}, func(r *Result) string {
			if !r.TimedOut || r.Duration > 10*time.Second {
				return "not stopped by the wall limit"
			}
			return ""
		}},
		{"output flood", "yes", Limits{Output: 64 << 10, Wall: 2 * time.Second}, func(r *Result) string {
			if !r.Truncated || len(r.Stdout) > 64<<10+len(TruncatedMarker) || !bytes.HasSuffix(r.Stdout, []byte(TruncatedMarker)) {
				return fmt.Sprintf("output not cut: %d bytes", len(r.Stdout))
			}
			return ""
		}},
		{"fork bomb", "bomb() { bomb | bomb & }; bomb; sleep 2; echo alive", Limits{Procs: 64, Wall: 5 * time.Second}, func(r *Result) string {
			return ""
		}},
		{"CPU loop", "while :; do :; done", Limits{CPU: time.Second, Wall: 20 * time.Second}, func(r *Result) string {
			if r.TimedOut || r.ExitCode == 0 {
				return fmt.Sprintf("not stopped by the CPU limit (exit %d, timed out %v)", r.ExitCode, r.TimedOut)
			}
			return ""
		}},
		{"memory bomb", "x=$(head -c 1000000000 /dev/zero | tr '\\0' a) && echo SURVIVED", Limits{Memory: 256 << 20, Wall: 30 * time.Second}, func(r *Result) string {
			if bytes.Contains(r.Stdout, []byte("SURVIVED")) {
				return "2 GB held under a 256 MB limit"
			}
			return ""
		}},
		{"fill /tmp", "dd if=/dev/zero of=/tmp/fill bs=1M count=64", Limits{Tmp: 8 << 20}, func(r *Result) string {
			if r.ExitCode == 0 {
				return "wrote 64 MB into an 8 MB /tmp"
			}
			return ""
		}},
		{"fill the disk", "dd if=/dev/zero of=big bs=1M count=64", Limits{FileSize: 4 << 20}, func(r *Result) string {
			if r.ExitCode == 0 {
				return "wrote a 64 MB file under a 4 MB limit"
			}
			return ""
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws, outside := newWorkspace(t)
			before := hostState(t, outside)
			res := runSpec(t, Spec{Argv: []string{"bash", "-c", tc.script}, Workspace: ws, Limits: tc.limits})
			if msg := tc.check(res); msg != "" {
				t.Errorf("%s (exit %d, %s)", msg, res.ExitCode, bytes.TrimSpace(res.Stderr))
			}
			if hostState(t, outside) != before {
				t.Error("the host changed")
			}
		})
	}
}

// TestNothingOutlivesTheCommand: double-forked background processes die
// with the command.
func TestNothingOutlivesTheCommand(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	marker := fmt.Sprintf("%d", time.Now().UnixNano()%1000000+3000000)
	res := run(t, ws, "bash", "-c", "(setsid sleep "+marker+" &) ; (nohup sleep "+marker+" >/dev/null 2>&1 &) ; exit 0")
	if res.ExitCode != 0 {
		t.Fatalf("exit %d %s", res.ExitCode, res.Stderr)
	}
	time.Sleep(200 * time.Millisecond)
	out, _ := exec.Command("pgrep", "-f", "sleep "+marker).Output()
	if len(bytes.TrimSpace(out)) > 0 {
		exec.Command("pkill", "-f", "sleep "+marker).Run()
		t.Fatalf("processes outlived the command: %s", out)
	}
}

// TestProtectedPaths: protected paths are read-only in the view whether
// they exist or not. A missing one is made as an empty directory and
// mounted over, so a command can neither create it nor anything in it; the
// directories above protected paths cannot be moved aside to make new ones;
// everything else stays writable; a link on the way is reported, not
// followed.
func TestProtectedPaths(t *testing.T) {
	skipUnlessSandbox(t)
	protected := []string{".git", ".mcp.json", ".vscode/settings.json", ".codex", ".claude/hooks", ".cursor/rules", ".paddock", ".envrc"}
	cases := []struct{ name, script string }{
		{"create a protected file", "echo '{}' > .mcp.json"},
		{"create in a protected directory", "mkdir -p .codex/x"},
		{"remove a protected directory", "rmdir .codex"},
		{"replace a protected directory", "mkdir d && mv -T d .codex"},
		{"create a nested protected file", "echo '{}' > .vscode/settings.json"},
		{"move the parent aside", "mv .vscode .v2 && mkdir .vscode && echo '{}' > .vscode/settings.json"},
		{"write an existing protected file", "echo evil >> .claude/hooks/pre.sh"},
		{"move an existing one's parent aside", "mv .claude .c2 && mkdir -p .claude/hooks && echo evil > .claude/hooks/pre.sh"},
		{"remove the parent", "rm -rf .vscode"},
	}
	setup := func(t *testing.T) string {
		ws, _ := newWorkspace(t)
		os.MkdirAll(filepath.Join(ws, ".claude", "hooks"), 0o755)
		os.WriteFile(filepath.Join(ws, ".claude", "hooks", "pre.sh"), []byte("#!/bin/sh\n"), 0o755)
		os.Symlink("README.md", filepath.Join(ws, ".cursor"))
		os.Link(filepath.Join(ws, "README.md"), filepath.Join(ws, ".envrc"))
		for _, p := range []string{".claude", ".claude/hooks", ".claude/hooks/pre.sh", ".cursor"} {
			os.Lchown(filepath.Join(ws, p), sandboxUID(), sandboxUID())
		}
		return ws
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := setup(t)
			res := runSpec(t, Spec{Argv: []string{"bash", "-c", tc.script + " && echo WROTE"}, Workspace: ws, Protected: protected})
			if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "WROTE") {
				t.Errorf("exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
			}
			if tc.name == "create a protected file" && !slices.ContainsFunc(res.Denied, func(d string) bool {
				return strings.Contains(d, ".mcp.json is a protected path")
			}) {
				t.Errorf("the result does not say why: %v (%s)", res.Denied, res.Stderr)
			}
			for _, p := range []string{".mcp.json", ".vscode/settings.json", ".codex"} {
				if ents, err := os.ReadDir(filepath.Join(ws, p)); err != nil || len(ents) != 0 {
					t.Errorf("%s: %v, %d entries; want the empty directory the sandbox made", p, err, len(ents))
				}
			}
			if b, _ := os.ReadFile(filepath.Join(ws, ".claude", "hooks", "pre.sh")); string(b) != "#!/bin/sh\n" {
				t.Errorf("pre.sh: %q", b)
			}
			for _, p := range []string{".v2", ".c2", "d/x"} {
				if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
					t.Errorf("%s exists", p)
				}
			}
		})
	}
	t.Run("the rest stays writable, and the view says what it protects", func(t *testing.T) {
		ws := setup(t)
		res := runSpec(t, Spec{Argv: []string{"bash", "-c", "echo ok > .vscode/other.json && echo ok > .claude/notes.md && cat .vscode/other.json .claude/notes.md"},
			Workspace: ws, Protected: protected, Unprotected: []string{"**/*.pem: not ahead"}})
		if res.ExitCode != 0 || string(res.Stdout) != "ok\nok\n" {
			t.Fatalf("exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
		}
		e := res.Enforcement
		for _, p := range []string{".git", ".mcp.json", ".vscode/settings.json", ".codex", ".claude/hooks", ".paddock"} {
			if !slices.Contains(e.ReadOnlyIn, p) {
				t.Errorf("read_only_paths %v misses %s", e.ReadOnlyIn, p)
			}
		}
		if !slices.Contains(e.Unprotected, ".cursor: a symbolic link") || !slices.Contains(e.Unprotected, "**/*.pem: not ahead") ||
			!slices.Contains(e.Unprotected, ".envrc: a file with other hard links, writable through them") {
			t.Errorf("unprotected: %v", e.Unprotected)
		}
	})
	t.Run("an operator's own directory: nothing is made, the missing are reported", func(t *testing.T) {
		ws := setup(t)
		res := runSpec(t, Spec{Argv: []string{"bash", "-c", "echo '{}' > .mcp.json && ls -a"}, Workspace: ws, Protected: protected, OperatorDir: true})
		if res.ExitCode != 0 {
			t.Fatalf("exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
		}
		for _, p := range []string{".codex", ".vscode"} {
			if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
				t.Errorf("%s was made in the operator's directory", p)
			}
		}
		e := res.Enforcement
		if !slices.Contains(e.Unprotected, ".mcp.json: does not exist, and nothing is made in the operator's own directory") ||
			!slices.Contains(e.ReadOnlyIn, ".claude/hooks") {
			t.Errorf("read-only %v, unprotected %v", e.ReadOnlyIn, e.Unprotected)
		}
	})
}
