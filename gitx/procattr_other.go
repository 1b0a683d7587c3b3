//go:build !linux

package gitx

import "syscall"

// procAttr is how a git command is started: in its own process group, so
// that a deadline kills what it started too. Only Linux has a parent-death
// signal; elsewhere a git can outlive a daemon killed mid-operation.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
