package vmtest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A frozen guest: its console silent for minutes, though the script's
// heartbeat (runScript) prints every heartbeatEvery while the guest's
// kernel schedules anything at all. A guest frozen with its interrupts off
// never reports a soft lockup; a 6.1 guest fell silent in CI for eight
// minutes, two minutes into its tests, and only the boot's timeout ended
// it. The harness then asks qemu where each CPU is (its monitor's
// registers and the words on each CPU's stack, named with the symbols the
// guest's init wrote as it booted: the same boot's /proc/kallsyms, which
// holds its addresses as randomised) and gives the boot up as it does a
// hung one, to be booted again. The silence counts from the script's
// start.

// heartbeatEvery is how often the guest's script says it is alive; it is
// spelled in runScript's sleep.
const heartbeatEvery = 30 * time.Second

// frozenAfter is how long a guest's console may stay silent before the
// boot is given up: six heartbeats. A guest starved by a loaded host for
// a minute still prints within it; a hung test still lets the heartbeat
// print, and its binary's own timeout (six minutes) prints its stacks.
const frozenAfter = 6 * heartbeatEvery

// monitor is qemu's human monitor on a unix socket.
type monitor string

var promptRe = regexp.MustCompile(`\(qemu\) ?$`)

// commands sends each command in turn and returns what each printed. A
// monitor that does not answer (qemu itself stuck) fails at ctx's end.
func (m monitor) commands(ctx context.Context, cmds ...string) ([]string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", string(m))
	if err != nil {
		return nil, fmt.Errorf("qemu's monitor: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	r := bufio.NewReader(conn)
	// untilPrompt reads up to the next prompt: the monitor's answer.
	untilPrompt := func() (string, error) {
		var b strings.Builder
		for {
			c, err := r.ReadByte()
			if err != nil {
				return b.String(), fmt.Errorf("qemu's monitor: %w", err)
			}
			b.WriteByte(c)
			if c == ' ' && promptRe.MatchString(b.String()) {
				return b.String(), nil
			}
		}
	}
	if _, err := untilPrompt(); err != nil { // the banner
		return nil, err
	}
	var outs []string
	for _, c := range cmds {
		if _, err := fmt.Fprintf(conn, "%s\n", c); err != nil {
			return outs, fmt.Errorf("qemu's monitor: %w", err)
		}
		out, err := untilPrompt()
		if err != nil {
			return outs, err
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// symbols names kernel text addresses from a System.map or a copy of
// /proc/kallsyms.
type symbols struct {
	addrs      []uint64
	names      []string
	start, end uint64 // _stext, _etext
}

func loadSymbols(path string) (*symbols, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := &symbols{}
	type sym struct {
		addr uint64
		name string
	}
	var syms []sym
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		addr, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			continue
		}
		switch f[2] {
		case "_stext":
			s.start = addr
		case "_etext":
			s.end = addr
		}
		if strings.ContainsAny(f[1], "TtWw") {
			syms = append(syms, sym{addr, f[2]})
		}
	}
	if s.start == 0 || s.end <= s.start || len(syms) == 0 {
		return nil, fmt.Errorf("%s: no kernel text", path)
	}
	sort.SliceStable(syms, func(i, j int) bool { return syms[i].addr < syms[j].addr })
	for _, y := range syms {
		s.addrs = append(s.addrs, y.addr)
		s.names = append(s.names, y.name)
	}
	return s, nil
}

// name is addr as function+0xoffset, or "" outside the kernel's text.
func (s *symbols) name(addr uint64) string {
	if addr < s.start || addr >= s.end {
		return ""
	}
	i := sort.Search(len(s.addrs), func(i int) bool { return s.addrs[i] > addr }) - 1
	if i < 0 {
		return ""
	}
	return fmt.Sprintf("%s+0x%x", s.names[i], addr-s.addrs[i])
}

var (
	ripRe  = regexp.MustCompile(`RIP=([0-9a-f]{16})`)
	rspRe  = regexp.MustCompile(`RSP=([0-9a-f]{16})`)
	wordRe = regexp.MustCompile(`0x([0-9a-f]{16})`)
)

// stackWords is how many of the words at a CPU's stack pointer are named:
// the kernel's own "?" entries, a trace without frame pointers.
const stackWords = 96

// cpuPlaces asks the monitor where each of n CPUs is: the function at its
// RIP and the kernel functions whose addresses are on its stack, innermost
// first. It returns one line per CPU for the log and the RIPs' names.
func cpuPlaces(ctx context.Context, mon monitor, syms *symbols, n int) (log []string, rips []string, err error) {
	for cpu := range n {
		outs, err := mon.commands(ctx, fmt.Sprintf("cpu %d", cpu), "info registers")
		if err != nil {
			return log, rips, err
		}
		regs := outs[1]
		rip, rsp := ripRe.FindStringSubmatch(regs), rspRe.FindStringSubmatch(regs)
		if rip == nil || rsp == nil {
			return log, rips, fmt.Errorf("CPU#%d: no RIP or RSP in the monitor's answer %q", cpu, regs)
		}
		addr, _ := strconv.ParseUint(rip[1], 16, 64)
		at := syms.name(addr)
		if at == "" {
			at = "0x" + rip[1] + " (outside the kernel's own text: a module's, or user space)"
		}
		rips = append(rips, fmt.Sprintf("CPU#%d in %s", cpu, strings.Fields(at)[0]))
		outs, err = mon.commands(ctx, fmt.Sprintf("cpu %d", cpu), fmt.Sprintf("x /%dgx 0x%s", stackWords, rsp[1]))
		if err != nil {
			return log, rips, err
		}
		var stack []string
		for _, m := range wordRe.FindAllStringSubmatch(outs[1], -1) {
			w, _ := strconv.ParseUint(m[1], 16, 64)
			if n := syms.name(w); n != "" {
				stack = append(stack, n)
			}
		}
		log = append(log, fmt.Sprintf("CPU#%d: RIP %s (%s), RSP %s; kernel text on its stack: %s",
			cpu, rip[1], at, rsp[1], strings.Join(stack, " < ")))
	}
	return log, rips, nil
}

// frozen is called when a boot's console has been silent for quiet: it
// logs where the guest's CPUs are, named with the symbols in kallsyms (the
// guest's copy), and returns the hang's report and the places of its CPUs
// for the summary.
func frozen(ctx context.Context, t *testing.T, mon monitor, kallsyms string, quiet time.Duration) (report, where string) {
	report = fmt.Sprintf("console silent for %v", quiet.Round(time.Second))
	syms, err := loadSymbols(kallsyms)
	if err != nil {
		t.Logf("the guest is frozen (%s); its CPUs are not named: %v", report, err)
		return report, ""
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	log, rips, err := cpuPlaces(ctx, mon, syms, guestCPUs)
	for _, l := range log {
		t.Logf("the frozen guest's %s", l)
	}
	if err != nil {
		t.Logf("the guest is frozen (%s); asking qemu where its CPUs are: %v", report, err)
	}
	return report, strings.Join(rips, ", ")
}

// TestFrozenGuestIsCaught boots a guest whose script silences its
// heartbeat and prints nothing more: the boot is given up after the
// silence, not at its timeout, and its CPUs are named.
func TestFrozenGuestIsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM under emulation")
	}
	if os.Getuid() != 0 {
		t.Skip("needs root: the guest shows the host's root file system over 9p")
	}
	k, err := findKernel("6.1")
	if err != nil {
		need(t, "%v", err)
	}
	b := &boot{kernel: k, timeout: 5 * time.Minute, silence: 20 * time.Second,
		script: `kill "$PADDOCK_VM_HEARTBEAT"; echo "paddock-vm: silent from now on"; sleep 3600`}
	start := time.Now()
	r := b.run(t)
	if r.code != -1 || !guestFailed(r) {
		t.Fatalf("a silent guest ended with code %d, hung %q: not given up as frozen", r.code, r.hung)
	}
	if !strings.Contains(r.output, "silent from now on") {
		t.Fatal("the script did not run")
	}
	if took := time.Since(start); took >= b.timeout {
		t.Fatalf("given up after %v: at the timeout, not after the silence", took)
	}
	sum := failureSummary(r)
	t.Logf("summary: %s", sum)
	if !regexp.MustCompile(`^hung \("console silent for \d+s"\) in CPU#0 in [A-Za-z_][A-Za-z0-9_.]*\+0x[0-9a-f]+, CPU#1 in `).MatchString(sum) {
		t.Fatalf("summary %q does not name the CPUs' functions", sum)
	}
}
