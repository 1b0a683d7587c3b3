package paddock

import "time"

// CommandLimits bound one confined command. Zero fields take the sandbox's
// defaults.
type CommandLimits struct {
	Wall     time.Duration `json:"wall"`
	CPU      time.Duration `json:"cpu"`
	Procs    int           `json:"procs"`
	Memory   int64         `json:"memory"` // bytes: memory.max in a cgroup v2, else the address space (RLIMIT_AS)
	FileSize int64         `json:"file_size"`
	Output   int64         `json:"output"` // stdout and stderr each
	Tmp      int64         `json:"tmp"`    // size of /tmp
	// CPUs is CPU bandwidth, in CPUs (1.5: one and a half), where a cgroup
	// v2 cpu controller holds it (cpu.max); 0 is none.
	CPUs float64 `json:"cpus,omitempty"`
	// IOBps is the bytes a second the command may read and write each on
	// the disk its workspace is on, where a cgroup v2 io controller holds
	// it (io.max) and that disk is a block device; 0 is none.
	IOBps int64 `json:"io_bps,omitempty"`
	// MemoryCgroup says Memory bounded the command's memory in its cgroup
	// (memory.max, no swap, the whole command killed on OOM) rather than
	// its address space (RLIMIT_AS).
	MemoryCgroup bool `json:"memory_cgroup,omitempty"`
}

// Enforcement records what a confined command actually got. It is what the
// agent is told, and it must equal what was enforced (invariant 7).
type Enforcement struct {
	Namespaces []string `json:"namespaces"`
	UID        int      `json:"uid"`
	Landlock   int      `json:"landlock_abi"`
	Seccomp    bool     `json:"seccomp"`
	NoNewPrivs bool     `json:"no_new_privs"`
	Caps       string   `json:"capabilities"`
	Net        string   `json:"net"`
	Allow      []string `json:"allow,omitempty"`
	// AllowAddrs are the local or private addresses the operator lets an
	// allow-list's names reach; no other such address is ever reached.
	AllowAddrs []string `json:"allow_addrs,omitempty"`
	ReadOnly   bool     `json:"read_only"`
	// Scratch says a read-only workspace was shown to the command through
	// a writable layer of its own that evaporated when it ended.
	Scratch    bool     `json:"scratch_layer,omitempty"`
	ReadOnlyIn []string `json:"read_only_paths,omitempty"`
	// Unprotected names what the protected-path policy asks for that the
	// command's view does not enforce, with why: a pattern whose new
	// matches cannot be made read-only ahead (a wildcard above the last
	// name, or in the workspace's top directory), a path that is a
	// symbolic link.
	Unprotected []string      `json:"unprotected,omitempty"`
	Limits      CommandLimits `json:"limits"`
	// ProcsScope says what Limits.Procs counts: "command" (the command's
	// own processes, in a pids cgroup), or "uid" (RLIMIT_NPROC: every
	// process of the sandbox's uid, other runs' included).
	ProcsScope string `json:"procs_scope,omitempty"`
	// Disk says how the command's writes to the state disk were bounded.
	Disk     string   `json:"disk,omitempty"`
	Degraded []string `json:"degraded,omitempty"`
	// Mode is how the command was started: "resident" (forked from the
	// run's long-lived sandbox, its harness) or "per-exec" (a sandbox set
	// up for this command alone); ModeReason says why a run that could
	// have had a harness did not.
	Mode       string `json:"mode,omitempty"`
	ModeReason string `json:"mode_reason,omitempty"`
	// HarnessPID is the host pid of the harness the command was forked from.
	HarnessPID int `json:"harness_pid,omitempty"`
	// OwnNet says the command had a network namespace of its own, with
	// only its loopback, made from a harness that has a network (the
	// run's agent's): Net is then what the command got, none.
	OwnNet bool `json:"own_net,omitempty"`
	// Holds says, for each property of the confinement, which mechanisms
	// of this kernel held it for the command (docs/SECURITY.md, "What
	// holds each property").
	Holds []Hold `json:"holds,omitempty"`
}

// The properties a command's confinement holds, as Hold.Property names them.
const (
	PropWrites          = "writes"           // writes only to the workspace, its /tmp and writable binds
	PropReads           = "reads"            // reads only of the view
	PropNetwork         = "network"          // no network, or only the allow-list's proxy
	PropSignals         = "signals"          // no signal reaches a process outside the command's run
	PropAbstractSockets = "abstract-sockets" // no abstract unix socket outside the command's
	PropPrivileges      = "privileges"       // no new privileges (setuid, file capabilities), no capabilities
	PropSyscalls        = "syscalls"         // the system call filter
	PropProcesses       = "processes"        // the process count limit
	PropMemory          = "memory"           // the memory limit
	PropCPU             = "cpu"              // CPU time, and CPU bandwidth where a cgroup gives it
)

// The mechanisms that hold properties, as Hold.HeldBy names them.
const (
	MechLandlockFS    = "landlock-fs"    // Landlock's file system rights
	MechLandlockTCP   = "landlock-tcp"   // Landlock's TCP rights (ABI 4)
	MechLandlockScope = "landlock-scope" // Landlock's scopes (ABI 6)
	MechMountView     = "mount-view"     // a mount namespace whose root holds only the view, read-only but for the workspace, /tmp and writable binds
	MechUserNS        = "user-namespace"
	MechPIDNS         = "pid-namespace"
	MechNetNS         = "net-namespace"
	MechProxy         = "proxy" // the allow-list's proxy, the only way out of the network namespace
	MechNoNewPrivs    = "no-new-privs"
	MechCapsDropped   = "capabilities-dropped"
	MechSeccomp       = "seccomp"
	MechPidsCgroup    = "pids-cgroup"
	MechRlimitNproc   = "rlimit-nproc"
	MechMemoryCgroup  = "memory-cgroup"
	MechRlimitAS      = "rlimit-as"
	MechCPUCgroup     = "cpu-cgroup"
	MechRlimitCPU     = "rlimit-cpu"
)

// Hold is one property of a command's confinement and the mechanisms that
// held it. HeldBy empty means nothing held it: Note says why (the run asked
// for the host's network, or it ran degraded).
type Hold struct {
	Property string   `json:"property"`
	HeldBy   []string `json:"held_by"`
	Note     string   `json:"note,omitempty"`
}

// ExecResult is how a confined command ended: its status, resource use,
// output (masked) and exactly what confinement it got.
type ExecResult struct {
	ExitCode   int     `json:"exit_code"`
	Signal     string  `json:"signal,omitempty"`
	TimedOut   bool    `json:"timed_out,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	CPUMS      float64 `json:"cpu_ms"`
	MaxRSS     int64   `json:"max_rss_bytes"`
	// MemoryPeak and CPUThrottledMS are the command's cgroup's (v2): the
	// most memory all its processes held at once, and how long its CPU
	// bandwidth limit (cpus) held it back.
	MemoryPeak     int64   `json:"memory_peak_bytes,omitempty"`
	CPUThrottledMS float64 `json:"cpu_throttled_ms,omitempty"`
	Stdout         string  `json:"stdout"`
	Stderr         string  `json:"stderr"`
	OutputEncoding string  `json:"output_encoding"` // utf-8, or base64 when the output is not text
	Truncated      bool    `json:"truncated,omitempty"`
	// Killed says why paddock killed the command before it ended (its
	// run's disk quota, the state disk's reserve).
	Killed      string      `json:"killed,omitempty"`
	Denied      []string    `json:"denied,omitempty"`
	Enforcement Enforcement `json:"enforcement"`
}
