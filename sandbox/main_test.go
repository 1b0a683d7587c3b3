//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/paddock-dev/paddock/sandbox/internal/abiprobe"
)

// The test binary is the helper too: Run re-executes /proc/self/exe.
func TestMain(m *testing.M) {
	Main()
	if len(os.Args) > 2 && os.Args[1] == "probe" {
		os.Exit(probe(os.Args[2], os.Args[3:]))
	}
	code := m.Run()
	SweepCgroups()
	os.Exit(code)
}

// probe is an attack the test binary makes from inside the sandbox (it is
// copied into the workspace), for what a shell cannot express. It prints
// ESCAPED and exits 0 if the attack worked.
func probe(name string, args []string) int {
	var err error
	switch name {
	case "abstract": // connect to an abstract unix socket of the host
		var c net.Conn
		if c, err = net.Dial("unix", "@"+args[0]); err == nil {
			c.Close()
		}
	case "ptrace": // attach to a process
		pid, _ := strconv.Atoi(args[0])
		err = syscall.PtraceAttach(pid)
	case "vsock", "vsock-high": // open a socket to the hypervisor
		family := uintptr(40) // AF_VSOCK
		if name == "vsock-high" {
			family |= 1 << 32 // the kernel reads an int: the high bits are ignored
		}
		fd, _, errno := syscall.RawSyscall(syscall.SYS_SOCKET, family, syscall.SOCK_STREAM, 0)
		if errno != 0 {
			err = errno
		} else {
			syscall.Close(int(fd))
		}
	case "keyring": // the kernel keyring
		_, _, errno := syscall.Syscall(syscall.SYS_KEYCTL, 0 /* KEYCTL_GET_KEYRING_ID */, ^uintptr(3) /* -4: user */, 0)
		if errno != 0 {
			err = errno
		}
	case "bpf":
		_, _, errno := syscall.Syscall(321 /* bpf */, 0, 0, 0)
		if errno != 0 {
			err = errno
		}
	case "tiocsti", "tiocsti-high": // push a command into the controlling terminal
		c := byte('x')
		cmd := uintptr(syscall.TIOCSTI)
		if name == "tiocsti-high" {
			cmd |= 1 << 32 // the kernel reads an unsigned int
		}
		_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, 0, cmd, uintptr(unsafe.Pointer(&c)))
		// Descriptor 0 is no terminal here: only EPERM says the filter
		// refused it; anything else means the kernel was asked.
		if errno != syscall.EPERM {
			fmt.Println("ESCAPED: the filter let ioctl TIOCSTI through:", errno)
			return 0
		}
		err = errno
	case "spawn": // start N sleeping children; print how many started
		n, _ := strconv.Atoi(args[0])
		started := 0
		for i := 0; i < n; i++ {
			if _, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "2"}, &syscall.ProcAttr{}); err == nil {
				started++
			}
		}
		fmt.Println(started)
		for i := 0; i < started; i++ { // hold them: the namespace dies with us
			syscall.Wait4(-1, nil, 0, nil)
		}
		return 1 // not an escape: the test reads the count
	case "i386-present": // whether int 0x80 reaches the kernel at all (run outside the sandbox)
		// Where the kernel has no IA32 emulation the instruction faults and
		// this process dies of SIGSEGV: the caller reads that from outside.
		r := abiprobe.I386(abiprobe.I386Getpid)
		fmt.Println(r)
		if r.Ret < 0 {
			return 2
		}
		return 0
	case "load-filter-and-wait": // load the commands' filter, then wait to be read
		if err := loadSeccomp(seccompPolicy()); err != nil {
			fmt.Println("load:", err)
			return 2
		}
		fmt.Println("loaded")
		os.Stdin.Read(make([]byte, 1))
		return 1
	case "foreign-abi": // system calls through the i386 and x32 ABIs
		var got []string
		for _, r := range foreignABICalls() {
			if !r.Refused(syscall.EPERM) {
				got = append(got, r.String())
			}
		}
		if len(got) > 0 {
			fmt.Println("ESCAPED", strings.Join(got, "; "))
			return 0
		}
		err = fmt.Errorf("every foreign-ABI call got EPERM")
	default:
		err = fmt.Errorf("unknown probe %s", name)
	}
	if err != nil {
		fmt.Println("refused:", err)
		return 1
	}
	fmt.Println("ESCAPED")
	return 0
}

// withProbe copies the test binary into the workspace, so that the sandbox
// can run it, and returns its path inside the workspace.
func withProbe(t *testing.T, ws string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(ws, "probe")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Lchown(p, sandboxUID(), sandboxUID())
	return p
}

// sandboxUID is who commands run as in tests: the test's own uid, or nobody
// when the tests run as root.
func sandboxUID() int {
	if os.Getuid() == 0 {
		return 65534
	}
	return os.Getuid()
}

// newWorkspace makes a workspace the sandbox user owns, inside a directory
// holding things it must never reach.
func newWorkspace(t *testing.T) (ws, outside string) {
	t.Helper()
	base := t.TempDir()
	os.Chmod(base, 0o755)
	os.Chmod(filepath.Dir(base), 0o755) // t.TempDir makes its parent 0700
	ws = filepath.Join(base, "ws")
	outside = filepath.Join(base, "outside")
	os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
	os.WriteFile(filepath.Join(ws, "README.md"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644)
	os.MkdirAll(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("OUTSIDE\n"), 0o644)
	uid := sandboxUID()
	filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, uid, uid)
		}
		return nil
	})
	return ws, outside
}

// skipUnlessSandbox skips (or, under CI, fails) where this machine cannot run
// the sandbox at all, with the reason.
func skipUnlessSandbox(t *testing.T) {
	t.Helper()
	ws, _ := newWorkspace(t)
	_, err := Run(context.Background(), Spec{Argv: []string{"/bin/true"}, Workspace: ws, UID: sandboxUID(), Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil && strings.Contains(err.Error(), "unsupported") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the sandbox cannot run on this CI machine: %v", err)
		}
		t.Skipf("the sandbox cannot run here: %v", err)
	}
}

func run(t *testing.T, ws string, argv ...string) *Result {
	t.Helper()
	return runSpec(t, Spec{Argv: argv, Workspace: ws})
}

func runSpec(t *testing.T, spec Spec) *Result {
	t.Helper()
	if spec.UID == 0 {
		spec.UID = sandboxUID()
	}
	if spec.Env == nil {
		spec.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + spec.Workspace, "LANG=C"}
	}
	if spec.Protected == nil {
		spec.Protected = []string{".git"}
	}
	if spec.LandlockBelow == 0 {
		spec.LandlockBelow = testLandlockBelow
	}
	var res *Result
	var err error
	if testPool != nil {
		res, err = testPool.Run(context.Background(), "r-test", spec)
		if err == nil && res.Enforcement.Mode != "resident" {
			t.Fatalf("%v ran %s (%s), not through the harness", spec.Argv, res.Enforcement.Mode, res.Enforcement.ModeReason)
		}
	} else {
		res, err = Run(context.Background(), spec)
	}
	if err != nil {
		t.Fatalf("%v: %v", spec.Argv, err)
	}
	return res
}

// testPool, when set, makes runSpec run every command through a harness.
var testPool *Pool

func TestBasics(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	res := run(t, ws, "sh", "-c", "echo hi; id -u; hostname; pwd; cat README.md; echo err >&2; exit 3")
	t.Logf("%s\n%s\n%+v", res.Stdout, res.Stderr, res.Enforcement)
	if res.ExitCode != 3 || !strings.HasPrefix(string(res.Stdout), "hi\n") || string(res.Stderr) != "err\n" {
		t.Fatalf("result: %+v", res)
	}
}

// TestUnprivilegedDaemonPath covers the way an unprivileged daemon hands the
// workspace over (the helper opens it by path), even when tests run as root.
func TestUnprivilegedDaemonPath(t *testing.T) {
	skipUnlessSandbox(t)
	forcePathOpen = true
	defer func() { forcePathOpen = false }()
	ws, _ := newWorkspace(t)
	res := run(t, ws, "sh", "-c", "cat README.md && echo x > new && echo y >> .git/config")
	if !strings.Contains(string(res.Stdout), "hello") || res.ExitCode == 0 {
		t.Fatalf("result: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(ws, "new")); err != nil {
		t.Fatal("the workspace write did not land")
	}
}

// TestStdin: a command reads the stdin it is given, through a pipe from
// the daemon, whatever its size; without one it reads /dev/null; one that
// reads only part of it, or none, ends as it would anyway.
func TestStdin(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB, past any pipe buffer
	res := runSpec(t, Spec{Argv: []string{"sh", "-c", "wc -c; echo done"}, Workspace: ws, Stdin: big})
	if res.ExitCode != 0 || strings.Fields(string(res.Stdout))[0] != strconv.Itoa(len(big)) {
		t.Fatalf("wc -c of %d bytes of stdin: %+v %s", len(big), res, res.Stderr)
	}
	res = runSpec(t, Spec{Argv: []string{"cat"}, Workspace: ws, Stdin: []byte("one\ntwo\n")})
	if string(res.Stdout) != "one\ntwo\n" {
		t.Fatalf("cat of stdin: %q", res.Stdout)
	}
	res = runSpec(t, Spec{Argv: []string{"cat"}, Workspace: ws})
	if res.ExitCode != 0 || len(res.Stdout) != 0 {
		t.Fatalf("cat without stdin: %+v", res)
	}
	start := time.Now()
	for _, argv := range [][]string{{"true"}, {"head", "-c", "5"}} {
		res = runSpec(t, Spec{Argv: argv, Workspace: ws, Stdin: big, Limits: Limits{Wall: 20 * time.Second}})
		if res.ExitCode != 0 || res.TimedOut {
			t.Fatalf("%v with unread stdin: %+v", argv, res)
		}
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("commands that left their stdin unread took %v", time.Since(start))
	}
}
