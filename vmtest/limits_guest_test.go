package vmtest

// The limits and the record of what held each property, inside each guest
// kernel: a memory hog over memory.max killed and recorded, a fork bomb held
// by pids.max, cpu.max throttling measured, and how a daemon gets a cgroup
// subtree (systemd's delegation, a scope asked for, or none and the
// fallback said plainly). TestKernels runs them with guest_test.go's.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// limitsConf is paddock.toml with the limits under test.
const limitsConf = `sandbox_uid = 65534
[exec_limits]
memory = "64MiB"
procs = 64
cpus = 0.5
`

// limitsSetup is guestProject with the limits under test.
func limitsSetup(t *testing.T) (repo, home, base string) {
	t.Helper()
	return guestProject(t, limitsConf)
}

// waitDaemon waits for home's daemon to answer and returns its doctor report.
func waitDaemon(t *testing.T, c cli) doctorReport {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(c.home, "paddock.sock")); err == nil {
			if _, err := c.run("version"); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not answer in 90s")
		}
	}
	var rep doctorReport
	out, _ := c.run("doctor", "--json") // a warning is no failure here
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json: %v", err)
	}
	return rep
}

type doctorReport struct {
	Process struct {
		Role string `json:"role"`
		PID  int    `json:"pid"`
	} `json:"process"`
	Checks []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		Detail string `json:"detail"`
	} `json:"checks"`
	Holds []hold `json:"holds"`
}

type hold struct {
	Property string   `json:"property"`
	HeldBy   []string `json:"held_by"`
	Note     string   `json:"note"`
}

func (r doctorReport) check(name string) (status, detail string) {
	for _, c := range r.Checks {
		if c.Name == name {
			return c.Status, c.Detail
		}
	}
	return "", ""
}

func heldBy(holds []hold, property string) []string {
	for _, h := range holds {
		if h.Property == property {
			return h.HeldBy
		}
	}
	return nil
}

// execResult is what paddock exec --json answers.
type execResult struct {
	ExitCode       int     `json:"exit_code"`
	TimedOut       bool    `json:"timed_out"`
	Killed         string  `json:"killed"`
	DurationMS     float64 `json:"duration_ms"`
	CPUMS          float64 `json:"cpu_ms"`
	MemoryPeak     int64   `json:"memory_peak_bytes"`
	CPUThrottledMS float64 `json:"cpu_throttled_ms"`
	Stdout         string  `json:"stdout"`
	Stderr         string  `json:"stderr"`
	Enforcement    struct {
		Landlock int `json:"landlock_abi"`
		Limits   struct {
			Memory       int64   `json:"memory"`
			CPUs         float64 `json:"cpus"`
			MemoryCgroup bool    `json:"memory_cgroup"`
		} `json:"limits"`
		ProcsScope string `json:"procs_scope"`
		Holds      []hold `json:"holds"`
	} `json:"enforcement"`
}

// exec runs argv in the run and decodes the answer; a command that fails is
// no error here.
func (c cli) exec(t *testing.T, run string, args ...string) execResult {
	t.Helper()
	out, _ := c.run(append([]string{"exec", run, "--json"}, args...)...)
	var res execResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("exec %v: decoding its answer: %v", args, err)
	}
	return res
}

// cgroupOf is the cgroup v2 path of process pid.
func cgroupOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return ""
}

// TestGuestLimits: under cgroup v2 a command's memory, processes and CPU
// bandwidth are its cgroup's, each exec says so, and what its cgroup
// accounted comes back in the answer.
func TestGuestLimits(t *testing.T) {
	bin := guest(t)
	repo, home, _ := limitsSetup(t)
	startDaemon(t, bin, home)
	c := cli{t: t, bin: bin, home: home}
	rep := waitDaemon(t, c)
	status, detail := rep.check("cgroup limits")
	t.Logf("kernel %s, daemon pid %d in cgroup %s; cgroup limits: %s %s", kernelRelease(), rep.Process.PID, cgroupOf(rep.Process.PID), status, detail)
	if status != "ok" || !strings.Contains(detail, "memory.max") || !strings.Contains(detail, "cpu.max") {
		t.Fatalf("the daemon has no cgroup v2 with memory and cpu here: %s %s", status, detail)
	}
	if underSystemd() && !strings.HasSuffix(cgroupOf(rep.Process.PID), "/daemon") {
		t.Errorf("a daemon in a delegated unit did not move into a leaf of it: %s", cgroupOf(rep.Process.PID))
	}
	c.must(nil, "project", "add", repo, "--name", "vm")
	var run struct {
		ID string `json:"id"`
	}
	c.must(&run, "create", "--project", "vm", "--json")

	// A memory hog over memory.max: killed by the kernel, whole, and said.
	hog := c.exec(t, run.ID, "--", "python3", "-c", "b = bytearray(256 << 20); print(len(b))")
	t.Logf("memory hog: exit %d, killed %q, peak %d, holds memory %v", hog.ExitCode, hog.Killed, hog.MemoryPeak, heldBy(hog.Enforcement.Holds, "memory"))
	if hog.ExitCode == 0 || !strings.Contains(hog.Killed, "memory limit") {
		t.Errorf("a command over memory.max was not killed and recorded: exit %d, killed %q, stderr %s", hog.ExitCode, hog.Killed, hog.Stderr)
	}
	if !hog.Enforcement.Limits.MemoryCgroup || hog.Enforcement.Limits.Memory != 64<<20 ||
		!slices.Equal(heldBy(hog.Enforcement.Holds, "memory"), []string{"memory-cgroup"}) {
		t.Errorf("the record does not say memory.max held the memory: %+v", hog.Enforcement)
	}
	if hog.MemoryPeak < 32<<20 || hog.MemoryPeak > 80<<20 {
		t.Errorf("peak memory %d: want about the 64 MiB limit", hog.MemoryPeak)
	}
	// Under the limit, the same program works (the address space is not
	// what is bounded: a Python start reserves more than it uses).
	if ok := c.exec(t, run.ID, "--", "python3", "-c", "b = bytearray(16 << 20); print(len(b))"); ok.ExitCode != 0 {
		t.Errorf("16 MiB under a 64 MiB memory.max: exit %d %s", ok.ExitCode, ok.Stderr)
	}

	// A fork bomb: held by pids.max, ended at its time limit, and the
	// machine and the daemon go on.
	bomb := c.exec(t, run.ID, "--timeout", "10s", "--", "bash", "-c", ":(){ :|:& };:; sleep 3")
	t.Logf("fork bomb: exit %d, timed out %v, killed %q, procs scope %s", bomb.ExitCode, bomb.TimedOut, bomb.Killed, bomb.Enforcement.ProcsScope)
	if !strings.Contains(bomb.Stderr, "fork") {
		t.Errorf("the fork bomb never hit its process limit: %q", bomb.Stderr)
	}
	if bomb.Enforcement.ProcsScope != "command" || !slices.Equal(heldBy(bomb.Enforcement.Holds, "processes"), []string{"pids-cgroup"}) {
		t.Errorf("the fork bomb's processes were not a pids cgroup's: %+v", bomb.Enforcement)
	}
	if n := countProcesses(); n > 400 {
		t.Errorf("%d processes on the machine after the fork bomb", n)
	}
	if alive := c.exec(t, run.ID, "--", "echo", "alive"); alive.ExitCode != 0 || strings.TrimSpace(alive.Stdout) != "alive" {
		t.Errorf("after the fork bomb: exit %d %q", alive.ExitCode, alive.Stdout)
	}

	// cpu.max: a busy loop for 2 s of wall time gets about half a CPU.
	busy := c.exec(t, run.ID, "--", "timeout", "2", "sh", "-c", "while :; do :; done")
	t.Logf("busy loop at cpus=0.5: wall %.0f ms, cpu %.0f ms, throttled %.0f ms", busy.DurationMS, busy.CPUMS, busy.CPUThrottledMS)
	if busy.Enforcement.Limits.CPUs != 0.5 || !slices.Contains(heldBy(busy.Enforcement.Holds, "cpu"), "cpu-cgroup") {
		t.Errorf("the record does not say cpu.max held the bandwidth: %+v", busy.Enforcement)
	}
	if busy.CPUThrottledMS <= 0 || busy.CPUMS > 0.8*busy.DurationMS {
		t.Errorf("cpu.max did not throttle: cpu %.0f ms of %.0f ms wall, throttled %.0f ms", busy.CPUMS, busy.DurationMS, busy.CPUThrottledMS)
	}
}

func countProcesses() int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if e.Name()[0] >= '0' && e.Name()[0] <= '9' {
			n++
		}
	}
	return n
}

// TestGuestUndelegated: a daemon started in a cgroup nobody delegated to it
// asks systemd for a delegated scope of its own where systemd runs, and
// otherwise says which limits fall back, and its commands' records say
// what held them instead.
func TestGuestUndelegated(t *testing.T) {
	bin := guest(t)
	_, home, _ := limitsSetup(t)
	var cmd *exec.Cmd
	if underSystemd() {
		// A scope without Delegate=yes, as a terminal's session is.
		cmd = exec.Command("systemd-run", "--scope", "--quiet", "--collect", "--", filepath.Join(bin, "paddockd"), "serve", "--home", home)
	} else {
		// A cgroup of its own that is not delegated (root's, no mark).
		cg := filepath.Join("/sys/fs/cgroup", fmt.Sprintf("undelegated-%d", os.Getpid()))
		if err := os.Mkdir(cg, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for end := time.Now().Add(10 * time.Second); syscall.Rmdir(cg) != nil && time.Now().Before(end); {
				time.Sleep(100 * time.Millisecond)
			}
		})
		fd, err := syscall.Open(cg, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		cmd = exec.Command(filepath.Join(bin, "paddockd"), "serve", "--home", home)
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	}
	runDaemon(t, cmd, home)
	c := cli{t: t, bin: bin, home: home}
	rep := waitDaemon(t, c)
	status, detail := rep.check("cgroup limits")
	where := cgroupOf(rep.Process.PID)
	t.Logf("daemon pid %d (started as %d) in %s; cgroup limits: %s %s", rep.Process.PID, cmd.Process.Pid, where, status, detail)
	if underSystemd() {
		if status != "ok" || !strings.Contains(where, ".scope/daemon") || rep.Process.PID != cmd.Process.Pid {
			t.Fatalf("the daemon did not get a delegated scope of its own, same pid: %s, %s %s", where, status, detail)
		}
		return
	}
	if status != "warn" || !strings.Contains(detail, "RLIMIT_AS") || !strings.Contains(detail, "not delegated") {
		t.Fatalf("the fallback is not said plainly: %s %s", status, detail)
	}
	c.must(nil, "project", "add", filepath.Join(filepath.Dir(home), "repo"), "--name", "vm")
	var run struct {
		ID string `json:"id"`
	}
	c.must(&run, "create", "--project", "vm", "--json")
	res := c.exec(t, run.ID, "--", "true")
	if got := heldBy(res.Enforcement.Holds, "memory"); !slices.Equal(got, []string{"rlimit-as"}) || res.Enforcement.Limits.MemoryCgroup {
		t.Errorf("without a cgroup the record says memory was held by %v (memory_cgroup %v)", got, res.Enforcement.Limits.MemoryCgroup)
	}
	if got := heldBy(res.Enforcement.Holds, "processes"); !slices.Equal(got, []string{"rlimit-nproc"}) {
		t.Errorf("without a cgroup the record says processes were held by %v", got)
	}
}

// TestGuestHolds: the record names what held each property on this kernel:
// Landlock where it is (with its ABI), the view and the namespaces always.
func TestGuestHolds(t *testing.T) {
	bin := guest(t)
	repo, home, _ := limitsSetup(t)
	startDaemon(t, bin, home)
	c := cli{t: t, bin: bin, home: home}
	waitDaemon(t, c)
	c.must(nil, "project", "add", repo, "--name", "vm")
	var run struct {
		ID string `json:"id"`
	}
	c.must(&run, "create", "--project", "vm", "--json")
	res := c.exec(t, run.ID, "--", "true")
	abi := landlockABI()
	var table strings.Builder
	for _, h := range res.Enforcement.Holds {
		fmt.Fprintf(&table, "\n  %-18s %s %s", h.Property, strings.Join(h.HeldBy, ", "), h.Note)
	}
	t.Logf("HOLDS kernel %s, Landlock ABI %d (recorded %d):%s", kernelRelease(), abi, res.Enforcement.Landlock, table.String())
	if res.Enforcement.Landlock != min(abi, 6) {
		t.Errorf("recorded Landlock ABI %d, the kernel offers %d", res.Enforcement.Landlock, abi)
	}
	for _, p := range []string{"writes", "reads"} {
		if by := heldBy(res.Enforcement.Holds, p); !slices.Contains(by, "mount-view") || slices.Contains(by, "landlock-fs") != (abi > 0) {
			t.Errorf("%s held by %v with Landlock ABI %d", p, by, abi)
		}
	}
	if by := heldBy(res.Enforcement.Holds, "signals"); !slices.Contains(by, "pid-namespace") || slices.Contains(by, "landlock-scope") != (abi >= 6) {
		t.Errorf("signals held by %v with Landlock ABI %d", by, abi)
	}
}

// landlockABI asks the kernel for its Landlock ABI (0: none).
func landlockABI() int {
	r, _, errno := syscall.Syscall(444, 0, 0, 1) // landlock_create_ruleset(NULL, 0, VERSION)
	if errno != 0 {
		return 0
	}
	return int(r)
}
