//go:build !linux

package sandbox

// The sandbox is made of Linux's user, mount, pid and network namespaces,
// Landlock and seccomp, and has no other implementation: built for another
// system it stops here, with this sentence, rather than with a hundred
// undefined names from golang.org/x/sys/unix.
const _ = "paddock's sandbox needs Linux (namespaces, Landlock, seccomp); build with GOOS=linux" + 1
