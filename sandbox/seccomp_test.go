package sandbox

import (
	"encoding/binary"
	"runtime"
	"strings"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
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
	if r := abiprobe.I386(abiprobe.I386Getpid); r.Ret < 0 {
		t.Skipf("this kernel has no i386 ABI to misuse (%v); TestSeccompGate checks the filter's gate", r)
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
// x32 bit, are refused before any rule is looked at; native calls still
// follow the policy. It holds on any architecture, whether or not the
// kernel has the foreign ABIs.
func TestSeccompGate(t *testing.T) {
	insts, err := seccompFilter(seccompPolicy())
	if err != nil {
		t.Fatal(err)
	}
	// The interpreter reads big-endian words; give it the data as the
	// kernel's loads would see them.
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatal(err)
	}
	native, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	eperm := uint32(0x00050000) | uint32(unix.EPERM)
	allow := uint32(0x7fff0000)
	getpid := uint32(native.SyscallNames["getpid"])
	unshare := uint32(native.SyscallNames["unshare"])
	cases := []struct {
		name     string
		arch, nr uint32
		want     uint32
	}{
		{"native getpid", uint32(native.ID), getpid, allow},
		{"native unshare", uint32(native.ID), unshare, eperm},
		{"i386 getpid", unix.AUDIT_ARCH_I386, 20, eperm},
		{"i386 unshare", unix.AUDIT_ARCH_I386, 310, eperm},
		{"arm (AArch32) getpid", unix.AUDIT_ARCH_ARM, 20, eperm},
		{"x86_64 on an arm64 filter, or arm64 on an x86_64 one", otherArch(native), getpid, eperm},
	}
	if native.ID == arch.X86_64.ID {
		cases = append(cases,
			struct {
				name     string
				arch, nr uint32
				want     uint32
			}{"x32 getpid", uint32(native.ID), 0x40000000 | 39, eperm})
	}
	for _, c := range cases {
		data := make([]byte, 64)
		binary.BigEndian.PutUint32(data[0:], c.nr)
		binary.BigEndian.PutUint32(data[4:], c.arch)
		got, err := vm.Run(data)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if uint32(got) != c.want {
			t.Errorf("%s: action %#x, want %#x", c.name, uint32(got), c.want)
		}
	}
}

func otherArch(native *arch.Info) uint32 {
	if native.ID == arch.X86_64.ID {
		return unix.AUDIT_ARCH_AARCH64
	}
	return unix.AUDIT_ARCH_X86_64
}
