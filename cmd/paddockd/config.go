package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/internal/lazyre"
	"github.com/paddock-dev/paddock/internal/paddockcli"
	"github.com/paddock-dev/paddock/lifecycle"
)

// config is paddock.toml. The flags of `paddock serve` override listen,
// log_level and log_format. A running daemon takes apply_name, apply_email
// and log_level from a changed file; the rest wait for its next start
// (configWatch).
type config struct {
	// Listen is an optional loopback TCP address, such as "127.0.0.1:7070".
	Listen string `toml:"listen"`
	// MetricsListen is an optional address (any interface: a Prometheus
	// server elsewhere scrapes it) serving only GET /metrics, without a
	// token; /metrics is on listen's listener too, with the token.
	MetricsListen string `toml:"metrics_listen"`
	// SharedSocket is an optional second unix socket, such as
	// /run/paddock/paddock.sock, for the people of a machine: mode 0660,
	// group SharedSocketGroup. Its callers are principals only: a peer
	// whose uid maps to none is refused (paddock principal add --user).
	SharedSocket      string `toml:"shared_socket"`
	SharedSocketGroup string `toml:"shared_socket_group"`
	// Store is where the state is kept: "sqlite" (the default,
	// <state dir>/state.db) or a PostgreSQL URL, postgres://…
	// (PADDOCK_STORE and serve --store override it).
	Store string `toml:"store"`
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
	// human who approves, not the agent); either left out is taken from
	// the user's git configuration (user.name, user.email).
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
	// Tracing exports OpenTelemetry spans over OTLP; off by default.
	Tracing tracingConfig `toml:"tracing"`
	// SessionLimits bound an agent's session (paddock run's CMD, an
	// agent's job), whose commands keep ExecLimits: wall (default 8h) for
	// one nobody watches, terminal_wall (default: none) for one at a
	// terminal.
	SessionLimits sessionLimits `toml:"session_limits"`
	// NetAllowAddresses are local or private addresses ("10.0.0.5",
	// "192.168.1.0/24") that names on a run's network allow-list may
	// resolve to; without them the proxy never reaches a loopback,
	// private, link-local or reserved address.
	NetAllowAddresses []string `toml:"net_allow_addresses"`
	// The node settings, read when the store is PostgreSQL and the daemon
	// is one node of several (docs/SCALING.md). NodeID names the node
	// (default: one made at its first start, kept in <state dir>/node-id);
	// NodeListen is the address it takes calls forwarded by the other
	// nodes on (default 127.0.0.1:0; on several machines, an address the
	// others reach); NodeAddress the URL they reach it at (default
	// http:// and NodeListen's address); NodeCapacity the runs with a live
	// workspace it takes (default 32); NodeLease how long it counts as
	// alive after its last renewal (default 15s; renewed every third of it).
	NodeID       string `toml:"node_id"`
	NodeListen   string `toml:"node_listen"`
	NodeAddress  string `toml:"node_address"`
	NodeCapacity int    `toml:"node_capacity"`
	NodeLease    string `toml:"node_lease"`
	// NodeAdopt is manual (the default: a lost node's runs wait for
	// paddock adopt) or auto (this node adopts them while it has room).
	NodeAdopt string `toml:"node_adopt"`
	// Webhooks ([[webhook]] tables) are told of the notices: submits,
	// approvals, applies, rejections, access requests, jobs' ends, lost
	// nodes (docs/WEBHOOKS.md).
	Webhooks []webhookConfig `toml:"webhook"`
}

// webhookConfig is a [[webhook]] table of paddock.toml.
type webhookConfig struct {
	// Name keeps the webhook's cursor in the store: renamed, it is a new
	// webhook, told of the notices from its first start on.
	Name string `toml:"name"`
	// URL is where deliveries are posted: http or https.
	URL string `toml:"url"`
	// Events are the notice types it is told of (empty: all).
	Events []string `toml:"events"`
	// Secret signs the deliveries, or SecretFile holds it (its path
	// relative to paddock.toml's directory); exactly one of them.
	Secret     string `toml:"secret"`
	SecretFile string `toml:"secret_file"`
}

// webhookName is what a webhook's name may hold.
var webhookName = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// webhooks checks the [[webhook]] tables and reads their secrets (a
// secret_file relative to dir): each error names the entry, none holds a
// secret.
func (c config) webhooks(dir string) ([]lifecycle.WebhookConfig, error) {
	var out []lifecycle.WebhookConfig
	names := map[string]bool{}
	for i, w := range c.Webhooks {
		entry := fmt.Sprintf("webhook %q", w.Name)
		if !webhookName.MatchString(w.Name) {
			return nil, fmt.Errorf("webhook #%d: name %q: want letters, digits, '.', '_' or '-' (at most 64)", i+1, w.Name)
		}
		if names[w.Name] {
			return nil, fmt.Errorf("%s: a second webhook has this name", entry)
		}
		names[w.Name] = true
		u, err := url.Parse(w.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s: url: want an http:// or https:// URL", entry)
		}
		for _, e := range w.Events {
			if !paddock.IsNoticeType(e) {
				return nil, fmt.Errorf("%s: events: %q is not a notice type (%s)", entry, e, strings.Join(paddock.NoticeTypes, ", "))
			}
		}
		secret := w.Secret
		switch {
		case (w.Secret == "") == (w.SecretFile == ""):
			return nil, fmt.Errorf("%s: give it a secret or a secret_file (one of them)", entry)
		case w.SecretFile != "":
			path := w.SecretFile
			if !filepath.IsAbs(path) {
				path = filepath.Join(dir, path)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("%s: secret_file: %w", entry, err)
			}
			secret = strings.TrimRight(string(b), "\r\n")
			if secret == "" {
				return nil, fmt.Errorf("%s: secret_file %s is empty", entry, path)
			}
		}
		out = append(out, lifecycle.WebhookConfig{Name: w.Name, URL: w.URL, Events: w.Events, Secret: []byte(secret)})
	}
	return out, nil
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
	Memory   string `toml:"memory"`    // memory (cgroup v2's memory.max; else the address space), such as "8GiB"
	FileSize string `toml:"file_size"` // largest file written
	Output   string `toml:"output"`    // bytes of stdout and of stderr passed on
	Tmp      string `toml:"tmp"`       // size of /tmp
	// CPUs is each command's CPU bandwidth, in CPUs (cgroup v2's cpu.max;
	// 0 or unset: none).
	CPUs float64 `toml:"cpus"`
	// IOBps is each command's read and write bandwidth on the disk of its
	// workspace, a size a second such as "100MiB" (cgroup v2's io.max,
	// where that disk is a block device; unset: none).
	IOBps string `toml:"io_bps"`
}

// sessionLimits is the [session_limits] table of paddock.toml.
type sessionLimits struct {
	Wall         string `toml:"wall"`
	TerminalWall string `toml:"terminal_wall"`
}

func (s sessionLimits) check() error {
	for k, v := range map[string]string{"wall": s.Wall, "terminal_wall": s.TerminalWall} {
		if v == "" {
			continue
		}
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			return fmt.Errorf("session_limits.%s %q: want a duration such as 8h", k, v)
		}
	}
	return nil
}

func (s sessionLimits) limits() lifecycle.SessionLimits {
	return lifecycle.SessionLimits{Wall: duration(s.Wall), TerminalWall: duration(s.TerminalWall)}
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
	l.CPUs = e.CPUs
	l.IOBps, _ = parseSize(e.IOBps)
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
	if e.CPUs < 0 || e.CPUs > 4096 || e.CPUs > 0 && e.CPUs < 0.01 {
		return fmt.Errorf("exec_limits.cpus %g: want a number of CPUs such as 1.5 (at least 0.01; 0: no bandwidth limit)", e.CPUs)
	}
	for k, v := range map[string]string{"memory": e.Memory, "file_size": e.FileSize, "output": e.Output, "tmp": e.Tmp, "io_bps": e.IOBps} {
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
		return c, paddockcli.UsageError(fmt.Sprintf("config %s: %v", path, err))
	}
	if un := md.Undecoded(); len(un) > 0 {
		return c, paddockcli.UsageError(fmt.Sprintf("config %s: unknown key %q", path, un[0].String()))
	}
	if err := c.check(); err != nil {
		return c, paddockcli.UsageError(fmt.Sprintf("config %s: %v", path, err))
	}
	if _, err := c.webhooks(filepath.Dir(path)); err != nil {
		return c, paddockcli.UsageError(fmt.Sprintf("config %s: %v", path, err))
	}
	return c, nil
}

// check refuses values the daemon could only fail on later.
func (c config) check() error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("log_level %q: want debug, info, warn or error", c.LogLevel)
	}
	if err := checkStore(c.Store); err != nil {
		return err
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("log_format %q: want text or json", c.LogFormat)
	}
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
	if err := c.SessionLimits.check(); err != nil {
		return err
	}
	if err := c.ExecLimits.check(); err != nil {
		return err
	}
	if err := c.Tracing.check(); err != nil {
		return err
	}
	if _, err := c.netAllowAddrs(); err != nil {
		return err
	}
	if err := c.checkNode(); err != nil {
		return err
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
func parseSize(s string) (int64, error) { return paddock.ParseSize(s) }

// duration parses a checked duration; empty is zero (the default).
func duration(s string) time.Duration {
	d, _ := time.ParseDuration(s)
	return d
}

// configPoll is how often the daemon looks at paddock.toml for changes.
var configPoll = time.Second

// configWatch applies changes to paddock.toml while the daemon serves:
// the settings read at each use (apply_name, apply_email) and the log level
// take effect at once; every other one needs the next start, which the
// daemon logs and reports in its status rather than half-applying it.
type configWatch struct {
	home, path string
	flags      func(string) bool // a flag given to serve wins over the file
	flagValues serveOptions
	// storeOverridden: --store or PADDOCK_STORE named the store.
	storeOverridden bool
	started         config // what the daemon started with
	level           *slog.LevelVar
	m               *lifecycle.Manager
	log             *slog.Logger

	last    []byte // the file's content last looked at
	current config // what is in effect

	mu      sync.Mutex
	pending []string // keys that changed and wait for a restart
}

// hotKeys are the settings a running daemon takes from a changed file.
var hotKeys = map[string]bool{"apply_name": true, "apply_email": true, "log_level": true}

func (w *configWatch) file() string {
	if w.path != "" {
		return w.path
	}
	return filepath.Join(w.home, "paddock.toml")
}

// run looks at the file every poll until ctx ends.
func (w *configWatch) run(ctx context.Context, poll time.Duration) {
	w.current = w.started
	w.last, _ = os.ReadFile(w.file())
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.check()
	}
}

// check reloads the file if its content changed.
func (w *configWatch) check() {
	b, err := os.ReadFile(w.file())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		b = nil
	}
	if bytes.Equal(b, w.last) {
		return
	}
	w.last = b
	cfg, err := loadConfig(w.home, w.path)
	if err != nil {
		w.log.Error("paddock.toml changed but cannot be used; the daemon keeps its settings", "err", err)
		return
	}
	if w.flags("listen") {
		cfg.Listen = w.flagValues.listen
	}
	if w.flags("log-level") {
		cfg.LogLevel = w.flagValues.logLevel
	}
	if w.flags("log-format") {
		cfg.LogFormat = w.flagValues.logFormat
	}
	if w.storeOverridden {
		// The store came from --store or PADDOCK_STORE, not the file.
		cfg.Store = w.started.Store
	}
	var pending []string
	for _, k := range changedKeys(w.current, cfg) {
		switch k {
		case "apply_name", "apply_email":
			// Once for both: SetIdentity below.
		case "log_level":
			setLevel(w.level, cfg.LogLevel) // checked by loadConfig
			w.log.Info("paddock.toml: log_level changed; in effect now", "log_level", cfg.LogLevel)
		default:
			w.log.Warn("paddock.toml: "+k+" changed; it takes effect when the daemon restarts (paddock serve)", "key", k)
		}
	}
	if cfg.ApplyName != w.current.ApplyName || cfg.ApplyEmail != w.current.ApplyEmail {
		w.m.SetIdentity(gitx.Identity{Name: cfg.ApplyName, Email: cfg.ApplyEmail})
		w.log.Info("paddock.toml: the apply identity changed; the next apply uses it", "apply_name", cfg.ApplyName, "apply_email", cfg.ApplyEmail)
	}
	for _, k := range changedKeys(w.started, cfg) {
		if !hotKeys[k] {
			pending = append(pending, k)
		}
	}
	w.current = cfg
	w.mu.Lock()
	w.pending = pending
	w.mu.Unlock()
}

// restartNeeded lists the settings whose change waits for a restart.
func (w *configWatch) restartNeeded() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.pending...)
}

// changedKeys names the paddock.toml keys whose values differ, in the
// struct's order.
func changedKeys(a, b config) []string {
	var out []string
	va, vb, t := reflect.ValueOf(a), reflect.ValueOf(b), reflect.TypeOf(a)
	for i := 0; i < t.NumField(); i++ {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, t.Field(i).Tag.Get("toml"))
		}
	}
	return out
}

// checkStore refuses a store paddock cannot open.
func checkStore(spec string) error {
	if spec == "" || spec == "sqlite" || strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://") {
		return nil
	}
	return fmt.Errorf("store: want sqlite or a postgres:// URL")
}
