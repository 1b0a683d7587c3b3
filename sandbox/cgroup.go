//go:build linux

package sandbox

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Process limits.
//
// RLIMIT_NPROC counts every process of a uid, and every run's commands
// share one (sandbox_uid): a fork bomb in one run starves the others, and
// a command given a low limit cannot fork at all while other runs have
// processes. Where the kernel's pids controller is reachable (a root
// daemon with cgroup v1's pids hierarchy or cgroup v2's root, or a
// delegated v2 subtree whose parent already enables pids) each command
// gets a cgroup of its own, below one per run:
//
//	<pids>/paddock/<state dir hash>/<run>/pids.max            the exec ceiling
//	<pids>/paddock/<state dir hash>/<run>/harness/            the harness (or a per-exec helper)
//	<pids>/paddock/<state dir hash>/<run>/c-<n>/pids.max      the command's limit
//
// and RLIMIT_NPROC is lifted. The command joins its cgroup itself between
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
}

var findPids = sync.OnceValues(func() (string, bool) {
	mount, path, v2, err := pidsMount()
	if err != nil {
		return "", false
	}
	root := filepath.Join(mount, path, "paddock")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", false
	}
	if v2 && !enablePids(filepath.Dir(root)) {
		return "", false
	}
	if v2 && !enablePids(root) {
		return "", false
	}
	return root, v2
})

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

// enablePids turns the pids controller on for dir's children (v2).
func enablePids(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err == nil && slices.Contains(strings.Fields(string(b)), "pids") {
		return true
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+pids"), 0) == nil
}

// pidsFor returns the hierarchy of a pool (or of per-exec runs) whose
// state lives in dir, or nil where there is none.
func pidsFor(dir string) *pidsHierarchy {
	root, v2 := findPids()
	if root == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(dir))
	h := &pidsHierarchy{base: filepath.Join(root, hex.EncodeToString(sum[:6])), v2: v2}
	if err := os.MkdirAll(h.base, 0o755); err != nil {
		return nil // not ours to write (another user's daemon made the root)
	}
	if v2 && !enablePids(h.base) {
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

// ensureRun makes the run's cgroup, bounded by max, if it has none.
func (p *pidsHierarchy) ensureRun(key string, max int) error {
	run := p.runDir(key)
	if _, err := os.Stat(run); err == nil {
		return nil
	}
	if err := os.MkdirAll(run, 0o755); err != nil {
		return fmt.Errorf("pids cgroup: %w", err)
	}
	if err := setMax(run, max); err != nil {
		return err
	}
	if p.v2 && !enablePids(run) {
		return errors.New("pids cgroup: cannot enable the controller for a run's commands")
	}
	return nil
}

// commandDir makes a command's cgroup, bounded by max, in the run's
// (made first, bounded by runMax, if the run has none).
func (p *pidsHierarchy) commandDir(key string, max, runMax int) (string, error) {
	if err := p.ensureRun(key, runMax); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(p.runDir(key), "c-")
	if err != nil {
		return "", fmt.Errorf("pids cgroup: %w", err)
	}
	if err := setMax(dir, max); err != nil {
		unix.Rmdir(dir)
		return "", err
	}
	return dir, nil
}

// command is commandDir with its cgroup.procs opened, for the command to
// join itself between fork and exec (writing 0 moves the writer).
func (p *pidsHierarchy) command(key string, max, runMax int) (dir string, procs *os.File, err error) {
	if dir, err = p.commandDir(key, max, runMax); err != nil {
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
