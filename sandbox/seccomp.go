package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Offsets in struct seccomp_data.
const (
	seccompNrOffset   = 0
	seccompArchOffset = 4
)

// x32SyscallBit marks a system call of the x32 ABI: it enters through the
// native x86_64 entry point, with AUDIT_ARCH_X86_64, and so passes an
// architecture check; only its number tells it apart.
const x32SyscallBit = 0x40000000

// foreignABIErrno is what a system call of any ABI but the native one gets.
// EPERM, like the deny list, rather than ENOSYS, so that a test tells the
// filter's refusal from a kernel built without that ABI.
const foreignABIErrno = unix.EPERM

// seccompFilter assembles a policy behind a gate that refuses every system
// call not made through the native ABI.
//
// The deny list names native system call numbers, and the same numbers mean
// other calls in another ABI; go-seccomp-bpf therefore skips its rules when
// the architecture differs, and lands on the default action, which for a
// deny list is allow. On x86_64 that made `int 0x80` (the i386 ABI, open to
// any 64-bit process where the kernel has IA32 emulation) a way round every
// rule: unshare, AF_VSOCK, io_uring, ptrace, keyctl. The gate closes that
// path for every architecture at once, and for the x32 ABI, rather than
// repeating the list in each ABI's numbering.
func seccompFilter(p seccomp.Policy) ([]bpf.Instruction, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	body, err := p.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	deny := bpf.RetConstant{Val: uint32(seccomp.ActionErrno) | uint32(foreignABIErrno)}
	gate := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompArchOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		deny,
	}
	if info.ID == arch.X86_64.ID {
		gate = append(gate,
			bpf.LoadAbsolute{Off: seccompNrOffset, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1},
			deny,
		)
	}
	return append(gate, body...), nil
}

// loadSeccomp sets no_new_privs and loads the policy, behind its gate, on
// every thread of the calling process.
func loadSeccomp(p seccomp.Policy) error {
	prog, filter, err := seccompProgram(p)
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	// With TSYNC, a positive result is the id of a thread that could not be
	// synchronised.
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(prog)))
	runtime.KeepAlive(filter)
	switch {
	case errno != 0:
		return fmt.Errorf("seccomp: %w", errno)
	case r != 0:
		return fmt.Errorf("seccomp: thread %d could not take the filter", r)
	}
	return nil
}
