//go:build linux

package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The filter is assembled here, from the native system call numbers of
// golang.org/x/sys/unix (constants: no table is built at start, which a
// seccomp library's per-architecture name tables cost every command of
// the binary, the CLI's included).

// Offsets in struct seccomp_data: the call's number, its audit
// architecture, then six 64-bit arguments.
const (
	seccompNrOffset   = 0
	seccompArchOffset = 4
	seccompArgsOffset = 16
)

// Return values of a filter.
const (
	seccompRetErrno = 0x00050000 // SECCOMP_RET_ERRNO | errno
	seccompRetAllow = 0x7fff0000 // SECCOMP_RET_ALLOW
)

// x32SyscallBit marks a system call of the x32 ABI: it enters through the
// native x86_64 entry point, with AUDIT_ARCH_X86_64, and so passes an
// architecture check; only its number tells it apart.
const x32SyscallBit = 0x40000000

// foreignABIErrno is what a system call of any ABI but the native one gets.
// EPERM, like the deny list, rather than ENOSYS, so that a test tells the
// filter's refusal from a kernel built without that ABI.
const foreignABIErrno = unix.EPERM

// nativeArch is the audit architecture of this process's system calls.
func nativeArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, nil
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, nil
	}
	return 0, fmt.Errorf("seccomp: no system call table for %s", runtime.GOARCH)
}

// seccompRule refuses one system call, with errno: outright, or when one
// of its arguments says so.
//
// Arguments are compared on their low 32 bits only, where the kernel reads
// an int (socket's family, ioctl's command): it ignores the high bits that
// a 64-bit comparison would see, so socket(AF_VSOCK | 1<<32) would pass a
// filter that compares all 64 and still make a vsock socket.
type seccompRule struct {
	name  string
	nr    uint32
	errno unix.Errno
	// arg is the argument compared (0–5), or -1 for an outright refusal.
	arg int
	// eq: refused when the argument's low 32 bits equal one of these.
	eq []uint32
	// bits: refused when any of these bits is set in its low 32 bits.
	bits uint32
}

// seccompFilter assembles rules behind a gate that refuses every system
// call not made through the native ABI.
//
// The rules name native system call numbers, and the same numbers mean
// other calls in another ABI: on x86_64, `int 0x80` (the i386 ABI, open to
// any 64-bit process where the kernel has IA32 emulation) would otherwise
// be a way round every rule: unshare, AF_VSOCK, io_uring, ptrace, keyctl.
// The gate closes that path for every architecture at once, and for the
// x32 ABI, rather than repeating the list in each ABI's numbering.
func seccompFilter(rules []seccompRule) ([]bpf.Instruction, error) {
	native, err := nativeArch()
	if err != nil {
		return nil, err
	}
	deny := bpf.RetConstant{Val: seccompRetErrno | uint32(foreignABIErrno)}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompArchOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: native, SkipTrue: 1},
		deny,
		bpf.LoadAbsolute{Off: seccompNrOffset, Size: 4},
	}
	if native == unix.AUDIT_ARCH_X86_64 {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1},
			deny,
		)
	}
	// Each rule is a short block that ends in its own return or falls
	// through with the call's number loaded again: no jump is longer than
	// a block, whatever the number of rules.
	for _, r := range rules {
		ret := bpf.RetConstant{Val: seccompRetErrno | uint32(r.errno)}
		if r.arg < 0 {
			prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipFalse: 1}, ret)
			continue
		}
		if r.arg > 5 || len(r.eq) == 0 && r.bits == 0 || len(r.eq) > 200 {
			return nil, fmt.Errorf("seccomp: bad rule for %s", r.name)
		}
		var block []bpf.Instruction
		for _, v := range r.eq {
			block = append(block, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipFalse: 1}, ret)
		}
		if r.bits != 0 {
			block = append(block, bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: r.bits, SkipFalse: 1}, ret)
		}
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipFalse: uint8(len(block) + 1)},
			// The low half of the argument (both architectures are little-endian).
			bpf.LoadAbsolute{Off: uint32(seccompArgsOffset + 8*r.arg), Size: 4},
		)
		prog = append(prog, block...)
		prog = append(prog, bpf.LoadAbsolute{Off: seccompNrOffset, Size: 4})
	}
	return append(prog, bpf.RetConstant{Val: seccompRetAllow}), nil
}

// loadSeccomp sets no_new_privs and loads the rules, behind their gate, on
// every thread of the calling process.
func loadSeccomp(rules []seccompRule) error {
	prog, filter, err := seccompProgram(rules)
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
