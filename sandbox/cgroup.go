//go:build linux

package sandbox

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Process, memory and CPU limits.
//
// RLIMIT_NPROC counts every process of a uid, and every run's commands
// share one (sandbox_uid): a fork bomb in one run starves the others, and
// a command given a low limit cannot fork at all while other runs have
// processes. Where the kernel's pids controller is reachable (a root
// daemon with cgroup v1's pids hierarchy or cgroup v2's root, or a
// cgroup v2 subtree delegated to the daemon: a systemd unit's
// Delegate=yes, or the scope a daemon started from a session asks
// systemd for, cmd/paddockd/cgroupscope.go; the daemon moves itself into
// a leaf of it, <its cgroup>/daemon, as v2's no-internal-processes rule
// requires) each command gets a cgroup of its own, below one per run:
//
//	<pids>/paddock/<state dir hash>/<run>/pids.max            the exec ceiling
//	<pids>/paddock/<state dir hash>/<run>/harness/            the harness (or a per-exec helper)
//	<pids>/paddock/<state dir hash>/<run>/c-<n>/pids.max      the command's limit
//
// and RLIMIT_NPROC is lifted. With cgroup v2, where the memory and cpu
// controllers can be enabled too, the command's cgroup also has
// memory.max (its memory limit; memory.swap.max 0, memory.oom.group 1 so
// that an OOM ends the command whole), RLIMIT_AS is lifted, and cpu.max
// holds its CPU bandwidth (Limits.CPUs); its peak memory, OOM kill and
// throttled time are read back when it ends (Result). The command joins its cgroup itself between
// fork and exec, through a descriptor of cgroup.procs the daemon opened,
// so nothing it starts is ever counted elsewhere. Without the controller
// the rlimit stays, and the enforcement says the count is shared
// (Enforcement.ProcsScope).

// Scopes of the process limit, for Enforcement.ProcsScope.
const (
	ProcsPerCommand = "command"
	ProcsPerUID     = "uid"
)

// pidsHierarchy is where this daemon's cgroups live, or nil.
type pidsHierarchy struct {
	base string // <pids>/paddock/<hash of the pool's directory>
	v2   bool
	// mem, cpu and io say cgroup v2's memory, cpu and io controllers are
	// enabled for the commands' cgroups (v1: only the pids hierarchy is
	// used).
	mem, cpu, io bool
}

// cgroupRoot is this process's paddock cgroup: <its cgroup>/paddock.
type cgroupRoot struct {
	path         string
	v2           bool
	mem, cpu, io bool
	// why says, where there is none, what the limits fall back to and
	// why; also where v2's memory or cpu controller is missing.
	why string
}

var findPids = sync.OnceValue(func() cgroupRoot {
	mount, path, v2, err := pidsMount()
	if err != nil {
		return cgroupRoot{why: "no pids controller reachable (" + err.Error() + ")"}
	}
	own := filepath.Join(mount, path)
	if v2 && path != "/" {
		// cgroup v2 lets a cgroup with processes enable no controller for
		// its children: in a subtree delegated to us (a unit's
		// Delegate=yes, a scope asked of systemd), this process moves
		// into a leaf of its own first. Elsewhere the subtree is not ours.
		switch {
		case filepath.Base(own) == "daemon" && delegated(filepath.Dir(own)):
			// Already in the leaf: systemd put us there
			// (DelegateSubgroup=daemon), or a daemon before us did.
			own = filepath.Dir(own)
		case !delegated(own):
			return cgroupRoot{why: fmt.Sprintf("cgroup %s is not delegated to paddock (Delegate=yes in its systemd unit; docs/OPERATIONS.md)", path)}
		default:
			if err := intoLeaf(own); err != nil {
				return cgroupRoot{why: err.Error()}
			}
		}
	}
	root := filepath.Join(own, "paddock")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return cgroupRoot{why: "cannot make " + root + ": " + err.Error()}
	}
	r := cgroupRoot{path: root, v2: v2}
	if !v2 {
		return r
	}
	on := enable(own, "pids", "memory", "cpu", "io")
	on = enable(root, on...)
	if !slices.Contains(on, "pids") {
		return cgroupRoot{why: "cannot enable the pids controller below " + own}
	}
	r.mem, r.cpu, r.io = slices.Contains(on, "memory"), slices.Contains(on, "cpu"), slices.Contains(on, "io")
	switch {
	case !r.mem:
		r.why = "no memory controller below " + own + ": memory is bounded by RLIMIT_AS"
	case !swapBounded(root):
		// memory.max bounds memory in RAM alone: a command could swap
		// out past it.
		r.mem, r.why = false, "swap is on and the kernel does not account it per cgroup (no memory.swap.max): memory is bounded by RLIMIT_AS"
	}
	return r
})

// swapBounded says whether a command's memory.max bounds all the memory
// it holds: swap is accounted per cgroup (memory.swap.max, set to 0), or
// there is no swap at all.
func swapBounded(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
		return true
	}
	b, err := os.ReadFile("/proc/swaps")
	return err == nil && len(strings.Split(strings.TrimSpace(string(b)), "\n")) <= 1
}

// delegated says whether the cgroup dir was delegated to this process.
// systemd marks a delegated cgroup with the trusted.delegate (or, for a
// user's manager, user.delegate) attribute (systemd 251+). Before that,
// the mark of a delegation to an unprivileged user is ownership at a
// boundary: dir is this user's and its parent is not (a user's manager
// owns its whole subtree, so a scope inside it, a terminal's, is not a
// delegation).
func delegated(dir string) bool {
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		buf := make([]byte, 8)
		if n, err := unix.Getxattr(dir, attr, buf); err == nil && strings.TrimSpace(string(buf[:n])) == "1" {
			return true
		}
	}
	uid := os.Getuid()
	var st, parent unix.Stat_t
	return uid != 0 && unix.Stat(dir, &st) == nil && int(st.Uid) == uid &&
		unix.Stat(filepath.Dir(dir), &parent) == nil && int(parent.Uid) != uid &&
		unix.Access(filepath.Join(dir, "cgroup.procs"), unix.W_OK) == nil
}

// intoLeaf moves the processes of the delegated cgroup dir (this one, and
// any other its unit started) into dir/daemon, so that dir may enable
// controllers for its children.
func intoLeaf(dir string) error {
	leaf := filepath.Join(dir, "daemon")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cgroup: a leaf for the daemon: %w", err)
	}
	for range 3 { // a process may fork while we move them
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
		pids := strings.Fields(string(b))
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(pid), 0); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("cgroup: move process %s into %s: %w", pid, leaf, err)
			}
		}
	}
	return nil
}

// CgroupReport says which cgroup limits commands get here and, where one
// is missing, what it falls back to: for doctor and the daemon's start.
func CgroupReport() (detail string, full bool) {
	r := findPids()
	switch {
	case r.path == "":
		return "none: " + r.why + "; processes are counted per uid (RLIMIT_NPROC), memory bounded by RLIMIT_AS", false
	case !r.v2:
		return "cgroup v1: a pids cgroup per command at " + r.path + "; memory is bounded by RLIMIT_AS (cgroup v2 adds memory.max and cpu.max)", false
	}
	ctrls := []string{"pids.max"}
	if r.mem {
		ctrls = append(ctrls, "memory.max")
	}
	if r.cpu {
		ctrls = append(ctrls, "cpu.max")
	}
	d := "cgroup v2: a cgroup per run and per command at " + r.path + " with " + strings.Join(ctrls, ", ")
	if r.why != "" {
		d += "; " + r.why
	}
	return d, r.mem && r.cpu
}

// pidsMount finds the pids controller's mount and this process's cgroup in it.
func pidsMount() (mount, path string, v2 bool, err error) {
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", "", false, err
	}
	var v1Path, v2Path string
	for _, line := range strings.Split(string(cg), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			v2Path = f[2]
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "pids" {
				v1Path = f[2]
			}
		}
	}
	mi, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", false, err
	}
	defer mi.Close()
	var v2Mount string
	sc := bufio.NewScanner(mi)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 || pf[3] != "/" {
			continue
		}
		switch qf[0] {
		case "cgroup":
			for _, o := range strings.Split(qf[2], ",") {
				if o == "pids" && v1Path != "" {
					return unescapeMount(pf[4]), v1Path, false, nil
				}
			}
		case "cgroup2":
			if v2Mount == "" {
				v2Mount = unescapeMount(pf[4])
			}
		}
	}
	if v2Mount != "" && v2Path != "" {
		b, err := os.ReadFile(filepath.Join(v2Mount, v2Path, "cgroup.controllers"))
		if err == nil && slices.Contains(strings.Fields(string(b)), "pids") {
			return v2Mount, v2Path, true, nil
		}
	}
	return "", "", false, errors.New("no pids controller")
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// enable turns the controllers ctrls on for dir's children (v2), and
// returns those that are on.
func enable(dir string, ctrls ...string) []string {
	var on []string
	for _, c := range ctrls {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
		if err == nil && slices.Contains(strings.Fields(string(b)), c) ||
			os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0) == nil {
			on = append(on, c)
		}
	}
	return on
}

// pidsFor returns the hierarchy of a pool (or of per-exec runs) whose
// state lives in dir, or nil where there is none.
func pidsFor(dir string) *pidsHierarchy {
	r := findPids()
	if r.path == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(dir))
	h := &pidsHierarchy{base: filepath.Join(r.path, hex.EncodeToString(sum[:6])), v2: r.v2, mem: r.mem, cpu: r.cpu, io: r.io}
	if err := os.MkdirAll(h.base, 0o755); err != nil {
		return nil // not ours to write (another user's daemon made the root)
	}
	if unix.Access(h.base, unix.W_OK) != nil {
		// There already, made by another user (per-exec commands of every
		// daemon share one root: a root daemon's, while one of its
		// commands runs): its cgroups are not ours to make either.
		return nil
	}
	if r.v2 && !h.enable(h.base) {
		return nil
	}
	usedPids.Store(h.base, h)
	return h
}

// usedPids are the hierarchies this process has used, for SweepCgroups.
var usedPids sync.Map

// SweepCgroupsOf removes the pids cgroups that no process holds any more
// of the harnesses of Pool.Dir dir (and of per-exec commands).
func SweepCgroupsOf(dir string) {
	for _, d := range []string{dir, perExecCgroups} {
		if h := pidsFor(d); h != nil {
			h.sweep(func(string) bool { return false })
		}
	}
}

// SweepCgroups removes every pids cgroup this process made that no
// process holds any more. Tests call it last, whatever failed.
func SweepCgroups() {
	usedPids.Range(func(_, v any) bool {
		v.(*pidsHierarchy).sweep(func(string) bool { return false })
		return true
	})
}

func (p *pidsHierarchy) runDir(key string) string { return filepath.Join(p.base, key) }

// enable turns on, for dir's children, the controllers the commands' cgroups use.
func (p *pidsHierarchy) enable(dir string) bool {
	want := []string{"pids"}
	if p.mem {
		want = append(want, "memory")
	}
	if p.cpu {
		want = append(want, "cpu")
	}
	if p.io {
		want = append(want, "io")
	}
	return len(enable(dir, want...)) == len(want)
}

// prepareRun makes the run's cgroup, bounded by max, and its harness's.
func (p *pidsHierarchy) prepareRun(key string, max int) (harness string, err error) {
	if err := p.ensureRun(key, max); err != nil {
		return "", err
	}
	harness = filepath.Join(p.runDir(key), "harness")
	if err := os.Mkdir(harness, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("pids cgroup: %w", err)
	}
	return harness, nil
}

// ensureMu makes a run's cgroup whole (made, bounded, its controllers on)
// before another command of the run uses it.
var ensureMu sync.Mutex

// ensureRun makes the run's cgroup, bounded by max, if it has none (and
// the state directory's, its controllers on, if another process's last
// command took it along).
func (p *pidsHierarchy) ensureRun(key string, max int) error {
	ensureMu.Lock()
	defer ensureMu.Unlock()
	run := p.runDir(key)
	if _, err := os.Stat(run); err == nil {
		return nil
	}
	if _, err := os.Stat(p.base); err != nil {
		if err := os.MkdirAll(p.base, 0o755); err != nil {
			return fmt.Errorf("pids cgroup: %w", err)
		}
		if p.v2 && !p.enable(p.base) {
			return fmt.Errorf("cgroup: cannot enable the controllers for runs in %s", p.base)
		}
	}
	if err := os.MkdirAll(run, 0o755); err != nil {
		return fmt.Errorf("pids cgroup: %w", err)
	}
	err := setMax(run, max)
	if err == nil && p.v2 && !p.enable(run) {
		err = errors.New("cgroup: cannot enable the controllers for a run's commands")
	}
	if err != nil {
		unix.Rmdir(run) // half made: the next command makes it again
	}
	return err
}

// commandDir makes a command's cgroup, bounded by l (its processes; with
// cgroup v2, its memory and CPU bandwidth too), in the run's (made first,
// bounded by runMax, if the run has none). The run's cgroup, and the state
// directory's, are removed by whichever command ends last, in this process
// or another (per-exec commands of every daemon share one): where one
// vanishes between being made and being used, it is made again.
func (p *pidsHierarchy) commandDir(key string, l Limits, dev string, runMax int) (string, error) {
	return p.again(key, func() (string, error) { return p.makeCommandDir(key, l, dev, runMax) })
}

// enter makes a command's cgroup as commandDir does and moves process pid
// into it, made again where another process's sweep took the new, still
// empty, cgroup first.
func (p *pidsHierarchy) enter(key string, l Limits, dev string, runMax, pid int) (string, error) {
	return p.again(key, func() (string, error) {
		dir, err := p.makeCommandDir(key, l, dev, runMax)
		if err != nil {
			return "", err
		}
		if err := join(dir, pid); err != nil {
			unix.Rmdir(dir)
			return "", err
		}
		return dir, nil
	})
}

// makeCommandDir makes, once, a command's cgroup under the run's, with
// its limits.
func (p *pidsHierarchy) makeCommandDir(key string, l Limits, dev string, runMax int) (string, error) {
	if err := p.ensureRun(key, runMax); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(p.runDir(key), "c-")
	if err != nil {
		return "", fmt.Errorf("pids cgroup: %w", err)
	}
	if err := p.limit(dir, l, dev); err != nil {
		unix.Rmdir(dir)
		return "", err
	}
	return dir, nil
}

// again runs once until it succeeds or fails otherwise than by a race
// with a removal (the run's cgroup, or the new one, taken by another
// process's sweep: vanished), at most ten times.
func (p *pidsHierarchy) again(key string, once func() (string, error)) (string, error) {
	var err error
	for try := 0; try < 10; try++ {
		var dir string
		if dir, err = once(); err == nil {
			return dir, nil
		}
		if _, serr := os.Stat(p.runDir(key)); serr == nil && !vanished(err) {
			return "", err // not a race with a removal
		}
	}
	return "", err
}

// vanished says err came of a cgroup removed under us: its directory gone
// (ENOENT), or a file of it written after (ENODEV).
func vanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENODEV)
}

// limit writes a command's limits into its cgroup dir: pids.max, and with
// cgroup v2 memory.max (no swap beyond it, and an OOM kill takes the whole
// command: memory.oom.group), cpu.max, and io.max on the disk dev
// ("MAJ:MIN", "" where it is not known).
func (p *pidsHierarchy) limit(dir string, l Limits, dev string) error {
	if err := setMax(dir, l.Procs); err != nil {
		return err
	}
	var files [][2]string
	if l.MemoryCgroup {
		files = append(files, [2]string{"memory.max", strconv.FormatInt(l.Memory, 10)}, [2]string{"memory.oom.group", "1"})
		if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
			files = append(files, [2]string{"memory.swap.max", "0"})
		}
	}
	if p.cpu && l.CPUs > 0 {
		files = append(files, [2]string{"cpu.max", fmt.Sprintf("%d %d", int64(l.CPUs*cpuPeriod), cpuPeriod)})
	}
	if dev != "" && l.IOBps > 0 {
		files = append(files, [2]string{"io.max", fmt.Sprintf("%s rbps=%d wbps=%d", dev, l.IOBps, l.IOBps)})
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0); err != nil {
			return fmt.Errorf("cgroup: %s: %w", f[0], err)
		}
	}
	return nil
}

// cpuPeriod is cpu.max's period, in microseconds (the kernel's default).
const cpuPeriod = 100000

// held is l as a command gets it in a cgroup of p (nil: none): Memory in
// its cgroup where v2's memory controller is on (RLIMIT_AS is lifted
// then: a virtual reservation is not memory used), CPUs only where the
// cpu controller holds it, IOBps only where the io controller does and
// the workspace's disk dev is known.
func (p *pidsHierarchy) held(l Limits, dev string) Limits {
	l.MemoryCgroup = p != nil && p.mem && l.Memory > 0 && l.Memory < NoLimitBytes
	if p == nil || !p.cpu {
		l.CPUs = 0
	}
	if p == nil || !p.io || dev == "" {
		l.IOBps = 0
	}
	return l
}

// diskOf is the block device ("MAJ:MIN", the whole disk where path is on
// a partition) that holds a command's writes to its workspace, or "" where
// it is none (tmpfs, 9p, an overlay of those) or no I/O limit needs it.
func diskOf(spec *Spec) string {
	if spec.Limits.IOBps <= 0 {
		return "" // no I/O limit asked for: no stat on every command
	}
	path := spec.Workspace
	if spec.Overlay != nil {
		path = spec.Overlay.Upper
	}
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil || unix.Major(st.Dev) == 0 {
		return ""
	}
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		// The partition's directory is a link into its disk's.
		real, err := filepath.EvalSymlinks(sys)
		if err != nil {
			return ""
		}
		b, err := os.ReadFile(filepath.Join(filepath.Dir(real), "dev"))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	if _, err := os.Stat(sys); err != nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
}

// cgroupUsage is what a command's cgroup accounted when it ended (v2).
type cgroupUsage struct {
	MemoryPeak int64
	OOMKilled  bool
	Throttled  time.Duration
	CPU        time.Duration
}

// usage reads a command's accounting from its cgroup dir, before removal.
func (p *pidsHierarchy) usage(dir string) cgroupUsage {
	var u cgroupUsage
	if p == nil || !p.v2 {
		return u
	}
	if b, err := os.ReadFile(filepath.Join(dir, "memory.peak")); err == nil {
		u.MemoryPeak, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	kv := func(file string, f func(k string, v int64)) {
		b, _ := os.ReadFile(filepath.Join(dir, file))
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				f(k, n)
			}
		}
	}
	kv("memory.events", func(k string, v int64) {
		if (k == "oom_kill" || k == "oom_group_kill") && v > 0 {
			u.OOMKilled = true
		}
	})
	kv("cpu.stat", func(k string, v int64) {
		switch k {
		case "throttled_usec":
			u.Throttled = time.Duration(v) * time.Microsecond
		case "usage_usec":
			u.CPU = time.Duration(v) * time.Microsecond
		}
	})
	return u
}

// command is commandDir with its cgroup.procs opened, for the command to
// join itself between fork and exec (writing 0 moves the writer).
func (p *pidsHierarchy) command(key string, l Limits, dev string, runMax int) (dir string, procs *os.File, err error) {
	if dir, err = p.commandDir(key, l, dev, runMax); err != nil {
		return "", nil, err
	}
	procs, err = os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0)
	if err != nil {
		unix.Rmdir(dir)
		return "", nil, fmt.Errorf("pids cgroup: %w", err)
	}
	return dir, procs, nil
}

func setMax(dir string, max int) error {
	v := "max"
	if max > 0 {
		v = strconv.Itoa(max)
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(v), 0); err != nil {
		return fmt.Errorf("pids cgroup: %w", err)
	}
	return nil
}

// join moves process pid into the cgroup dir.
func join(dir string, pid int) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("pids cgroup: %w", err)
	}
	return nil
}

// removeCgroup removes dir once its processes are gone (they are being
// killed: it waits a little).
func removeCgroup(dir string) {
	for end := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) || !errors.Is(err, unix.EBUSY) || time.Now().After(end) {
			return
		}
	}
}

// removeCommand removes a command's cgroup once it is empty, and its run's
// and the state directory's while no other command or run holds them
// (those are tried once: another may be starting).
func (p *pidsHierarchy) removeCommand(dir string) {
	removeCgroup(dir)
	if unix.Rmdir(filepath.Dir(dir)) == nil {
		unix.Rmdir(p.base)
	}
}

// sweep removes the cgroups of runs that have no process left (a crashed
// daemon's, a harness that exited on its own), except keep's; it never
// waits for a busy one.
func (p *pidsHierarchy) sweep(keep func(key string) bool) {
	ents, _ := os.ReadDir(p.base)
	for _, e := range ents {
		if !e.IsDir() || keep(e.Name()) {
			continue
		}
		run := p.runDir(e.Name())
		sub, _ := os.ReadDir(run)
		for _, c := range sub {
			if c.IsDir() {
				unix.Rmdir(filepath.Join(run, c.Name()))
			}
		}
		unix.Rmdir(run)
	}
	unix.Rmdir(p.base)
}

// removeRun removes a run's cgroups (its commands', its harness's, its own).
func (p *pidsHierarchy) removeRun(key string) {
	run := p.runDir(key)
	ents, _ := os.ReadDir(run)
	for _, e := range ents {
		if e.IsDir() {
			removeCgroup(filepath.Join(run, e.Name()))
		}
	}
	removeCgroup(run)
	unix.Rmdir(p.base) // the last run of this state directory takes it along
}

// CgroupNeedsDelegation says whether this process sits in a cgroup v2
// that is neither the root nor delegated to it, and which: there it can
// make no cgroup for its commands, and a systemd scope of its own with
// Delegate=yes would give it one.
func CgroupNeedsDelegation() (need bool, cgroup string) {
	mount, path, v2, err := pidsMount()
	if err != nil || !v2 || path == "/" {
		return false, path
	}
	own := filepath.Join(mount, path)
	if filepath.Base(own) == "daemon" && delegated(filepath.Dir(own)) {
		return false, path
	}
	return !delegated(own), path
}
