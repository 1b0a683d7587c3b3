//go:build linux

package sandbox

import (
	"bufio"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/paddock-dev/paddock/sandbox/internal/abiprobe"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// foreignABICalls makes every probe call of the ABIs foreign to this
// process: the i386 list, then x32's getpid.
func foreignABICalls() []abiprobe.Result {
	var out []abiprobe.Result
	for _, c := range abiprobe.I386Denied {
		out = append(out, abiprobe.I386(c))
	}
	return append(out, abiprobe.X32(abiprobe.X32Getpid))
}

// TestForeignABI: a sandboxed command that enters the kernel through the
// i386 ABI (int 0x80) or the x32 ABI gets EPERM for every call, the ones
// the native deny list names and the ones it allows (TestResident runs it
// again through a harness).
func TestForeignABI(t *testing.T) {
	if !abiprobe.Supported {
		t.Skipf("on %s a 64-bit process has no second system call ABI to try; TestSeccompGate checks the filter's gate", runtime.GOARCH)
	}
	if why := i386Absent(t); why != "" {
		t.Skipf("this kernel has no i386 ABI to misuse (%s); TestSeccompGate and TestLoadedFilterGate check the filter's gate", why)
	}
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	withProbe(t, ws)
	res := run(t, ws, "./probe", "probe", "foreign-abi")
	out := string(res.Stdout) + string(res.Stderr)
	if res.ExitCode == 0 || strings.Contains(out, "ESCAPED") || !strings.Contains(out, "every foreign-ABI call got EPERM") {
		t.Fatalf("a foreign ABI got through the filter (exit %d):\n%s", res.ExitCode, out)
	}
}

// TestSeccompGate runs the assembled filter in a BPF interpreter on
// hand-made seccomp_data: every architecture but the native one, and the
// x32 bit, are refused before any rule is looked at; native calls follow
// the rules, which read an int argument on its low 32 bits only (the
// kernel ignores the high ones). It holds on any architecture, whether or
// not the kernel has the foreign ABIs.
func TestSeccompGate(t *testing.T) {
	native, err := nativeArch()
	if err != nil {
		t.Skip(err)
	}
	eperm := uint32(0x00050000) | uint32(unix.EPERM)
	enosys := uint32(0x00050000) | uint32(unix.ENOSYS)
	allow := uint32(0x7fff0000)
	const high = 1 << 32
	type call = gateCase
	cases := []call{
		{name: "native getpid", arch: native, nr: unix.SYS_GETPID, want: allow},
		{name: "native unshare", arch: native, nr: unix.SYS_UNSHARE, want: eperm},
		{name: "native mount", arch: native, nr: unix.SYS_MOUNT, want: eperm},
		{name: "i386 getpid", arch: unix.AUDIT_ARCH_I386, nr: 20, want: eperm},
		{name: "i386 unshare", arch: unix.AUDIT_ARCH_I386, nr: 310, want: eperm},
		{name: "arm (AArch32) getpid", arch: unix.AUDIT_ARCH_ARM, nr: 20, want: eperm},
		{name: "x86_64 on an arm64 filter, or arm64 on an x86_64 one", arch: otherArch(native), nr: unix.SYS_GETPID, want: eperm},
		{name: "socket AF_INET", arch: native, nr: unix.SYS_SOCKET, args: [6]uint64{unix.AF_INET, unix.SOCK_STREAM}, want: allow},
		{name: "socket AF_VSOCK", arch: native, nr: unix.SYS_SOCKET, args: [6]uint64{unix.AF_VSOCK, unix.SOCK_STREAM}, want: eperm},
		{name: "socket AF_VSOCK with high bits", arch: native, nr: unix.SYS_SOCKET, args: [6]uint64{high | unix.AF_VSOCK}, want: eperm},
		{name: "socket AF_INET with high bits", arch: native, nr: unix.SYS_SOCKET, args: [6]uint64{high | unix.AF_INET}, want: allow},
		{name: "ioctl TCGETS", arch: native, nr: unix.SYS_IOCTL, args: [6]uint64{0, unix.TCGETS}, want: allow},
		{name: "ioctl TIOCSTI", arch: native, nr: unix.SYS_IOCTL, args: [6]uint64{0, unix.TIOCSTI}, want: eperm},
		{name: "ioctl TIOCSTI with high bits", arch: native, nr: unix.SYS_IOCTL, args: [6]uint64{0, high | unix.TIOCSTI}, want: eperm},
		{name: "ioctl TIOCLINUX with high bits", arch: native, nr: unix.SYS_IOCTL, args: [6]uint64{0, 0xffffffff00000000 | unix.TIOCLINUX}, want: eperm},
		{name: "ioctl fd TIOCSTI", arch: native, nr: unix.SYS_IOCTL, args: [6]uint64{unix.TIOCSTI, unix.TCGETS}, want: allow},
		{name: "clone", arch: native, nr: unix.SYS_CLONE, args: [6]uint64{uint64(unix.SIGCHLD)}, want: allow},
		{name: "clone CLONE_NEWUSER", arch: native, nr: unix.SYS_CLONE, args: [6]uint64{uint64(unix.SIGCHLD) | unix.CLONE_NEWUSER}, want: eperm},
		{name: "clone3", arch: native, nr: unix.SYS_CLONE3, want: enosys},
	}
	if native == unix.AUDIT_ARCH_X86_64 {
		cases = append(cases, call{name: "x32 getpid", arch: native, nr: 0x40000000 | 39, want: eperm})
	}
	run := func(t *testing.T, rules []seccompRule, cases []gateCase) {
		t.Helper()
		insts, err := seccompFilter(rules)
		if err != nil {
			t.Fatal(err)
		}
		runGate(t, insts, cases)
	}
	run(t, seccompPolicy(), cases)
	// The harness's own filter leaves it mount and umount2, nothing else.
	run(t, seccompPolicy("mount", "umount2"), []call{
		{name: "harness mount", arch: native, nr: unix.SYS_MOUNT, want: allow},
		{name: "harness umount2", arch: native, nr: unix.SYS_UMOUNT2, want: allow},
		{name: "harness unshare", arch: native, nr: unix.SYS_UNSHARE, want: eperm},
		{name: "harness AF_VSOCK", arch: native, nr: unix.SYS_SOCKET, args: [6]uint64{high | unix.AF_VSOCK}, want: eperm},
	})
}

func otherArch(native uint32) uint32 {
	if native == unix.AUDIT_ARCH_X86_64 {
		return unix.AUDIT_ARCH_AARCH64
	}
	return unix.AUDIT_ARCH_X86_64
}

// gateCase is one system call as a filter sees it, and the action expected.
type gateCase struct {
	name     string
	arch, nr uint32
	args     [6]uint64
	want     uint32
}

// runGate runs a filter in a BPF interpreter over each case's seccomp_data.
func runGate(t *testing.T, insts []bpf.Instruction, cases []gateCase) {
	t.Helper()
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		// The interpreter reads big-endian words; give it the data as
		// the kernel's 32-bit loads would see them: each argument's
		// low word first (both architectures are little-endian).
		data := make([]byte, 64)
		binary.BigEndian.PutUint32(data[0:], c.nr)
		binary.BigEndian.PutUint32(data[4:], c.arch)
		for i, a := range c.args {
			binary.BigEndian.PutUint32(data[16+8*i:], uint32(a))
			binary.BigEndian.PutUint32(data[20+8*i:], uint32(a>>32))
		}
		got, err := vm.Run(data)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if uint32(got) != c.want {
			t.Errorf("%s: action %#x, want %#x", c.name, uint32(got), c.want)
		}
	}
}

// i386Absent says why int 0x80 cannot be tried on this kernel, or "" where
// it can. The instruction is tried in a child process: where the kernel
// has no IA32 emulation it faults, and a fault in the test binary itself
// would kill every test of the package instead of skipping one.
func i386Absent(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(self, "probe", "i386-present").CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "int 0x80 killed the probe with " + ws.Signal().String()
		}
		// The Go runtime reports a fault and exits 2: its first line says which.
		first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		if strings.Contains(string(out), "SIGSEGV") || strings.Contains(first, "fatal error") {
			return "int 0x80 faulted in a probe process: " + first
		}
		return "int 0x80 answered " + first
	}
	t.Fatalf("the i386 probe did not run: %v", err)
	return ""
}

// TestLoadedFilterGate reads back the filter a process loaded (with
// PTRACE_SECCOMP_GET_FILTER) and runs it on hand-made seccomp_data of every
// foreign ABI: the gate is checked as the kernel holds it, on any kernel,
// with or without the foreign ABIs' emulation.
func TestLoadedFilterGate(t *testing.T) {
	native, err := nativeArch()
	if err != nil {
		t.Skip(err)
	}
	if os.Geteuid() != 0 {
		t.Skip("reading a process's seccomp filter back needs CAP_SYS_ADMIN: run as root")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "probe", "load-filter-and-wait")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "loaded" {
		t.Fatalf("the child did not load the filter: %q", line)
	}
	insts := readLoadedFilter(t, cmd.Process.Pid)
	eperm := uint32(seccompRetErrno) | uint32(unix.EPERM)
	cases := []gateCase{
		{name: "native getpid", arch: native, nr: unix.SYS_GETPID, want: seccompRetAllow},
		{name: "native unshare", arch: native, nr: unix.SYS_UNSHARE, want: eperm},
		{name: "x86_64 on an arm64 filter, or arm64 on an x86_64 one", arch: otherArch(native), nr: unix.SYS_GETPID, want: eperm},
		{name: "arm (AArch32) getpid", arch: unix.AUDIT_ARCH_ARM, nr: 20, want: eperm},
	}
	for _, c := range abiprobe.I386Denied {
		cases = append(cases, gateCase{name: "i386 " + c.Name, arch: unix.AUDIT_ARCH_I386, nr: uint32(c.Nr), args: [6]uint64{uint64(c.Args[0]), uint64(c.Args[1]), uint64(c.Args[2])}, want: eperm})
	}
	if native == unix.AUDIT_ARCH_X86_64 {
		cases = append(cases, gateCase{name: "x32 getpid", arch: native, nr: x32SyscallBit | uint32(abiprobe.X32Getpid.Nr), want: eperm})
	}
	runGate(t, insts, cases)
}

// readLoadedFilter attaches to pid and reads its first seccomp filter.
func readLoadedFilter(t *testing.T, pid int) []bpf.Instruction {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.PtraceSeize(pid); err != nil {
		t.Fatalf("ptrace seize: %v", err)
	}
	if err := unix.PtraceInterrupt(pid); err != nil {
		t.Fatalf("ptrace interrupt: %v", err)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatalf("wait: %v", err)
	}
	defer unix.PtraceDetach(pid)
	const getFilter = 0x420c // PTRACE_SECCOMP_GET_FILTER
	n, _, errno := unix.Syscall6(unix.SYS_PTRACE, getFilter, uintptr(pid), 0, 0, 0, 0)
	if errno != 0 {
		t.Fatalf("PTRACE_SECCOMP_GET_FILTER: %v", errno)
	}
	raw := make([]unix.SockFilter, n)
	if _, _, errno := unix.Syscall6(unix.SYS_PTRACE, getFilter, uintptr(pid), 0, uintptr(unsafe.Pointer(&raw[0])), 0, 0); errno != 0 {
		t.Fatalf("PTRACE_SECCOMP_GET_FILTER: %v", errno)
	}
	insts := make([]bpf.Instruction, len(raw))
	for i, r := range raw {
		insts[i] = bpf.RawInstruction{Op: r.Code, Jt: r.Jt, Jf: r.Jf, K: r.K}.Disassemble()
	}
	want, err := seccompFilter(seccompPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != len(want) {
		t.Fatalf("the loaded filter has %d instructions, the assembled one %d", len(insts), len(want))
	}
	return insts
}
