package sandbox

import (
	"fmt"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// MinLandlockABI is the Landlock ABI the sandbox requires: 6 scopes abstract
// unix sockets and signals, and 4 restricts TCP.
const MinLandlockABI = 6

// deniedSyscalls fail with EPERM in every sandboxed process.
var deniedSyscalls = []string{
	// Reading or steering other processes.
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	// io_uring bypasses seccomp for the operations it queues.
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// Mounts and roots.
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsmount",
	"fsconfig", "fspick", "mount_setattr",
	// The kernel keyring.
	"add_key", "request_key", "keyctl",
	// Kernel attack surface.
	"bpf", "perf_event_open", "userfaultfd",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "lookup_dcookie",
	"open_by_handle_at", "name_to_handle_at",
	// New namespaces (nested user namespaces re-grant capabilities).
	"unshare", "setns",
}

// seccompPolicy is the filter every sandboxed process inherits. It names
// the native architecture's system calls only: seccompFilter puts the gate
// that refuses every other architecture in front of it.
func seccompPolicy() seccomp.Policy {
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: deniedSyscalls},
			{Action: seccomp.ActionErrno, NamesWithCondtions: []seccomp.NameWithConditions{
				// AF_VSOCK sockets reach the hypervisor's host.
				{Name: "socket", Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.Equal, Value: unix.AF_VSOCK}}},
				// Pushing input into a terminal, or the Linux console's ioctls.
				{Name: "ioctl", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.Equal, Value: unix.TIOCSTI}}},
				{Name: "ioctl", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.Equal, Value: unix.TIOCLINUX}}},
				// clone with a new user namespace (clone3 takes a struct
				// seccomp cannot read: it is refused outright below).
				{Name: "clone", Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_NEWUSER}}},
			}},
			// clone3 gets ENOSYS so that libc falls back to clone, which the
			// filter can inspect.
			{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
		},
	}
}

// lockdown confines the helper, and so the command it starts: Landlock,
// no_new_privs and seccomp, and no ambient capabilities to inherit.
func lockdown(spec *Spec, e *Enforcement) error {
	abi := landlockABI()
	if abi < MinLandlockABI {
		if !spec.AllowDegraded {
			return unsupportedError{fmt.Sprintf("Landlock ABI %d is needed, the kernel offers %d", MinLandlockABI, abi)}
		}
		e.Degraded = append(e.Degraded, fmt.Sprintf("landlock ABI %d < %d", abi, MinLandlockABI))
	}
	var rules []landlock.Rule
	for _, r := range viewRules(spec) {
		rules = append(rules, landlock.PathAccess(landlock.AccessFSSet(r.access), r.paths...))
	}
	cfg := landlock.V6
	if abi < MinLandlockABI {
		cfg = cfg.BestEffort()
	}
	// With the network off, no TCP bind or connect is allowed at all (on top
	// of the empty network namespace); with host, TCP is not restricted.
	var err error
	switch spec.Net {
	case NetHost:
		err = cfg.RestrictPaths(rules...)
		if err == nil {
			err = cfg.RestrictScoped()
		}
	case NetAllow:
		// The one TCP connect allowed: to the bridge to the proxy.
		err = cfg.Restrict(append(rules, landlock.ConnectTCP(ProxyPort))...)
	default:
		err = cfg.Restrict(rules...)
	}
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	e.Landlock = min(abi, 6)

	if err := loadSeccomp(seccompPolicy()); err != nil {
		if !spec.AllowDegraded {
			return unsupportedError{fmt.Sprintf("seccomp: %v", err)}
		}
		e.Degraded = append(e.Degraded, "seccomp: "+err.Error())
	} else {
		e.Seccomp = true
	}
	e.NoNewPrivs = true
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	// The command must not inherit the helper's CAP_SYS_ADMIN.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	e.Caps = "none"
	return nil
}

// landlockABI asks the kernel which Landlock ABI it offers (0 if none).
func landlockABI() int {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(abi)
}
