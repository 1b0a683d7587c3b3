package gitx

import "syscall"

// procAttr is how a git command is started. A git left running by a daemon
// killed mid-operation would race the restarted daemon's rollback of the
// same directory: it dies with the daemon. Its own process group, so that
// a deadline kills what it started too.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
