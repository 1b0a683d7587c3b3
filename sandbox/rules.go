//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"unsafe"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The Landlock rights paddock grants, as go-landlock's RODirs, RWDirs,
// ROFiles and RWFiles define them (each masked by the kernel's own, see
// rightsFor, as are the network rights handled for an allow-list, ABI 4,
// and the scopes, ABI 6).
const (
	accessRead  = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	accessWrite = ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym | ll.AccessFSTruncate
	accessFile  = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// fsRule grants access to paths (directories, or files when the access is
// a file's).
type fsRule struct {
	access uint64
	paths  []string
}

// viewRules is the one description of what a command may touch in its
// view; the helper enforces it through go-landlock, the harness through a
// ruleset each command applies to itself.
func viewRules(spec *Spec) []fsRule {
	ro := []string{"/usr", "/etc", "/proc", "/dev"}
	for _, d := range systemDirs {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			ro = append(ro, d)
		}
	}
	rules := []fsRule{
		{accessRead, ro},
		{accessRead | accessWrite, []string{"/tmp"}},
		{(accessRead | accessWrite) & accessFile, []string{"/dev/null", "/dev/zero", "/dev/full"}},
		{accessRead & accessFile, []string{"/dev/random", "/dev/urandom"}},
	}
	if fi, err := os.Lstat("/dev/tty"); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		// The command's controlling terminal, when it has one (else
		// opening it fails, ENXIO), with its terminal ioctls.
		rules = append(rules, fsRule{(accessRead|accessWrite)&accessFile | ll.AccessFSIoctlDev, []string{"/dev/tty"}})
	}
	if spec.ReadOnly && !spec.Scratch {
		rules = append(rules, fsRule{accessRead, []string{spec.Workspace}})
	} else {
		rules = append(rules, fsRule{accessRead | accessWrite, []string{spec.Workspace}})
	}
	for _, b := range spec.Binds {
		access := uint64(accessRead)
		if !b.ReadOnly {
			access |= accessWrite
		}
		if b.File {
			access &= accessFile // a file takes no directory rights
		}
		rules = append(rules, fsRule{access, []string{b.Target}})
	}
	return rules
}

// pathRule is one Landlock rule on a path opened once (O_PATH).
type pathRule struct {
	fd     int
	access uint64
}

// openRules opens the paths of viewRules, but /proc, which each forked
// command mounts anew (a rule on the harness's /proc would not cover it).
func openRules(spec *Spec) ([]pathRule, error) {
	var out []pathRule
	for _, r := range viewRules(spec) {
		for _, p := range r.paths {
			if p == "/proc" {
				continue
			}
			fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
			if err != nil {
				for _, o := range out {
					unix.Close(o.fd)
				}
				return nil, fmt.Errorf("landlock: %s: %w", p, err)
			}
			access := r.access
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				access &= accessFile
			}
			out = append(out, pathRule{fd, access})
		}
	}
	return out, nil
}

// newRuleset builds the Landlock ruleset of viewRules (and of the network
// policy) as a descriptor, for a forked command to apply to itself with
// landlock_restrict_self after adding its own /proc: the same domain the
// helper gets through go-landlock.
//
// It uses every right the kernel offers, and returns -1 where the kernel
// has no Landlock: the view and the namespaces hold what it would
// (holds.go).
func newRuleset(spec *Spec, rules []pathRule) (int, error) {
	r := specRights(spec)
	if r.fs == 0 {
		return -1, nil
	}
	attr := ll.RulesetAttr{HandledAccessFS: r.fs, Scoped: r.scoped}
	if spec.Net == NetAllow && r.net != 0 {
		// The one TCP port reachable: the bridge to the proxy. With none,
		// the command's network namespace holds only its own loopback,
		// where TCP is its own business (a test's local server).
		attr.HandledAccessNet = r.net
	}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return -1, fmt.Errorf("landlock: create ruleset: %w", err)
	}
	for _, rule := range rules {
		access := rule.access & r.fs
		if access == 0 {
			continue
		}
		if err := ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{AllowedAccess: access, ParentFd: rule.fd}, 0); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("landlock: add rule: %w", err)
		}
	}
	if attr.HandledAccessNet != 0 {
		if err := ll.LandlockAddNetPortRule(fd, &ll.NetPortAttr{AllowedAccess: ll.AccessNetConnectTCP, Port: ProxyPort}, 0); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("landlock: proxy port rule: %w", err)
		}
	}
	return fd, nil
}

// seccompProgram assembles a policy into the kernel's sock_fprog form, for
// a forked command to load with seccomp(2) itself. The returned filter
// slice must stay alive as long as the program is used.
func seccompProgram(p []seccompRule) (*unix.SockFprog, []unix.SockFilter, error) {
	insts, err := seccompFilter(p)
	if err != nil {
		return nil, nil, err
	}
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return nil, nil, fmt.Errorf("seccomp: %w", err)
	}
	f := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		f[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return &unix.SockFprog{Len: uint16(len(f)), Filter: (*unix.SockFilter)(unsafe.Pointer(&f[0]))}, f, nil
}
