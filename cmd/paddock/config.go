package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/paddock-dev/paddock"
)

// config is paddock.toml. listen, log_level and log_format also have a flag
// of `paddock serve` that overrides them; the rest are set here only.
type config struct {
	// Listen is an optional loopback TCP address, such as "127.0.0.1:7070".
	Listen string `toml:"listen"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `toml:"log_level"`
	// LogFormat is text or json.
	LogFormat string `toml:"log_format"`
	// DefaultKind is the workspace kind of `paddock create` without --kind.
	DefaultKind string `toml:"default_kind"`
	// SandboxUID is the host uid commands run as when the daemon runs as
	// root (default 65534, nobody); otherwise commands run as the daemon's uid.
	SandboxUID int `toml:"sandbox_uid"`
	// SandboxMode is resident (the default: each active run keeps one
	// long-lived sandbox, its harness, and every command is forked from it)
	// or per-exec (a sandbox is set up for each command).
	SandboxMode string `toml:"sandbox_mode"`
	// HarnessIdle gives a run's harness back after this long without a
	// command (default 5m); HarnessOrphan is how long a harness waits for a
	// restarted daemon to re-attach before it exits (default 10m).
	HarnessIdle   string `toml:"harness_idle"`
	HarnessOrphan string `toml:"harness_orphan"`
	// ApplyName and ApplyEmail author the commits paddock apply makes (the
	// human who approves, not the agent).
	ApplyName  string `toml:"apply_name"`
	ApplyEmail string `toml:"apply_email"`
	// ChangeSetMaxEntries, ChangeSetMaxFile and ChangeSetMaxTotal bound a
	// change set: paths changed (default 20000), bytes of one new or
	// changed file and of all new content together ("100MiB", "256MiB";
	// bytes, or with a KiB, MiB or GiB suffix). A change set over them is
	// refused before it is rendered, naming the file and the limit.
	ChangeSetMaxEntries int    `toml:"changeset_max_entries"`
	ChangeSetMaxFile    string `toml:"changeset_max_file"`
	ChangeSetMaxTotal   string `toml:"changeset_max_total"`
	// DiskQuota bounds what an overlay run writes (default "10GiB"), and
	// DiskReserve is what the state disk keeps free from every run's
	// commands (default the smaller of 1GiB and 5% of it); a command past
	// either is killed.
	DiskQuota   string `toml:"disk_quota"`
	DiskReserve string `toml:"disk_reserve"`
	// ExecLimits is the most any command gets, and what it gets unless
	// its request asks for less: an agent (or an operator's request) may
	// only lower a limit. Unset keys keep the sandbox's defaults.
	ExecLimits execLimits `toml:"exec_limits"`
	// NetAllowAddresses are local or private addresses ("10.0.0.5",
	// "192.168.1.0/24") that names on a run's network allow-list may
	// resolve to; without them the proxy never reaches a loopback,
	// private, link-local or reserved address.
	NetAllowAddresses []string `toml:"net_allow_addresses"`
}

// netAllowAddrs parses net_allow_addresses (checked by check).
func (c config) netAllowAddrs() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range c.NetAllowAddresses {
		pf, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("net_allow_addresses: %q is not an address or a prefix such as 10.0.0.0/24", s)
			}
			pf = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, pf.Masked())
	}
	return out, nil
}

// execLimits is the [exec_limits] table of paddock.toml.
type execLimits struct {
	Wall     string `toml:"wall"`      // wall time, such as "10m"
	CPU      string `toml:"cpu"`       // CPU time, such as "10m"
	Procs    int    `toml:"procs"`     // processes
	Memory   string `toml:"memory"`    // address space, such as "8GiB"
	FileSize string `toml:"file_size"` // largest file written
	Output   string `toml:"output"`    // bytes of stdout and of stderr passed on
	Tmp      string `toml:"tmp"`       // size of /tmp
}

// maxOutput bounds exec_limits.output: a command's answer (not its stream)
// holds that much of each stream in memory.
const maxOutput = 64 << 20

// limits turns the table into the manager's ceiling (checked by check).
func (e execLimits) limits() paddock.CommandLimits {
	var l paddock.CommandLimits
	l.Wall, l.CPU = duration(e.Wall), duration(e.CPU)
	l.Procs = e.Procs
	l.Memory, _ = parseSize(e.Memory)
	l.FileSize, _ = parseSize(e.FileSize)
	l.Output, _ = parseSize(e.Output)
	l.Tmp, _ = parseSize(e.Tmp)
	return l
}

func (e execLimits) check() error {
	for k, v := range map[string]string{"wall": e.Wall, "cpu": e.CPU} {
		if v == "" {
			continue
		}
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			return fmt.Errorf("exec_limits.%s %q: want a duration such as 10m", k, v)
		}
	}
	if e.Procs < 0 {
		return fmt.Errorf("exec_limits.procs %d: want a positive number", e.Procs)
	}
	for k, v := range map[string]string{"memory": e.Memory, "file_size": e.FileSize, "output": e.Output, "tmp": e.Tmp} {
		if _, err := parseSize(v); err != nil {
			return fmt.Errorf("exec_limits.%s: %w", k, err)
		}
	}
	if n, _ := parseSize(e.Output); n > maxOutput {
		return fmt.Errorf("exec_limits.output %q: at most 64MiB (a command's answer holds it in memory; stream larger output)", e.Output)
	}
	return nil
}

// loadConfig reads path, or <home>/paddock.toml when path is empty. A missing
// default file is no error; a missing explicit one is.
func loadConfig(home, path string) (config, error) {
	c := config{LogLevel: "info", LogFormat: "text"}
	explicit := path != ""
	if !explicit {
		path = filepath.Join(home, "paddock.toml")
	}
	md, err := toml.DecodeFile(path, &c)
	if err != nil {
		if !explicit && errors.Is(err, fs.ErrNotExist) {
			return c, nil
		}
		return c, usageError{fmt.Sprintf("config %s: %v", path, err)}
	}
	if un := md.Undecoded(); len(un) > 0 {
		return c, usageError{fmt.Sprintf("config %s: unknown key %q", path, un[0].String())}
	}
	if err := c.check(); err != nil {
		return c, usageError{fmt.Sprintf("config %s: %v", path, err)}
	}
	return c, nil
}

// check refuses values the daemon could only fail on later.
func (c config) check() error {
	switch c.SandboxMode {
	case "", "resident", "per-exec":
	default:
		return fmt.Errorf("sandbox_mode %q: want resident or per-exec", c.SandboxMode)
	}
	if c.ChangeSetMaxEntries < 0 {
		return fmt.Errorf("changeset_max_entries %d: want a positive number", c.ChangeSetMaxEntries)
	}
	for k, v := range map[string]string{"changeset_max_file": c.ChangeSetMaxFile, "changeset_max_total": c.ChangeSetMaxTotal,
		"disk_quota": c.DiskQuota, "disk_reserve": c.DiskReserve} {
		if _, err := parseSize(v); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	if err := c.ExecLimits.check(); err != nil {
		return err
	}
	if _, err := c.netAllowAddrs(); err != nil {
		return err
	}
	for k, v := range map[string]string{"harness_idle": c.HarnessIdle, "harness_orphan": c.HarnessOrphan} {
		if v == "" {
			continue
		}
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			return fmt.Errorf("%s %q: want a duration such as 5m", k, v)
		}
	}
	return nil
}

// parseSize reads a size in bytes: a number, or one with a KiB, MiB or GiB
// suffix. Empty is zero (the default).
func parseSize(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	num, mult := s, int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			num, mult = strings.TrimSpace(n), m
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q: want a size such as 100MiB (bytes, or with KiB, MiB or GiB)", s)
	}
	return n * mult, nil
}

// duration parses a checked duration; empty is zero (the default).
func duration(s string) time.Duration {
	d, _ := time.ParseDuration(s)
	return d
}
