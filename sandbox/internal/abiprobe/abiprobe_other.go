//go:build !linux || !amd64

package abiprobe

// Supported is false: on arm64 a 64-bit process cannot make AArch32 system
// calls (only a 32-bit binary can), and other architectures have no second
// ABI reachable from the same process.
const Supported = false

func unsupported(c Call) Result { return Result{c, -38 /* ENOSYS */} }

// I386 and X32 exist only on amd64.
var I386, X32 = unsupported, unsupported

var (
	I386Getpid Call
	I386Denied []Call
	X32Getpid  Call
)
