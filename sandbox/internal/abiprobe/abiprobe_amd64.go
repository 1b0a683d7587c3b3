//go:build linux

package abiprobe

import "syscall"

// Supported: an amd64 process can enter the i386 ABI (int 0x80) and the
// x32 ABI (the syscall instruction with bit 30 of the number set).
const Supported = true

func int80(trap, a1, a2, a3 uintptr) uintptr

// I386 makes a system call through int 0x80, the i386 ABI (pointer
// arguments must fit in 32 bits: the tests pass none).
func I386(c Call) Result {
	return Result{c, int64(int32(int80(c.Nr, c.Args[0], c.Args[1], c.Args[2])))}
}

// X32 makes a system call of the x32 ABI: the native entry with the x32 bit.
func X32(c Call) Result {
	r, _, errno := syscall.RawSyscall(c.Nr|0x40000000, c.Args[0], c.Args[1], c.Args[2])
	if errno != 0 {
		return Result{c, -int64(errno)}
	}
	return Result{c, int64(r)}
}

// I386Getpid is getpid in the i386 numbering: whether the ABI is there at all.
var I386Getpid = Call{"getpid", 20, [3]uintptr{}}

// I386Denied are calls the sandbox denies natively, in the i386 numbering,
// with arguments that would succeed (or fail only with EFAULT) if the
// filter let them through.
var I386Denied = []Call{
	{"unshare(CLONE_NEWUSER|CLONE_NEWNET)", 310, [3]uintptr{syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET}},
	{"socket(AF_VSOCK)", 359, [3]uintptr{40, syscall.SOCK_STREAM, 0}},
	{"io_uring_setup", 425, [3]uintptr{1, 0}},
	{"chroot", 61, [3]uintptr{0}},
	{"ptrace(PTRACE_TRACEME)", 26, [3]uintptr{0}},
	{"process_vm_readv", 347, [3]uintptr{1, 0, 0}},
	{"keyctl(KEYCTL_GET_KEYRING_ID)", 288, [3]uintptr{0, ^uintptr(3)}},
	{"userfaultfd", 374, [3]uintptr{0}},
	{"mount", 21, [3]uintptr{0, 0, 0}},
	{"bpf", 357, [3]uintptr{0, 0, 0}},
	// An allowed call too: the whole ABI is closed, not just the list.
	{"getpid", 20, [3]uintptr{}},
}

// X32Getpid is getpid in the x32 numbering.
var X32Getpid = Call{"x32 getpid", 39, [3]uintptr{}}
