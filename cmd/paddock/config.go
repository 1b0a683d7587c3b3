package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// config is paddock.toml. Every field has a flag of `paddock serve` that
// overrides it.
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
	// GitTimeout bounds every git command the daemon runs (default 10m):
	// past it git is killed and the operation fails saying git timed out.
	GitTimeout string `toml:"git_timeout"`
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
	for k, v := range map[string]string{"changeset_max_file": c.ChangeSetMaxFile, "changeset_max_total": c.ChangeSetMaxTotal} {
		if _, err := parseSize(v); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	for k, v := range map[string]string{"harness_idle": c.HarnessIdle, "harness_orphan": c.HarnessOrphan, "git_timeout": c.GitTimeout} {
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
