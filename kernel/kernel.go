// Package kernel probes which confinement mechanisms this machine's kernel
// offers: Landlock, user namespaces, overlayfs, seccomp and cgroup v2. The
// probes only look; they change nothing and need no privilege. `paddock
// doctor` reports them, and the sandbox refuses (fails closed) what a probe
// says is missing.
package kernel

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/paddock-dev/paddock"
)

// Status of one probe.
type Status = paddock.CheckStatus

// The outcomes of a probe.
const (
	OK   = paddock.CheckOK
	Warn = paddock.CheckWarn
	Fail = paddock.CheckFail
)

// Check is the result of one probe, as the doctor reports it.
type Check = paddock.Check

// Probe runs every kernel probe.
func Probe() []Check {
	return []Check{landlock(), userns(), overlay(), seccomp(), cgroup2()}
}

const (
	sysLandlockCreateRuleset     = 444
	landlockCreateRulesetVersion = 1
	fullLandlockABI              = 6
)

// LandlockABI returns the Landlock ABI version the kernel offers, or 0.
func LandlockABI() int {
	r, _, errno := syscall.Syscall(sysLandlockCreateRuleset, uintptr(unsafe.Pointer(nil)), 0, landlockCreateRulesetVersion)
	if errno != 0 {
		return 0
	}
	return int(r)
}

// landlock reports the ABI. The sandbox uses every right it offers and
// needs none: what Landlock cannot hold on an older kernel, the view and
// the namespaces do (the table below the checks says which held what).
func landlock() Check {
	abi := LandlockABI()
	c := Check{Name: "landlock", Status: OK, Detail: fmt.Sprintf("ABI %d, every right of it used", abi)}
	switch {
	case abi == 0:
		c.Status, c.Detail = Warn, "not available: the mount view and the namespaces alone hold a command's writes, reads, network and signals"
		c.Fix = "boot a kernel 5.13+ with CONFIG_SECURITY_LANDLOCK=y and landlock in the lsm= list, for a second layer"
	case abi < fullLandlockABI:
		c.Detail += fmt.Sprintf("; abstract sockets and signals are held by the namespaces (Landlock scopes them from ABI %d, kernel 6.12+), and commands with the host's network are refused", fullLandlockABI)
	}
	return c
}

func readInt(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}

func userns() Check {
	c := Check{Name: "user namespaces", Status: OK, Detail: "unprivileged user namespaces allowed"}
	if n, ok := readInt("/proc/sys/user/max_user_namespaces"); ok && n == 0 {
		c.Status, c.Detail = Warn, "disabled (user.max_user_namespaces = 0)"
		c.Fix = "sysctl -w user.max_user_namespaces=15000"
		return c
	}
	if n, ok := readInt("/proc/sys/kernel/unprivileged_userns_clone"); ok && n == 0 {
		c.Status, c.Detail = Warn, "unprivileged user namespaces disabled"
		c.Fix = "sysctl -w kernel.unprivileged_userns_clone=1"
		return c
	}
	if n, ok := readInt("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); ok && n == 1 {
		c.Status, c.Detail = Warn, "AppArmor restricts unprivileged user namespaces"
		c.Fix = "install an AppArmor profile for paddock allowing userns, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
	}
	return c
}

func overlay() Check {
	c := Check{Name: "overlayfs", Status: OK, Detail: "available"}
	b, err := os.ReadFile("/proc/filesystems")
	if err != nil || !bytes.Contains(b, []byte("\toverlay\n")) {
		c.Status, c.Detail = Warn, "overlay is not a registered file system (it may load on first use)"
		c.Fix = "modprobe overlay"
	}
	return c
}

func seccomp() Check {
	c := Check{Name: "seccomp", Status: Warn, Detail: "not reported by the kernel", Fix: "boot a kernel with CONFIG_SECCOMP_FILTER=y"}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return c
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Seccomp:"); ok {
			c.Status, c.Detail, c.Fix = OK, "available (this process: mode "+strings.TrimSpace(v)+")", ""
		}
	}
	return c
}

func cgroup2() Check {
	c := Check{Name: "cgroup v2", Status: OK}
	b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
	if err != nil {
		c.Status, c.Detail = Warn, "no unified cgroup v2 hierarchy at /sys/fs/cgroup; memory and process limits fall back to rlimits"
		c.Fix = "boot with systemd.unified_cgroup_hierarchy=1"
		return c
	}
	c.Detail = "controllers: " + strings.TrimSpace(string(b))
	return c
}
