package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
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

// duration parses a checked duration; empty is zero (the default).
func duration(s string) time.Duration {
	d, _ := time.ParseDuration(s)
	return d
}
