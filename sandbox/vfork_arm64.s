//go:build linux

#include "textflag.h"

// func rawVfork(trap, a1, a2, a3 uintptr) (r1 uintptr, err syscall.Errno)
// See vfork_amd64.s.
TEXT ·rawVfork(SB),NOSPLIT|NOFRAME,$0-48
	JMP	syscall·rawVforkSyscall(SB)
