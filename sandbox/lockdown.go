//go:build linux

package sandbox

import (
	"fmt"
	"slices"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM in every sandboxed process.
var deniedSyscalls = []struct {
	name string
	nr   uint32
}{
	// Reading or steering other processes.
	{"ptrace", unix.SYS_PTRACE}, {"process_vm_readv", unix.SYS_PROCESS_VM_READV}, {"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV},
	{"kcmp", unix.SYS_KCMP}, {"pidfd_getfd", unix.SYS_PIDFD_GETFD},
	// io_uring bypasses seccomp for the operations it queues.
	{"io_uring_setup", unix.SYS_IO_URING_SETUP}, {"io_uring_enter", unix.SYS_IO_URING_ENTER}, {"io_uring_register", unix.SYS_IO_URING_REGISTER},
	// Mounts and roots.
	{"mount", unix.SYS_MOUNT}, {"umount2", unix.SYS_UMOUNT2}, {"pivot_root", unix.SYS_PIVOT_ROOT}, {"chroot", unix.SYS_CHROOT},
	{"move_mount", unix.SYS_MOVE_MOUNT}, {"open_tree", unix.SYS_OPEN_TREE}, {"fsopen", unix.SYS_FSOPEN}, {"fsmount", unix.SYS_FSMOUNT},
	{"fsconfig", unix.SYS_FSCONFIG}, {"fspick", unix.SYS_FSPICK}, {"mount_setattr", unix.SYS_MOUNT_SETATTR},
	// The kernel keyring.
	{"add_key", unix.SYS_ADD_KEY}, {"request_key", unix.SYS_REQUEST_KEY}, {"keyctl", unix.SYS_KEYCTL},
	// Kernel attack surface.
	{"bpf", unix.SYS_BPF}, {"perf_event_open", unix.SYS_PERF_EVENT_OPEN}, {"userfaultfd", unix.SYS_USERFAULTFD},
	{"init_module", unix.SYS_INIT_MODULE}, {"finit_module", unix.SYS_FINIT_MODULE}, {"delete_module", unix.SYS_DELETE_MODULE},
	{"kexec_load", unix.SYS_KEXEC_LOAD}, {"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD},
	{"reboot", unix.SYS_REBOOT}, {"swapon", unix.SYS_SWAPON}, {"swapoff", unix.SYS_SWAPOFF}, {"syslog", unix.SYS_SYSLOG},
	{"acct", unix.SYS_ACCT}, {"quotactl", unix.SYS_QUOTACTL}, {"lookup_dcookie", unix.SYS_LOOKUP_DCOOKIE},
	{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT}, {"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT},
	// New namespaces (nested user namespaces re-grant capabilities).
	{"unshare", unix.SYS_UNSHARE}, {"setns", unix.SYS_SETNS},
}

// seccompPolicy is the filter every sandboxed process inherits, less the
// calls named in except (the harness keeps mount and umount2 for each
// command's own /proc). It names the native architecture's system calls
// only: seccompFilter puts the gate that refuses every other architecture
// in front of it.
func seccompPolicy(except ...string) []seccompRule {
	var rules []seccompRule
	for _, d := range deniedSyscalls {
		if !slices.Contains(except, d.name) {
			rules = append(rules, seccompRule{name: d.name, nr: d.nr, errno: unix.EPERM, arg: -1})
		}
	}
	return append(rules,
		// AF_VSOCK sockets reach the hypervisor's host.
		seccompRule{name: "socket", nr: unix.SYS_SOCKET, errno: unix.EPERM, arg: 0, eq: []uint32{unix.AF_VSOCK}},
		// Pushing input into a terminal, or the Linux console's ioctls.
		seccompRule{name: "ioctl", nr: unix.SYS_IOCTL, errno: unix.EPERM, arg: 1, eq: []uint32{unix.TIOCSTI, unix.TIOCLINUX}},
		// clone with a new user namespace (clone3 takes a struct seccomp
		// cannot read: it is refused outright below). The flags are the
		// low bits of clone's first argument on both architectures.
		seccompRule{name: "clone", nr: unix.SYS_CLONE, errno: unix.EPERM, arg: 0, bits: unix.CLONE_NEWUSER},
		// clone3 gets ENOSYS so that libc falls back to clone, which the
		// filter can inspect.
		seccompRule{name: "clone3", nr: unix.SYS_CLONE3, errno: unix.ENOSYS, arg: -1},
	)
}

// lockdown confines the helper, and so the command it starts: Landlock,
// no_new_privs and seccomp, and no ambient capabilities to inherit.
func lockdown(spec *Spec, e *Enforcement) error {
	r := specRights(spec)
	if err := checkCovered(spec, r, e); err != nil {
		return err
	}
	if err := restrictLandlock(spec, r); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	e.Landlock = r.abi

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
	e.Holds = holds(e)
	return nil
}

// landlockConfigs are go-landlock's configurations, by ABI.
var landlockConfigs = [...]landlock.Config{landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6}

// restrictLandlock puts the helper (and so its command) under Landlock with
// every right of rights r, and none where r has none: what Landlock cannot
// hold there, the view and the namespaces still do (holds.go).
func restrictLandlock(spec *Spec, r landlockRights) error {
	if r.abi == 0 {
		return nil
	}
	var rules []landlock.Rule
	for _, v := range viewRules(spec) {
		if a := v.access & r.fs; a != 0 {
			rules = append(rules, landlock.PathAccess(landlock.AccessFSSet(a), v.paths...))
		}
	}
	// With an allow-list, the one TCP connect allowed is to the bridge to
	// the proxy. With the network off, the network namespace holds only
	// its own loopback, up: TCP there reaches nothing but the command's
	// own servers, so Landlock leaves it be, as with host.
	cfg := landlockConfigs[r.abi-1]
	if spec.Net == NetAllow && r.net != 0 {
		return cfg.Restrict(append(rules, landlock.ConnectTCP(ProxyPort))...)
	}
	if err := cfg.RestrictPaths(rules...); err != nil {
		return err
	}
	if r.scoped != 0 {
		return cfg.RestrictScoped()
	}
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
