// Package abiprobe makes system calls through an ABI other than the
// process's native one, for the sandbox's tests: a filter that only knows
// native numbers must not let these through.
package abiprobe

import (
	"fmt"
	"syscall"
)

// Call is one system call in a foreign ABI's numbering.
type Call struct {
	Name string
	Nr   uintptr
	Args [3]uintptr
}

// Result of a call: the raw return, negative errno on failure.
type Result struct {
	Call
	Ret int64
}

// Refused says whether the call failed with errno e.
func (r Result) Refused(e syscall.Errno) bool { return r.Ret == -int64(e) }

func (r Result) String() string {
	if r.Ret < 0 {
		return fmt.Sprintf("%s: %v", r.Name, syscall.Errno(-r.Ret))
	}
	return fmt.Sprintf("%s: %d", r.Name, r.Ret)
}
