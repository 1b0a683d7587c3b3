//go:build linux

package sandbox

import (
	"fmt"
	"sync"

	"github.com/paddock-dev/paddock"
)

// What holds each property of the confinement, kernel by kernel.
//
// The sandbox enforces properties, not mechanisms: each property is held
// by every mechanism this kernel offers for it, and a command is refused
// only when a property it needs has none. Landlock is used from ABI 1 up,
// with every right the kernel offers (the floor is 1 because every
// property Landlock holds is also held by the view or a namespace: on a
// kernel without it, or booted without it in lsm=, commands still run,
// and the record names what held them):
//
//	writes            Landlock's file rights; the mount view (read-only but for the workspace, /tmp and writable binds)
//	reads             the mount view (its root holds only what the command may see); Landlock's file rights
//	network           the network namespace (only its loopback, or the bridge to the allow-list's proxy); Landlock's TCP rights (ABI 4)
//	signals           the pid namespace (no process outside it can be named); Landlock's signal scope (ABI 6)
//	abstract-sockets  the network namespace (abstract unix sockets are per namespace); Landlock's abstract socket scope (ABI 6)
//	privileges        no_new_privs, and no capabilities (cleared before exec)
//	syscalls          seccomp
//	processes         a pids cgroup of the command's own, or RLIMIT_NPROC (the uid's count)
//
// A command with the host's network shares the host's abstract sockets
// unless Landlock scopes them: before ABI 6 nothing does, and such a
// command is refused (unless the spec allows degraded runs).

// landlockRights are the Landlock rights handled on one kernel: every one
// its ABI offers, up to 6 (7 adds only audit flags).
type landlockRights struct {
	abi    int
	fs     uint64
	net    uint64
	scoped uint64
}

// rightsFor returns the rights handled at a Landlock ABI (0: none): those
// of go-landlock's configuration for that ABI, the one table of which
// right came in which ABI.
func rightsFor(abi int) landlockRights {
	abi = min(abi, len(landlockConfigs))
	if abi <= 0 {
		return landlockRights{}
	}
	c := landlockConfigs[abi-1]
	return landlockRights{abi: abi, fs: uint64(c.HandledAccessFS), net: uint64(c.HandledAccessNet), scoped: uint64(c.Scoped)}
}

// kernelABI is this kernel's Landlock ABI, probed once per process.
var kernelABI = sync.OnceValue(landlockABI)

// specRights are the rights a spec's commands get on this kernel: all it
// offers, or those of the ABI below Spec.LandlockBelow (tests of older
// kernels' paths), -1 standing for none.
func specRights(spec *Spec) landlockRights {
	abi := kernelABI()
	if spec.LandlockBelow != 0 {
		abi = min(abi, max(spec.LandlockBelow-1, 0))
	}
	return rightsFor(abi)
}

// uncovered says what property spec needs that nothing on a kernel with
// rights r holds, or "" when every one is held.
func uncovered(spec *Spec, r landlockRights) string {
	if spec.Net == NetHost && r.scoped == 0 {
		return fmt.Sprintf("a command with the host's network needs Landlock ABI 6 (kernel 6.12+) to keep it from the host's abstract unix sockets; this kernel offers ABI %d", r.abi)
	}
	return ""
}

// checkCovered refuses a spec a property of which nothing holds, unless it
// allows degraded runs (then e records it).
func checkCovered(spec *Spec, r landlockRights, e *Enforcement) error {
	why := uncovered(spec, r)
	switch {
	case why == "":
		return nil
	case spec.AllowDegraded:
		if e != nil {
			e.Degraded = append(e.Degraded, why)
		}
		return nil
	}
	return unsupportedError{why}
}

// holds is the table of what held each property of a command whose
// enforcement is e (its Landlock ABI, network, seccomp, privileges and
// process scope).
func holds(e *Enforcement) []paddock.Hold {
	r := rightsFor(e.Landlock)
	var fs, tcp, scope []string
	if r.fs != 0 {
		fs = []string{paddock.MechLandlockFS}
	}
	if r.net != 0 {
		tcp = []string{paddock.MechLandlockTCP}
	}
	if r.scoped != 0 {
		scope = []string{paddock.MechLandlockScope}
	}
	h := []paddock.Hold{
		{Property: paddock.PropWrites, HeldBy: append(fs, paddock.MechMountView)},
		{Property: paddock.PropReads, HeldBy: append([]string{paddock.MechMountView}, fs...)},
	}
	net, abstract := paddock.Hold{Property: paddock.PropNetwork}, paddock.Hold{Property: paddock.PropAbstractSockets}
	switch {
	case e.Net == string(NetHost):
		net.Note = "the command asked for the host's network"
		abstract.HeldBy = scope
		if len(scope) == 0 {
			abstract.Note = "the host's network, and no Landlock scope on this kernel (degraded)"
		}
	case e.Net == string(NetAllow):
		net.HeldBy = append([]string{paddock.MechNetNS, paddock.MechProxy}, tcp...)
		abstract.HeldBy = append([]string{paddock.MechNetNS}, scope...)
	default:
		net.HeldBy = []string{paddock.MechNetNS}
		abstract.HeldBy = append([]string{paddock.MechNetNS}, scope...)
	}
	h = append(h, net,
		paddock.Hold{Property: paddock.PropSignals, HeldBy: append([]string{paddock.MechPIDNS}, scope...)},
		abstract)
	priv := paddock.Hold{Property: paddock.PropPrivileges}
	if e.NoNewPrivs {
		priv.HeldBy = append(priv.HeldBy, paddock.MechNoNewPrivs)
	}
	if e.Caps == "none" {
		priv.HeldBy = append(priv.HeldBy, paddock.MechCapsDropped)
	}
	sys := paddock.Hold{Property: paddock.PropSyscalls}
	if e.Seccomp {
		sys.HeldBy = []string{paddock.MechSeccomp}
	} else {
		sys.Note = "no seccomp filter (degraded)"
	}
	procs := paddock.Hold{Property: paddock.PropProcesses, HeldBy: []string{paddock.MechRlimitNproc}, Note: "counts every process of the sandbox's uid"}
	if e.ProcsScope == ProcsPerCommand {
		procs = paddock.Hold{Property: paddock.PropProcesses, HeldBy: []string{paddock.MechPidsCgroup}}
	}
	mem := paddock.Hold{Property: paddock.PropMemory, HeldBy: []string{paddock.MechRlimitAS}, Note: "bounds the address space, not the memory used"}
	if e.Limits.MemoryCgroup {
		mem = paddock.Hold{Property: paddock.PropMemory, HeldBy: []string{paddock.MechMemoryCgroup}}
	}
	cpu := paddock.Hold{Property: paddock.PropCPU, HeldBy: []string{paddock.MechRlimitCPU}}
	if e.Limits.CPUs > 0 {
		cpu.HeldBy = append(cpu.HeldBy, paddock.MechCPUCgroup)
	}
	return append(h, priv, sys, procs, mem, cpu)
}

// KernelHolds is what holds each property of the confinement of a command
// with no network on this kernel, as this process would build it: the
// table `paddock capabilities` shows before any command ran.
func KernelHolds() []paddock.Hold {
	e := Enforcement{Landlock: rightsFor(kernelABI()).abi, Net: string(NetNone), Seccomp: true, NoNewPrivs: true, Caps: "none", ProcsScope: ProcsPerUID}
	r := findPids()
	if r.path != "" {
		e.ProcsScope = ProcsPerCommand
	}
	e.Limits.MemoryCgroup = r.mem
	return holds(&e)
}
