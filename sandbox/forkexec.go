//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The harness forks each command itself: between fork and exec the child
// must mount its own /proc, set its limits and confine itself, which
// syscall.ForkExec has no hooks for. The child runs only raw system calls
// on memory prepared before the fork, as package syscall's own child does;
// these are the runtime's hooks that package uses (kept for exactly this
// use, see go.dev/issue/67401).

//go:linkname runtimeBeforeFork syscall.runtime_BeforeFork
func runtimeBeforeFork()

//go:linkname runtimeAfterFork syscall.runtime_AfterFork
func runtimeAfterFork()

//go:linkname runtimeAfterForkInChild syscall.runtime_AfterForkInChild
func runtimeAfterForkInChild()

// rawVfork is package syscall's clone for a child that shares the
// parent's memory until it execs (vfork_*.s): the return address is kept
// in a register, so the child's use of the stack does not disturb the
// parent.
func rawVfork(trap, a1, a2, a3 uintptr) (r1 uintptr, err syscall.Errno)

// rlimitResources are the limits each command gets, in childPlan.rlimits order.
var rlimitResources = [...]int{unix.RLIMIT_CPU, unix.RLIMIT_NPROC, unix.RLIMIT_AS, unix.RLIMIT_FSIZE, unix.RLIMIT_CORE, unix.RLIMIT_NOFILE}

// childPlan is everything the forked child needs, prepared before the fork
// so that the child allocates nothing.
type childPlan struct {
	path     *byte
	argv     []*byte // nil-terminated
	envv     []*byte // nil-terminated
	dir      *byte
	fds      [3]int // the command's 0, 1, 2
	ctty     bool   // 0 is a terminal, to become the command's controlling terminal
	rlimits  [len(rlimitResources)]unix.Rlimit
	ruleset  int
	hideView *byte    // the daemon's view, unmounted in the command's namespace (nil: none)
	procRule struct { // the rule for the command's own /proc, completed in the child
		access uint64
		fd     int
	}
	prog      *unix.SockFprog
	scratch   *scratchPlan // a read run's throwaway layer, or nil
	cgroup    int          // cgroup.procs of the command's pids cgroup, or -1
	self      *byte        // "0": what, written to cgroup.procs, moves the writer
	procSrc   *byte
	procDst   *byte
	procFS    *byte
	capHeader unix.CapUserHeader
	capData   [2]unix.CapUserData // all zero: no capabilities at all
	failure   [2]uint32           // step, errno: what the child reports if it cannot exec
	errPipe   int
	cloneArgs uintptr
	// lo is the loopback's request, when the command has a network
	// namespace of its own (ownNet): brought up through loFD.
	lo   *ifreqFlags
	loFD int
}

// ifreqFlags is struct ifreq as SIOCGIFFLAGS and SIOCSIFFLAGS read it.
type ifreqFlags struct {
	name  [unix.IFNAMSIZ]byte
	flags uint16
	_     [22]byte
}

// ownNet gives the command a network namespace of its own, with only its
// loopback, up: less than its harness's network (an agent's run whose
// own process has one, and whose commands ask for none).
func (p *childPlan) ownNet() {
	p.cloneArgs |= unix.CLONE_NEWNET
	p.lo = &ifreqFlags{}
	copy(p.lo.name[:], "lo")
}

// scratchPlan is what the child mounts for a read run's throwaway layer: a
// tmpfs at dir with u and w in it, an overlay of them over the workspace,
// and the Landlock rule that lets the command write there.
type scratchPlan struct {
	tmpfsSrc, tmpfsType, dir, tmpfsOpts *byte
	upper, work                         *byte
	ovlSrc, ovlType, ws, ovlOpts        *byte
	rule                                struct {
		access uint64
		fd     int
	}
}

func newScratchPlan(dir, ws string, size int64) *scratchPlan {
	s := &scratchPlan{}
	for p, v := range map[**byte]string{&s.tmpfsSrc: "scratch", &s.tmpfsType: "tmpfs", &s.dir: dir,
		&s.tmpfsOpts: fmt.Sprintf("size=%d,mode=0755", size), &s.upper: dir + "/u", &s.work: dir + "/w",
		&s.ovlSrc: "paddock-scratch", &s.ovlType: "overlay", &s.ws: ws, &s.ovlOpts: scratchOptions(dir, ws)} {
		*p, _ = unix.BytePtrFromString(v)
	}
	s.rule.access = accessRead | accessWrite // masked by the kernel's rights (harness.plan)
	return s
}

// Steps of the child, reported when one fails.
var childSteps = [...]string{"", "setsid, join the pids cgroup", "mount /proc, hide the daemon's view, mount the scratch layer", "set limits", "no_new_privs",
	"drop capabilities", "landlock", "seccomp", "descriptors, the controlling terminal", "enter the directory", "exec", "bring up the loopback"}

// ChildError says which step of starting a command failed.
type ChildError struct {
	Step  string
	Errno syscall.Errno
}

func (e *ChildError) Error() string { return fmt.Sprintf("%s: %v", e.Step, e.Errno) }

func (e *ChildError) Unwrap() error { return e.Errno }

func bytePtrs(ss []string) ([]*byte, error) {
	out := make([]*byte, 0, len(ss)+1)
	for _, s := range ss {
		p, err := unix.BytePtrFromString(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return append(out, nil), nil
}

func newChildPlan(path string, argv, env []string, dir string, fds [3]int, l Limits, ruleset int, prog *unix.SockFprog, cgroup int) (*childPlan, error) {
	p := &childPlan{fds: fds, ruleset: ruleset, prog: prog, cgroup: cgroup}
	p.self, _ = unix.BytePtrFromString("0")
	var err error
	if p.path, err = unix.BytePtrFromString(path); err != nil {
		return nil, err
	}
	if p.dir, err = unix.BytePtrFromString(dir); err != nil {
		return nil, err
	}
	if p.argv, err = bytePtrs(argv); err != nil {
		return nil, err
	}
	if p.envv, err = bytePtrs(env); err != nil {
		return nil, err
	}
	p.procSrc, _ = unix.BytePtrFromString("proc")
	p.procDst, _ = unix.BytePtrFromString("/proc")
	p.procFS = p.procSrc
	p.procRule.access = accessRead // rights of ABI 1: every Landlock has them
	p.capHeader.Version = unix.LINUX_CAPABILITY_VERSION_3
	cpu := uint64(l.CPU.Seconds())
	if cpu == 0 {
		cpu = 1
	}
	var nofile unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile)
	nofile.Cur = min(nofile.Max, 1024) // what a login shell gets, not the Go runtime's raised limit
	for i, v := range []uint64{cpu, nproc(l, cgroup >= 0), addressSpace(l), uint64(l.FileSize), 0} {
		p.rlimits[i] = unix.Rlimit{Cur: v, Max: v}
	}
	p.rlimits[len(rlimitResources)-1] = nofile
	p.cloneArgs = uintptr(unix.CLONE_VM | unix.CLONE_VFORK | unix.CLONE_NEWPID | unix.CLONE_NEWNS | uintptr(unix.SIGCHLD))
	return p, nil
}

// forkCommand starts the plan's command in a new pid and mount namespace
// (it is that namespace's init: when it ends, everything it started dies)
// and returns its pid once it has exec'd.
func forkCommand(p *childPlan) (int, error) {
	var pipe [2]int
	syscall.ForkLock.Lock()
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		syscall.ForkLock.Unlock()
		return 0, err
	}
	p.errPipe = pipe[1]
	pid, errno := forkChild(p)
	syscall.ForkLock.Unlock()
	unix.Close(pipe[1])
	defer unix.Close(pipe[0])
	if errno != 0 {
		return 0, fmt.Errorf("fork: %w", errno)
	}
	var buf [8]byte
	n, err := readFull(pipe[0], buf[:])
	if n == 0 && err == nil {
		return int(pid), nil // exec closed the pipe
	}
	var ws unix.WaitStatus
	unix.Wait4(int(pid), &ws, 0, nil)
	if n != len(buf) {
		return 0, fmt.Errorf("the command's child ended before exec: %v", err)
	}
	step, e := *(*uint32)(unsafe.Pointer(&buf[0])), *(*uint32)(unsafe.Pointer(&buf[4]))
	name := "unknown"
	if int(step) < len(childSteps) {
		name = childSteps[step]
	}
	return 0, &ChildError{Step: name, Errno: syscall.Errno(e)}
}

func readFull(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := unix.Read(fd, b[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, nil
		}
		n += m
	}
	return n, nil
}

// forkChild forks; the child never returns. It runs with the runtime's
// signals blocked and its stack guard spoiled: no allocation, no stack
// growth, no non-assembly calls but the runtime's fork hook and the child*
// helpers below, which are go:nosplit (the linker checks that their frames
// fit without growing the stack) and go:norace like this function.
//
// It is never inlined, so that its frame stays apart from forkCommand's,
// as package syscall keeps forkAndExecInChild1's: the child uses this
// frame, and the parent must not depend on anything in it after the fork.
//
//go:noinline
//go:norace
func forkChild(p *childPlan) (uintptr, syscall.Errno) {
	var (
		r1    uintptr
		errno syscall.Errno
		step  uint32
	)
	runtimeBeforeFork()
	r1, errno = rawVfork(unix.SYS_CLONE, p.cloneArgs, 0, 0)
	if errno != 0 || r1 != 0 {
		// The parent must leave this frame at once: the child has used it.
		runtimeAfterFork()
		return r1, errno
	}
	// The child: pid 1 of its own pid namespace, in its own mount namespace.
	runtimeAfterForkInChild()
	step = 1
	if errno = p.childSession(); errno != 0 {
		goto fail
	}
	if p.lo != nil {
		step = 11
		if errno = p.childLoopback(); errno != 0 {
			goto fail
		}
	}
	step = 2
	if errno = p.childMounts(); errno != 0 {
		goto fail
	}
	step = 3
	if errno = p.childLimits(); errno != 0 {
		goto fail
	}
	step = 4
	if _, _, errno = syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); errno != 0 {
		goto fail
	}
	step = 5
	if errno = p.childDropCapabilities(); errno != 0 {
		goto fail
	}
	step = 6
	if p.ruleset >= 0 {
		if _, _, errno = syscall.RawSyscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(p.ruleset), 0, 0); errno != 0 {
			goto fail
		}
	}
	step = 7
	if p.prog != nil {
		if _, _, errno = syscall.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(p.prog))); errno != 0 {
			goto fail
		}
	}
	step = 8
	if errno = p.childDescriptors(); errno != 0 {
		goto fail
	}
	step = 9
	if _, _, errno = syscall.RawSyscall(unix.SYS_CHDIR, uintptr(unsafe.Pointer(p.dir)), 0, 0); errno != 0 {
		goto fail
	}
	step = 10
	_, _, errno = syscall.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(p.path)),
		uintptr(unsafe.Pointer(&p.argv[0])), uintptr(unsafe.Pointer(&p.envv[0])))
fail:
	p.failure[0], p.failure[1] = step, uint32(errno)
	syscall.RawSyscall(unix.SYS_WRITE, uintptr(p.errPipe), uintptr(unsafe.Pointer(&p.failure[0])), 8)
	for {
		syscall.RawSyscall(unix.SYS_EXIT_GROUP, 127, 0, 0)
	}
}

// The child* functions are forkChild's steps, run in the child between
// fork and exec under the same rules: raw system calls on memory prepared
// before the fork, nothing else. Each returns the first error.

// childSession makes the child a session leader and moves it into the
// command's pids cgroup.
//
//go:nosplit
//go:norace
func (p *childPlan) childSession() syscall.Errno {
	if _, _, errno := syscall.RawSyscall(unix.SYS_SETSID, 0, 0, 0); errno != 0 {
		return errno
	}
	if p.cgroup >= 0 {
		if _, _, errno := syscall.RawSyscall(unix.SYS_WRITE, uintptr(p.cgroup), uintptr(unsafe.Pointer(p.self)), 1); errno != 0 {
			return errno
		}
	}
	return 0
}

// childLoopback brings up the loopback of the child's own network namespace.
//
//go:nosplit
//go:norace
func (p *childPlan) childLoopback() syscall.Errno {
	r1, _, errno := syscall.RawSyscall(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if errno != 0 {
		return errno
	}
	p.loFD = int(r1)
	if _, _, errno = syscall.RawSyscall(unix.SYS_IOCTL, uintptr(p.loFD), unix.SIOCGIFFLAGS, uintptr(unsafe.Pointer(p.lo))); errno != 0 {
		return errno
	}
	p.lo.flags |= unix.IFF_UP
	if _, _, errno = syscall.RawSyscall(unix.SYS_IOCTL, uintptr(p.loFD), unix.SIOCSIFFLAGS, uintptr(unsafe.Pointer(p.lo))); errno != 0 {
		return errno
	}
	syscall.RawSyscall(unix.SYS_CLOSE, uintptr(p.loFD), 0, 0)
	return 0
}

// childMounts mounts the command's own /proc and lets it read there,
// hides the daemon's view and mounts a read run's scratch layer.
//
//go:nosplit
//go:norace
func (p *childPlan) childMounts() syscall.Errno {
	if _, _, errno := syscall.RawSyscall6(unix.SYS_MOUNT, uintptr(unsafe.Pointer(p.procSrc)), uintptr(unsafe.Pointer(p.procDst)),
		uintptr(unsafe.Pointer(p.procFS)), unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, 0, 0); errno != 0 {
		return errno
	}
	r1, _, errno := syscall.RawSyscall6(unix.SYS_OPENAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(p.procDst)), unix.O_PATH|unix.O_CLOEXEC, 0, 0, 0)
	if errno != 0 {
		return errno
	}
	p.procRule.fd = int(r1)
	if p.ruleset >= 0 {
		if _, _, errno = syscall.RawSyscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(p.ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&p.procRule)), 0, 0, 0); errno != 0 {
			return errno
		}
	}
	if p.hideView != nil {
		if _, _, errno = syscall.RawSyscall(unix.SYS_UMOUNT2, uintptr(unsafe.Pointer(p.hideView)), unix.MNT_DETACH, 0); errno != 0 {
			return errno
		}
	}
	if p.scratch != nil {
		return p.scratch.childMount(p.ruleset)
	}
	return 0
}

// childMount mounts the scratch layer (a tmpfs with the overlay's upper
// and work directories, and the overlay over the workspace) and adds the
// rule that lets the command write there.
//
//go:nosplit
//go:norace
func (s *scratchPlan) childMount(ruleset int) syscall.Errno {
	if _, _, errno := syscall.RawSyscall6(unix.SYS_MOUNT, uintptr(unsafe.Pointer(s.tmpfsSrc)), uintptr(unsafe.Pointer(s.dir)),
		uintptr(unsafe.Pointer(s.tmpfsType)), unix.MS_NOSUID|unix.MS_NODEV, uintptr(unsafe.Pointer(s.tmpfsOpts)), 0); errno != 0 {
		return errno
	}
	if _, _, errno := syscall.RawSyscall(unix.SYS_MKDIRAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(s.upper)), 0o755); errno != 0 {
		return errno
	}
	if _, _, errno := syscall.RawSyscall(unix.SYS_MKDIRAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(s.work)), 0o755); errno != 0 {
		return errno
	}
	if _, _, errno := syscall.RawSyscall6(unix.SYS_MOUNT, uintptr(unsafe.Pointer(s.ovlSrc)), uintptr(unsafe.Pointer(s.ws)),
		uintptr(unsafe.Pointer(s.ovlType)), unix.MS_NOSUID|unix.MS_NODEV, uintptr(unsafe.Pointer(s.ovlOpts)), 0); errno != 0 {
		return errno
	}
	r1, _, errno := syscall.RawSyscall6(unix.SYS_OPENAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(s.ws)), unix.O_PATH|unix.O_CLOEXEC, 0, 0, 0)
	if errno != 0 {
		return errno
	}
	s.rule.fd = int(r1)
	if ruleset < 0 {
		return 0
	}
	_, _, errno = syscall.RawSyscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&s.rule)), 0, 0, 0)
	return errno
}

// childLimits sets the command's resource limits.
//
//go:nosplit
//go:norace
func (p *childPlan) childLimits() syscall.Errno {
	for i := 0; i < len(rlimitResources); i++ {
		if _, _, errno := syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(rlimitResources[i]), uintptr(unsafe.Pointer(&p.rlimits[i])), 0, 0, 0); errno != 0 {
			return errno
		}
	}
	return 0
}

// childDropCapabilities clears the ambient set and then every other one.
//
//go:nosplit
//go:norace
func (p *childPlan) childDropCapabilities() syscall.Errno {
	if _, _, errno := syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0); errno != 0 {
		return errno
	}
	_, _, errno := syscall.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&p.capHeader)), uintptr(unsafe.Pointer(&p.capData[0])), 0)
	return errno
}

// childDescriptors puts the command's descriptors at 0, 1 and 2 and, when
// 0 is a terminal, makes it the controlling terminal.
//
//go:nosplit
//go:norace
func (p *childPlan) childDescriptors() syscall.Errno {
	for i := 0; i < 3; i++ {
		if _, _, errno := syscall.RawSyscall(unix.SYS_DUP3, uintptr(p.fds[i]), uintptr(i), 0); errno != 0 {
			return errno
		}
	}
	if p.ctty {
		// The child leads a new session (childSession), with no terminal
		// yet: this one becomes it (no stealing, arg 0).
		if _, _, errno := syscall.RawSyscall(unix.SYS_IOCTL, 0, unix.TIOCSCTTY, 0); errno != 0 {
			return errno
		}
	}
	return 0
}

var atFDCWD = unix.AT_FDCWD // a variable: the constant does not convert to uintptr
