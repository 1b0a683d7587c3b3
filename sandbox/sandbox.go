//go:build linux

// Package sandbox runs a command confined by effect: whatever the command
// does, its file and network effects stay within what its Spec allows.
//
// # Two modes
//
// Resident (Pool): each run keeps one long-lived harness process (HarnessArg),
// made like the helper below but once. Every command of the run is vforked
// from it into its own pid and mount namespace and, between fork and exec,
// mounts its own /proc, sets its rlimits, drops every capability, applies
// its own Landlock domain (the helper's rules, plus signal and abstract
// socket scoping, which keep it from its harness and from other commands)
// and the helper's seccomp filter. A command costs about a fork. The harness
// is not dumpable, is outside each command's pid namespace and Landlock
// domain, and talks to the daemon only over a socket in the daemon's private
// directory that no command can see or inherit.
//
// Per-exec (Run): the daemon never confines itself. Run re-executes the current binary as a
// small helper (HelperArg) in new user, mount, pid, network, ipc and uts
// namespaces. The helper builds the command's view of the file system, locks
// itself down (no_new_privs, Landlock, seccomp, no capabilities), sets the
// limits and becomes the command (execve). The command is the pid
// namespace's init, so when it ends every process it left behind dies with
// it; the limits bind it alone. With an "allow" network a small bridge
// process (BridgeArg) lives beside it.
//
// # The command's view
//
//   - System directories (/usr, /bin, /sbin, /lib*, /etc) read-only.
//   - The workspace at its own path, read-write (read-only for read runs);
//     protected paths in it (.git, agent configuration) read-only, those
//     that do not exist yet included: each is made first as an empty
//     directory, and every directory above one is a mount point, which a
//     command can neither rename nor remove.
//   - A private, size-capped /tmp; a minimal /dev (null, zero, full, random,
//     urandom, and tty, which opens the command's controlling terminal if
//     it was given one); /proc of the new pid namespace.
//   - The Spec's binds (a run's home, its git, shared caches), read-only
//     or writable as asked; a bind with an Upper is a copy-on-write layer,
//     an overlay whose lower directory (a cache shared by runs) commands
//     never write: their writes land in the run's upper directory.
//   - Nothing else: not the home directory, not /run or /var/run (the Docker
//     socket), not the state directory or other runs' workspaces.
//
// # Guarantees
//
//   - Landlock, with every right the kernel offers (ABI 1 up; holds.go),
//     allows writes only to the workspace (unless read-only), /tmp and the
//     /dev nodes above, reads only of the view, only a TCP connect to the
//     proxy's port with an "allow" network (ABI 4), and scopes abstract
//     unix sockets and signals to the sandbox (ABI 6). Each of these is
//     also held by the view or a namespace, so a kernel with an older
//     Landlock, or none, still holds them; the record (Enforcement.Holds)
//     names what held each. A command with the host's network needs ABI 6
//     (nothing else keeps it from the host's abstract sockets).
//   - Network: none is an empty namespace. allow is an empty namespace whose
//     loopback holds a bridge to a proxy on the host that reaches only the
//     allowed domains (HTTP CONNECT and plain HTTP), never the host's own
//     loopback, and reports every connection. host is explicit and recorded.
//   - seccomp denies ptrace, process_vm_readv/writev, io_uring, AF_VSOCK
//     sockets, mount and friends, the kernel keyring, bpf, perf_event_open,
//     module loading, kexec, new user namespaces and the TIOCSTI/TIOCLINUX
//     ioctls, with EPERM; an int argument is compared on the 32 bits the
//     kernel reads (socket(AF_VSOCK | 1<<32) is AF_VSOCK to the kernel, and
//     to the filter). It allows only the native system call ABI: a call
//     made through another (i386's int 0x80 or the x32 bit on x86_64, any
//     other audit architecture elsewhere) gets EPERM whatever its number,
//     since the deny list is written in native numbers (seccomp.go).
//   - The command runs with no capabilities, no_new_privs, a new session, only
//     descriptors 0–2, an environment built from the Spec alone, and the
//     daemon's unprivileged uid (a root daemon must name an unprivileged one).
//     Given a terminal (Spec.Terminal), 0–2 are the slave of a
//     pseudo-terminal whose master only the daemon holds, and it is the
//     command's controlling terminal; TIOCSTI and TIOCLINUX stay refused.
//   - Limits: wall time (the whole namespace is killed), CPU time, processes,
//     memory, file size, output bytes (cut with a marker), /tmp size, and
//     CPU bandwidth where a cgroup v2 holds it. Processes are counted per
//     command in a pids cgroup where the controller is reachable
//     (cgroup.go), under a bound per run; elsewhere by RLIMIT_NPROC, which
//     counts every process of the uid in the run's user namespace
//     (Enforcement.ProcsScope says which). With cgroup v2's memory
//     controller, memory is the command's memory.max (no swap, the whole
//     command killed on OOM); elsewhere its address space (RLIMIT_AS).
//
// # What it does not guarantee
//
//   - An "allow" network filters by the name the command asks the proxy for;
//     a command that ignores HTTP_PROXY has no way out at all.
//   - Without a cgroup v2 memory controller (cgroup v1, no delegation),
//     memory is limited by address space (RLIMIT_AS), not memory used, and
//     there is no CPU bandwidth limit; Enforcement.Holds says which held.
//   - A resident harness keeps CAP_SYS_ADMIN in its own user namespace (each
//     command needs it to mount its /proc) and no Landlock domain of its own;
//     its seccomp filter is the commands' without the mount and umount2
//     denials. An overlay run's harness keeps the daemon a way into the
//     workspace (DaemonView) that each command unmounts before it execs.
//   - A protected-path pattern whose new matches cannot be named ahead (a
//     wildcard above the last name, or a wildcard name in the workspace's
//     top directory) protects only what matches when the view is made; the
//     file tools refuse the rest; Enforcement.Unprotected says which.
//
// A Spec that asks for a mechanism this kernel lacks fails with code
// unsupported, unless AllowDegraded is set, which is then recorded in the
// Enforcement.
package sandbox

import (
	"crypto/x509"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/paddock-dev/paddock"
)

// HelperArg is argv[1] of the helper process. main must call HelperMain
// first thing when it sees it.
const HelperArg = "__paddock-sandbox-helper"

// Net is the network policy.
type Net string

const (
	NetNone  Net = "none"  // an empty network namespace (the default)
	NetAllow Net = "allow" // an empty namespace whose only way out is a proxy to allowed domains
	NetHost  Net = "host"  // the host's network, explicitly; recorded
)

// Limits bound one command. Zero fields take the defaults.
type Limits = paddock.CommandLimits

// DefaultLimits are applied where a Spec leaves a limit at zero.
var DefaultLimits = Limits{
	Wall:     10 * time.Minute,
	CPU:      10 * time.Minute,
	Procs:    512,
	Memory:   8 << 30,
	FileSize: 1 << 30,
	Output:   8 << 20,
	Tmp:      512 << 20,
}

// NoLimit is a time limit that never comes (an agent's session at a
// terminal, its CPU time): some 146 years. NoLimitBytes is an output limit
// that never comes.
const (
	NoLimit      = time.Duration(1 << 62)
	NoLimitBytes = int64(1 << 62)
)

// WithDefaults fills l's zero fields from DefaultLimits.
func WithDefaults(l Limits) Limits { return withDefaults(l) }

func withDefaults(l Limits) Limits {
	d := DefaultLimits
	if l.Wall > 0 {
		d.Wall = l.Wall
	}
	if l.CPU > 0 {
		d.CPU = l.CPU
	}
	if l.Procs > 0 {
		d.Procs = l.Procs
	}
	if l.Memory > 0 {
		d.Memory = l.Memory
	}
	if l.FileSize > 0 {
		d.FileSize = l.FileSize
	}
	if l.Output > 0 {
		d.Output = l.Output
	}
	if l.Tmp > 0 {
		d.Tmp = l.Tmp
	}
	d.CPUs, d.IOBps, d.MemoryCgroup = max(l.CPUs, 0), max(l.IOBps, 0), l.MemoryCgroup
	return d
}

// Spec is one command to run confined.
type Spec struct {
	Argv []string `json:"argv"`
	// Workspace is the host path of the workspace; the command sees it at
	// the same path and starts in Dir, relative to it.
	Workspace string `json:"workspace"`
	Dir       string `json:"dir,omitempty"`
	ReadOnly  bool   `json:"read_only,omitempty"`
	// Scratch, with ReadOnly, gives each command the workspace through a
	// writable layer of its own that evaporates when the command ends
	// (capped at Limits.Tmp): builds and tests work, nothing they write
	// outlives them or reaches the workspace.
	Scratch bool `json:"scratch,omitempty"`
	// Protected lists workspace-relative paths made read-only in the view
	// (.git and agent configuration); one that does not exist yet is made
	// as an empty directory first, so that it cannot be created.
	Protected []string `json:"protected,omitempty"`
	// OperatorDir says the workspace is the operator's own directory: the
	// sandbox makes nothing in it (a missing protected path is reported in
	// the Enforcement instead of made).
	OperatorDir bool `json:"operator_dir,omitempty"`
	// Unprotected is what the caller's policy asks for that Protected
	// cannot express (patterns whose new matches cannot be named ahead);
	// it is reported in the Enforcement as it is.
	Unprotected []string `json:"unprotected,omitempty"`
	Net         Net      `json:"net"`
	// Allow lists the domains an "allow" network reaches (see Proxy).
	Allow []string `json:"allow,omitempty"`
	// AllowAddrs are the local or private addresses (the operator's) that
	// allowed names may resolve to; any other such address is refused.
	AllowAddrs []netip.Prefix `json:"allow_addrs,omitempty"`
	// Decide is told every connection the proxy of an "allow" network
	// allows or denies.
	Decide func(ProxyDecision) `json:"-"`
	// Credentials are headers the proxy of an "allow" network sets on
	// requests to their hosts, which the command never sees (credential.go);
	// ProxyCA opens an HTTPS host's requests for it, and UpstreamRoots
	// verify the hosts (the system's if nil). Never sent to the sandbox.
	Credentials   []Credential   `json:"-"`
	ProxyCA       *ProxyCA       `json:"-"`
	UpstreamRoots *x509.CertPool `json:"-"`
	// Stdout and Stderr, if set, also receive the output as it comes. The
	// Result keeps its capped copy, in memory, unless LiveOnly. Each is
	// written from one goroutine at a time, the two concurrently. A Write
	// must keep nothing of what it is given (io.Writer's contract): the
	// bytes are read into buffers the next command's output reuses.
	Stdout io.Writer `json:"-"`
	Stderr io.Writer `json:"-"`
	// LiveOnly says the caller takes the output from Stdout and Stderr: the
	// Result keeps only its first LiveKeep bytes of each, so that output up
	// to the limit is streamed without being held in memory.
	LiveOnly bool `json:"-"`
	// Stdin is what the command reads on its standard input, written into
	// a pipe from the daemon as the command reads it; empty: /dev/null.
	// The caller bounds it (it is held in memory).
	Stdin []byte `json:"-"`
	// Input, if set, is streamed to the command's standard input as it
	// comes (instead of Stdin): its end is the command's end of input, and
	// the command's end stops the reading (the caller ends a read that
	// blocks, by closing what Input reads from).
	Input io.Reader `json:"-"`
	// Terminal, if set, runs the command on a pseudo-terminal, which the
	// daemon opens and keeps the master of: the slave is the command's
	// stdin, stdout and stderr and its controlling terminal (the command
	// is a session leader). Everything it writes is Stdout, capped and
	// passed on as it comes; Input (or Stdin) is typed into the terminal.
	Terminal *Terminal `json:"-"`
	// Env is the command's whole environment; nothing is inherited.
	Env    []string `json:"env"`
	Limits Limits   `json:"limits"`
	// UID and GID are the host ids the command runs as. Zero means the
	// daemon's own; a daemon running as root must give unprivileged ones.
	UID int `json:"uid,omitempty"`
	GID int `json:"gid,omitempty"`
	// AllowDegraded runs even where a mechanism is missing, and records it.
	AllowDegraded bool `json:"allow_degraded,omitempty"`
	// LandlockBelow, when set, has the sandbox use no Landlock ABI from it
	// up (1: none; 3: at most ABI 2): what an older kernel offers, so that
	// tests on a newer one cover the paths of those the users run (the
	// record says the ABI used; holds.go). The daemon never sets it.
	LandlockBelow int `json:"landlock_below,omitempty"`
	// Overlay, if set, makes the workspace a copy-on-write view: an overlay
	// of these host directories mounted at Workspace inside the sandbox's
	// mount namespace only (the daemon opens them; the sandbox's uid needs
	// no path to them).
	Overlay *Overlay `json:"overlay,omitempty"`
	// Binds are host directories shown in the view besides the workspace.
	Binds []Bind `json:"binds,omitempty"`
	// DaemonView asks a harness of an overlay run for the daemon's own way
	// into the workspace (DaemonView); set by Pool.
	DaemonView bool `json:"daemon_view,omitempty"`
	// OpenByPath tells the helper to open the workspace by its path; set by
	// Run when it could not hand over a detached mount.
	OpenByPath bool `json:"open_by_path,omitempty"`
	// ProcsCgroup says the command counts its processes in a pids cgroup
	// of its own (RLIMIT_NPROC, which counts a whole uid, is lifted); set
	// by Run where the pids controller is reachable.
	ProcsCgroup bool `json:"procs_cgroup,omitempty"`
	// ProxySocket is the host path of the proxy's socket; set by Run.
	ProxySocket string `json:"proxy_socket,omitempty"`
}

// Terminal is the size of a command's terminal, and its changes.
type Terminal struct {
	Size paddock.TerminalSize
	// Resize carries new sizes while the command runs (each one reaches
	// the command as SIGWINCH, as at any terminal); nil: none.
	Resize <-chan paddock.TerminalSize
}

// Overlay names the layers of a copy-on-write workspace.
type Overlay struct {
	Lower string `json:"lower"` // read-only, shared (a snapshot of the base)
	Upper string `json:"upper"` // the run's changes
	Work  string `json:"work"`  // overlayfs's scratch directory, beside Upper
	// Frozen are read-only layers stacked between Upper and Lower, the
	// topmost first: the frozen upper layers of the runs this one was
	// forked from (overlay over overlay). Whiteouts and opaque
	// directories in them hide what lies below, as in an upper layer.
	Frozen []string `json:"frozen,omitempty"`
}

// MaxFrozen bounds Overlay.Frozen: each is a descriptor handed to the
// sandbox and a lowerdir of its overlay.
const MaxFrozen = 64

// ScratchDir is where, in a read run's view, each command's throwaway
// layer is mounted (a tmpfs of its own).
const ScratchDir = "/run/paddock/scratch"

// Bind is a host directory mounted into the view outside the workspace: a
// run's home, its git directory, the project's objects, a shared cache.
type Bind struct {
	Source   string `json:"source"`    // the host directory (a file, with File)
	Target   string `json:"target"`    // where the view shows it: absolute, outside the workspace and the system directories
	ReadOnly bool   `json:"read_only"` // read-only in the view (and to Landlock)
	// File binds one file: its target is a file, which it covers (a file
	// of a bind before it, such as a configuration in a run's home that
	// the run's commands may read and never write, rename or remove).
	File bool `json:"file,omitempty"`
	// Upper, if set, makes the bind a copy-on-write layer (a cache shared
	// by runs, which each run may write without writing it): an overlay
	// of Source, below and never written, and of the upper and work
	// directories the sandbox makes in Upper (for the command's uid),
	// above. What commands write there lands in Upper/upper and outlives
	// them; the caller removes Upper with its run. One sandbox holds a
	// layer at a time (the harness for its life, a per-exec command for
	// its own): a command that finds it held gets a layer of its own in
	// memory (capped at Limits.Tmp), gone when it ends (Throwaway). Not
	// with ReadOnly or File.
	Upper string `json:"upper,omitempty"`
	// Throwaway says the layer's upper is in memory, not Upper; set by
	// the sandbox.
	Throwaway bool `json:"throwaway,omitempty"`
}

// MaxBinds bounds Spec.Binds.
const MaxBinds = 32

// Enforcement records what a command actually got.
type Enforcement = paddock.Enforcement

// Result is how a command ended.
type Result struct {
	ExitCode  int           `json:"exit_code"`
	Signal    string        `json:"signal,omitempty"`
	TimedOut  bool          `json:"timed_out,omitempty"`
	Duration  time.Duration `json:"duration"`
	CPU       time.Duration `json:"cpu"`
	MaxRSS    int64         `json:"max_rss_bytes"`
	Stdout    []byte        `json:"stdout"`
	Stderr    []byte        `json:"stderr"`
	Truncated bool          `json:"truncated,omitempty"`
	// Denied says, where the kernel lets us know, that the sandbox refused
	// something the command tried (an EPERM from seccomp or Landlock).
	Denied      []string    `json:"denied,omitempty"`
	Enforcement Enforcement `json:"enforcement"`
	// From the command's cgroup (v2): its peak memory, whether the
	// kernel's OOM killer ended it at its memory limit, and how long its
	// CPU bandwidth limit held it back.
	MemoryPeak int64         `json:"memory_peak_bytes,omitempty"`
	OOMKilled  bool          `json:"oom_killed,omitempty"`
	Throttled  time.Duration `json:"cpu_throttled,omitempty"`
}

// account notes what the command's cgroup accounted.
func (r *Result) account(u cgroupUsage) {
	r.MemoryPeak, r.OOMKilled, r.Throttled = u.MemoryPeak, u.OOMKilled, u.Throttled
	if u.CPU > r.CPU {
		r.CPU = u.CPU // the cgroup counts every process of the command, reaped or not
	}
}

// Main takes over the process if it was started as the sandbox's helper or
// bridge (HelperArg, BridgeArg in argv[1]), and returns otherwise. Every
// binary that runs Run must call it first thing in main (and TestMain).
func Main() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case HelperArg:
		HelperMain()
	case BridgeArg:
		BridgeMain()
	case HarnessArg:
		HarnessMain()
	}
}
