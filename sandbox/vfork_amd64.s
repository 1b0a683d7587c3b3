//go:build linux

#include "textflag.h"

// func rawVfork(trap, a1, a2, a3 uintptr) (r1 uintptr, err syscall.Errno)
// A tail call into package syscall's vfork-safe clone, so that the
// compiler calls it with the stack ABI and no wrapper frame the child
// could overwrite.
TEXT ·rawVfork(SB),NOSPLIT|NOFRAME,$0-48
	JMP	syscall·rawVforkSyscall(SB)
