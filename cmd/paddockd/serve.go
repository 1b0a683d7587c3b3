package main

import (
	"context"
	"crypto/rand"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/httpapi"
	"github.com/paddock-dev/paddock/identity"
	"github.com/paddock-dev/paddock/internal/durable"
	"github.com/paddock-dev/paddock/internal/paddockcli"
	"github.com/paddock-dev/paddock/lifecycle"
	"github.com/paddock-dev/paddock/mcpserver"
	"github.com/paddock-dev/paddock/metrics"
	"github.com/paddock-dev/paddock/postgres"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/sandbox"
	"github.com/paddock-dev/paddock/sqlite"
	"github.com/paddock-dev/paddock/ui"
	"github.com/paddock-dev/paddock/workspace"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"
)

// serveOptions are what serve runs with: its flags, which of them the
// command line gave (a flag given wins over the config file, now and when
// the file changes), and what it takes from the call. Tests fill one and
// call runServe.
type serveOptions struct {
	config        string
	listen        string
	metricsListen string
	sharedSocket  string
	sharedGroup   string
	store         string
	logLevel      string
	logFormat     string
	node          nodeFlags
	changed       func(flag string) bool // nil: none was given

	home   string              // the state directory
	getenv func(string) string // the environment
	stderr io.Writer           // the log
}

func (o serveOptions) given(flag string) bool { return o.changed != nil && o.changed(flag) }

func serveCmd(a paddockcli.Call) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the paddock daemon in the foreground",
		Long: `Run the daemon in the foreground. It owns the state database, the workspaces
and the API.

It listens on the unix socket <state dir>/paddock.sock (mode 0600) and, with
--listen, on a loopback TCP address too; TCP requests need the bearer token
in <state dir>/token. One daemon runs per state directory. SIGTERM or SIGINT
stops it gracefully: requests finish, active workspaces are checkpointed.

At start it recovers from whatever the last daemon left, even after kill -9:
half-made workspaces are rolled back, interrupted cleanups finished, active
workspaces checkpointed, and records whose directory is gone marked orphaned.

Commands run confined. By default each active run keeps one resident
sandbox, its harness, made once, and every command of the run is forked
from it (about the cost of a fork); sandbox_mode = "per-exec" sets a sandbox
up for each command instead. A harness idle for harness_idle (5m) is given
back; one whose daemon died waits harness_orphan (10m) for the next daemon
to re-attach, then exits. A graceful stop gives every harness back.

The state (projects, runs, events, jobs, agent definitions) is kept in
SQLite at <state dir>/state.db, or, with --store postgres://… (or
PADDOCK_STORE, or store in paddock.toml), in a PostgreSQL database that
must exist; paddock creates its tables. Several daemons, on one machine or
many, can share one database as the nodes of one paddock: each holds the
workspaces of its runs, answers every API call (a call for a run on
another node is forwarded to it) and places new runs by free capacity. A
node that stops renewing its lease is marked lost by the others; its runs
can be adopted from their checkpoints (paddock adopt, paddock nodes).
The --node-* flags and docs/SCALING.md say more.

Settings come from <state dir>/paddock.toml (or --config) and flags override
them: listen, store, log_level, log_format. The daemon notices when the file
changes: apply_name, apply_email and log_level take effect at once; any
other setting takes effect at the next start, and the daemon says so in its
log and in its status (restart_needed, in paddock version --json). A file
that no longer reads is logged and ignored. Without apply_name or
apply_email, an apply is authored by your git identity (user.name,
user.email from the project's and your global git configuration).`,
		Args: paddockcli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := a.StateDir()
			if err != nil {
				return err
			}
			o.changed, o.home, o.getenv, o.stderr = cmd.Flags().Changed, home, a.Getenv, a.Stderr()
			return runServe(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.config, "config", "", "config file (default <state dir>/paddock.toml)")
	cmd.Flags().StringVar(&o.listen, "listen", "", "also listen on this loopback TCP address, such as 127.0.0.1:7070 (port 0 picks one)")
	cmd.Flags().StringVar(&o.sharedSocket, "shared-socket", "", "also listen on this unix socket (mode 0660, group --shared-socket-group) for local users mapped to principals (paddock principal add --user); an unmapped user is refused there (default shared_socket in paddock.toml)")
	cmd.Flags().StringVar(&o.sharedGroup, "shared-socket-group", "", "the group whose members may open --shared-socket (default shared_socket_group in paddock.toml)")
	cmd.Flags().StringVar(&o.metricsListen, "metrics-listen", "", "also serve Prometheus metrics (GET /metrics, no token) on this TCP address, such as 127.0.0.1:9464 or :9464 (default metrics_listen in paddock.toml); /metrics is on --listen too, with the token")
	cmd.Flags().StringVar(&o.store, "store", "", "where the state is kept: sqlite (default, <state dir>/state.db) or postgres://… (default $PADDOCK_STORE, or store in paddock.toml)")
	cmd.Flags().StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&o.logFormat, "log-format", "text", "text or json")
	o.node.register(cmd)
	return cmd
}

// daemonInfo is written to <state dir>/daemon.json while the daemon runs, so
// that scripts and tests find its pid and its TCP port.
type daemonInfo = paddock.DaemonStatus

// runServe runs the daemon until ctx ends, SIGTERM or SIGINT, a listener
// fails, or its node is fenced; each step is one function, in the order
// they must run, and each resource is released by the defer beside it.
func runServe(ctx context.Context, o serveOptions) error {
	if err := paddockcli.PrepareHome(o.home); err != nil {
		return err
	}
	s, err := configure(o)
	if err != nil {
		return err
	}
	intoDelegatedScope(ctx, s.log)
	tracer, stopTracing, err := startTracing(ctx, s.cfg.Tracing, o.getenv)
	if err != nil {
		return err
	}
	defer stopTracing()
	s.tracer = tracer
	if detail, full := sandbox.CgroupReport(); full {
		s.log.Info("cgroups", "limits", detail)
	} else {
		s.log.Warn("cgroups: some limits fall back to rlimits", "limits", detail)
	}
	// One daemon per state directory: the flock is the guard, race-free.
	lock, err := lockHome(o.home)
	if err != nil {
		return err
	}
	defer lock.Close()

	if s.store, err = openStore(ctx, o.home, s.cfg.Store); err != nil {
		return err
	}
	defer s.store.Close()
	if err := s.joinCluster(ctx); err != nil {
		return err
	}
	if s.node != nil {
		defer s.node.leave()
	}
	if err := s.buildManager(ctx); err != nil {
		return err
	}
	if err := s.wire(ctx); err != nil {
		return err
	}
	if err := s.recover(ctx); err != nil {
		return err
	}
	if err := s.listen(); err != nil {
		return err
	}
	defer os.Remove(paddockcli.SocketPath(o.home))
	if err := writeJSONFile(filepath.Join(o.home, "daemon.json"), s.info); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(o.home, "daemon.json"))
	return s.serve(ctx)
}

// serving is one daemon's parts, made by runServe's steps in turn.
type serving struct {
	o               serveOptions
	cfg             config
	storeOverridden bool // --store or PADDOCK_STORE named the store
	level           *slog.LevelVar
	log             *slog.Logger

	store        paddock.Store
	metrics      *metrics.Metrics
	tracer       trace.Tracer // nil: no tracing
	node         *clusterNode // nil: the store is this daemon's own
	m            *lifecycle.Manager
	runSockets   *httpapi.RunSockets
	writeTimeout time.Duration

	watch     *configWatch
	api       *httpapi.Server
	mcpHTTP   *mcpserver.Handler
	pageTCP   *onDemandTCP
	info      daemonInfo
	recovered []paddock.Finding

	servers   []*http.Server
	listeners []net.Listener
}

// configure reads the config file, lets the environment and the flags
// given override it, and starts the log at its level.
func configure(o serveOptions) (*serving, error) {
	s := &serving{o: o, level: new(slog.LevelVar)}
	cfg, err := loadConfig(o.home, o.config)
	if err != nil {
		return nil, err
	}
	if o.given("listen") {
		cfg.Listen = o.listen
	}
	if o.given("metrics-listen") {
		cfg.MetricsListen = o.metricsListen
	}
	if o.given("shared-socket") {
		cfg.SharedSocket = o.sharedSocket
	}
	if o.given("shared-socket-group") {
		cfg.SharedSocketGroup = o.sharedGroup
	}
	if (cfg.SharedSocket == "") != (cfg.SharedSocketGroup == "") {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "a shared socket needs both its path and its group (shared_socket, shared_socket_group)")
	}
	if v := o.getenv(paddock.EnvPrefix + "STORE"); v != "" {
		cfg.Store, s.storeOverridden = v, true
	}
	if o.given("store") {
		cfg.Store, s.storeOverridden = o.store, true
	}
	if err := checkStore(cfg.Store); err != nil {
		return nil, paddockcli.UsageError(err.Error())
	}
	if o.given("log-level") {
		cfg.LogLevel = o.logLevel
	}
	if o.given("log-format") {
		cfg.LogFormat = o.logFormat
	}
	o.node.apply(&cfg, o.given)
	if err := cfg.checkNode(); err != nil {
		return nil, paddockcli.UsageError(err.Error())
	}
	s.cfg = cfg
	if err := setLevel(s.level, cfg.LogLevel); err != nil {
		return nil, err
	}
	if s.log, err = newLeveledLogger(o.stderr, s.level, cfg.LogFormat); err != nil {
		return nil, err
	}
	return s, nil
}

// joinCluster makes this daemon a node of several when its store is
// shared (PostgreSQL).
func (s *serving) joinCluster(ctx context.Context) error {
	cfg := s.cfg
	pg, ok := s.store.(*postgres.Store)
	if !ok {
		if cfg.NodeID != "" || cfg.NodeListen != "" || cfg.NodeAddress != "" || cfg.NodeCapacity != 0 || cfg.NodeLease != "" || cfg.NodeAdopt != "" {
			s.log.Warn("the node settings are ignored: this daemon's store (SQLite) is its own, shared with no other node")
		}
		return nil
	}
	var err error
	s.node, err = joinCluster(ctx, s.o.home, cfg, pg, s.log)
	return err
}

// buildManager makes the lifecycle Manager from the settings: git, the
// workspaces, the sandbox's pool and limits, and each run's own API
// socket with paddock's binaries beside it in its view.
func (s *serving) buildManager(ctx context.Context) error {
	mc, err := s.managerConfig(ctx)
	if err != nil {
		return err
	}
	s.writeTimeout = httpapi.MaxWait + 30*time.Second
	if d, err := time.ParseDuration(s.o.getenv(paddock.EnvPrefix + "TEST_WRITE_TIMEOUT")); err == nil && d > 0 {
		s.writeTimeout = d // tests only: a command must outlive the write timeout
	}
	// Each run's own API socket, and paddock's binaries beside it, in its view.
	s.runSockets = &httpapi.RunSockets{Logger: s.log,
		NewServer: func(h http.Handler) *http.Server { return newHTTPServer(h, s.log, s.writeTimeout) }}
	if s.runSockets.Bin, err = prepareBinDir(s.o.home, s.log); err != nil {
		s.log.Warn("runs get no paddock binary in their view", "err", err)
	}
	mc.RunAPI = s.runSockets
	if s.node != nil {
		mc.Cluster = s.node.store
	}
	// Metrics: every write transaction timed and its events counted, each
	// tool call and command observed.
	s.metrics = metrics.New(s.log)
	mc.Store, mc.Observer = s.metrics.Store(s.store), s.metrics
	mc.Harnesses.OnStart = s.metrics.HarnessStarted
	mc.Tracer = s.tracer
	s.m, err = lifecycle.NewManager(ctx, mc)
	return err
}

// managerConfig is the Manager's configuration from the settings and the
// environment.
func (s *serving) managerConfig(ctx context.Context) (lifecycle.Config, error) {
	home, cfg, getenv := s.o.home, s.cfg, s.o.getenv
	git, err := gitx.New(ctx)
	if err != nil {
		return lifecycle.Config{}, err
	}
	git.Timeout = duration(cfg.GitTimeout)
	wsDir := filepath.Join(home, "workspaces")
	if err := os.MkdirAll(wsDir, 0o700); err != nil {
		return lifecycle.Config{}, fmt.Errorf("state directory: %w", err)
	}
	var defKind paddock.WorkspaceKind
	if cfg.DefaultKind != "" {
		if defKind, err = paddock.ParseKind(cfg.DefaultKind); err != nil {
			return lifecycle.Config{}, err
		}
	}
	mc := lifecycle.Config{Store: s.store, Git: git, Providers: workspace.Providers(git, wsDir),
		WorkspacesDir: wsDir, DefaultKind: defKind, Logger: s.log, SandboxUID: cfg.SandboxUID,
		ArtifactsDir: filepath.Join(home, "artifacts"), BundleKeyFile: filepath.Join(home, "bundle-key.pem"),
		TrustedKeysDir: filepath.Join(home, "trusted-keys"), Identity: gitx.Identity{Name: cfg.ApplyName, Email: cfg.ApplyEmail}}
	mc.Harnesses = &sandbox.Pool{Dir: filepath.Join(home, "harness"), Idle: duration(cfg.HarnessIdle),
		Orphan: duration(cfg.HarnessOrphan), PerExec: cfg.SandboxMode == "per-exec", Log: s.log}
	mc.Secret = secretSource(home, getenv)
	userHome := getenv("HOME")
	if userHome == "" {
		userHome, _ = os.UserHomeDir()
	}
	mc.GitUser = gitx.UserConfigFor(userHome, getenv("XDG_CONFIG_HOME"), getenv("GIT_CONFIG_GLOBAL"))
	mc.ChangeSetLimits.MaxEntries = cfg.ChangeSetMaxEntries
	mc.ChangeSetLimits.MaxFile, _ = parseSize(cfg.ChangeSetMaxFile) // checked with the config
	mc.ChangeSetLimits.MaxTotal, _ = parseSize(cfg.ChangeSetMaxTotal)
	mc.ExecLimits = cfg.ExecLimits.limits()
	mc.SessionLimits = cfg.SessionLimits.limits()
	// The proxy's own authority, for credentials set on a run's HTTPS
	// requests; its key never leaves the state directory.
	if mc.ProxyCA, err = sandbox.LoadProxyCA(filepath.Join(home, "proxy-ca.pem")); err != nil {
		return lifecycle.Config{}, err
	}
	mc.DiskLimits.RunQuota, _ = parseSize(cfg.DiskQuota)
	mc.DiskLimits.Reserve, _ = parseSize(cfg.DiskReserve)
	mc.Harnesses.RunProcs = 2 * sandbox.WithDefaults(mc.ExecLimits).Procs // a run's commands together
	mc.NetAllowAddrs, _ = cfg.netAllowAddrs()                             // checked with the config
	configDir := home
	if s.o.config != "" {
		configDir = filepath.Dir(s.o.config)
	}
	if mc.Webhooks, err = cfg.webhooks(configDir); err != nil {
		return lifecycle.Config{}, paddockcli.UsageError(err.Error())
	}
	if n, err := strconv.Atoi(getenv(paddock.EnvPrefix + "TEST_APPLY_CRASH_AT")); err == nil {
		mc.CrashAt = n // tests only: die at this step of an apply into a working tree
	}
	if os.Getuid() == 0 && mc.SandboxUID == 0 {
		mc.SandboxUID = 65534 // nobody: commands never run as root
		s.log.Warn("the daemon runs as root; commands run as uid 65534 (set sandbox_uid in paddock.toml to choose)")
	}
	return mc, nil
}

// wire makes the API around the Manager, before recovery, which serves
// the live runs' own sockets again through it: the HTTP API and its MCP
// endpoint, the config file's watch that its status reports, the node's
// routes, the review page and the doctor.
func (s *serving) wire(ctx context.Context) error {
	token, err := loadToken(s.o.home)
	if err != nil {
		return err
	}
	m, cfg := s.m, s.cfg
	s.watch = &configWatch{home: s.o.home, path: s.o.config, flags: s.o.given, flagValues: s.o, storeOverridden: s.storeOverridden,
		started: cfg, level: s.level, m: m, log: s.log}
	s.api, s.mcpHTTP = wireAPI(m, token, s.status, s.log)
	s.api.Metrics, s.api.Observer, s.api.Tracer = s.metrics.Handler(), s.metrics, s.tracer
	s.metrics.SetSource(s.metricsState)
	s.runSockets.API = s.api
	if s.node != nil {
		s.node.m = m
		s.api.Cluster = s.node
		if s.api.NodeSecret, err = s.node.store.Secret(ctx); err != nil {
			return err
		}
	}
	// The review page: on --listen's listener, or on one started on
	// loopback for the first `paddock ui`.
	s.pageTCP = &onDemandTCP{newServer: func() *http.Server { return newHTTPServer(s.api.TCPHandler(), s.log, s.writeTimeout) }, log: s.log}
	s.api.UI = ui.NewSessions()
	s.api.UIAddr = s.pageTCP.addr
	s.api.Doctor = func(ctx context.Context) *paddock.DoctorReport {
		return machineReport(ctx, "daemon", doctorConfig{sandboxUID: m.SandboxUID, perExec: m.Harnesses.PerExec, idle: cfg.HarnessIdle, orphan: cfg.HarnessOrphan,
			workspaces: m.WorkspacesDir})
	}
	return nil
}

// metricsState is the state a metrics scrape reports: the Manager's, and
// the nodes' leases on a shared store.
func (s *serving) metricsState(ctx context.Context) (*metrics.State, error) {
	st, err := s.m.Stats.State(ctx)
	if err != nil || s.node == nil {
		return st, err
	}
	nodes, err := s.node.store.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		st.Nodes = append(st.Nodes, metrics.NodeLease{ID: n.ID, State: string(n.State), Age: time.Since(n.HeartbeatAt)})
	}
	return st, nil
}

// wireAPI makes the HTTP API and the MCP endpoint it serves (streamable
// HTTP), both in front of m.
func wireAPI(m *lifecycle.Manager, token string, status func() paddock.DaemonStatus, logger *slog.Logger) (*httpapi.Server, *mcpserver.Handler) {
	api := &httpapi.Server{Projects: m.Projects, Runs: m.Runs, Jobs: m.Jobs, Broker: m.Broker, Changes: m.Changes, Provenance: m.Provenance,
		Verifier: m.Verifier, Reviews: m.Reviews, Forks: m.Forks, Flows: m.Flows, Queue: m.Queue, Bundles: m.Bundles, Collector: m, Notices: m.Webhooks, Calls: m.Calls,
		Principals: &identity.Service{Store: m.Store, Logger: logger},
		Logger:     logger, Token: token, Status: status}
	mcpHTTP := mcpserver.NewHandler(mcpserver.Config{Runs: m.Runs, Broker: m.Broker, Changes: m.Changes, Verifier: m.Verifier, Flows: m.Flows,
		CallTool: managerTool(m), Version: paddockcli.VersionString(), Logger: logger})
	api.MCP = mcpHTTP
	return api, mcpHTTP
}

// status is the daemon's status as the API gives it.
func (s *serving) status() paddock.DaemonStatus {
	st := s.info
	st.RestartNeeded = s.watch.restartNeeded()
	return st
}

// recover finishes what the last daemon left, and says what it found in
// the daemon's status.
func (s *serving) recover(ctx context.Context) error {
	recovered, err := s.m.Recover(ctx)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	s.recovered = recovered
	s.info = daemonInfo{Version: paddockcli.VersionString(), PID: os.Getpid(), StateDir: s.o.home, Socket: paddockcli.SocketPath(s.o.home),
		StartedAt: time.Now().UTC(), Recovered: recovered}
	if s.info.Recovered == nil {
		s.info.Recovered = []paddock.Finding{}
	}
	return nil
}

// listen opens the API's listeners: the unix socket, the node's, and
// --listen's loopback TCP.
func (s *serving) listen() error {
	unixLn, err := listenUnix(paddockcli.SocketPath(s.o.home))
	if err != nil {
		return err
	}
	s.servers = []*http.Server{newHTTPServer(s.api.Handler(), s.log, s.writeTimeout)}
	s.listeners = []net.Listener{unixLn}
	if s.node != nil {
		s.info.Node = s.node.self.ID
		s.servers = append(s.servers, newHTTPServer(s.api.NodeHandler(), s.log, s.writeTimeout))
		s.listeners = append(s.listeners, s.node.ln)
	}
	if s.cfg.Listen != "" {
		ln, err := listenLoopback(s.cfg.Listen)
		if err != nil {
			unixLn.Close()
			return err
		}
		s.info.Listen = ln.Addr().String()
		s.pageTCP.listen = s.info.Listen
		s.servers = append(s.servers, newHTTPServer(s.api.TCPHandler(), s.log, s.writeTimeout))
		s.listeners = append(s.listeners, ln)
	}
	if s.cfg.SharedSocket != "" {
		ln, err := listenShared(s.cfg.SharedSocket, s.cfg.SharedSocketGroup)
		if err != nil {
			for _, l := range s.listeners {
				l.Close()
			}
			return err
		}
		s.info.SharedSocket = s.cfg.SharedSocket
		s.servers = append(s.servers, newHTTPServer(s.api.SharedHandler(), s.log, s.writeTimeout))
		s.listeners = append(s.listeners, ln)
	}
	if s.cfg.MetricsListen != "" {
		ln, err := net.Listen("tcp", s.cfg.MetricsListen)
		if err != nil {
			for _, l := range s.listeners {
				l.Close()
			}
			return fmt.Errorf("metrics_listen: %w", err)
		}
		s.info.MetricsListen = ln.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", s.metrics.Handler())
		s.servers = append(s.servers, newHTTPServer(mux, s.log, s.writeTimeout))
		s.listeners = append(s.listeners, ln)
	}
	return nil
}

// serve serves until ctx ends, SIGTERM or SIGINT, a listener fails, or
// the node is fenced, then shuts down.
func (s *serving) serve(ctx context.Context) error {
	ctx, fence := context.WithCancelCause(ctx)
	defer fence(nil)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go s.watch.run(ctx, configPoll)
	if s.node != nil {
		go s.node.run(ctx, fence)
	}
	errc := make(chan error, len(s.servers))
	for i, srv := range s.servers {
		go func() { errc <- srv.Serve(s.listeners[i]) }()
	}
	s.log.Info("paddock serving", "version", s.info.Version, "pid", s.info.PID, "socket", s.info.Socket,
		"listen", s.info.Listen, "state", s.o.home, "recovered", len(s.recovered))
	if s.node != nil {
		go func() {
			if err := s.node.checkAddress(ctx, s.api.NodeSecret); err != nil && ctx.Err() == nil {
				s.log.Error("this node cannot be reached at its address: stopping", "err", err)
				fence(errNodeAddress{err})
			}
		}()
	}

	var serveErr error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down")
	case serveErr = <-errc:
		s.log.Error("listener failed", "err", serveErr)
	}
	s.shutdown(ctx)
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	var bad errNodeAddress
	if err := context.Cause(ctx); errors.Is(err, paddock.ErrFenced) || errors.As(err, &bad) {
		return err // the node lost its lease, or cannot be reached: it stopped, and says so
	}
	return serveErr
}

// shutdown stops the listeners and the Manager, within 15s, whatever
// ended ctx.
func (s *serving) shutdown(ctx context.Context) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	// Streams end first (MCP sessions', event streams, held requests,
	// streamed commands), so the listeners can: a graceful shutdown waits
	// for every handler.
	s.mcpHTTP.Close()
	s.api.EndStreams()
	for _, srv := range s.servers {
		srv.Shutdown(sctx)
	}
	s.pageTCP.shutdown(sctx)
	// The checkpoints have a budget of their own: what the listeners took
	// of theirs is not taken from them.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer ccancel()
	if err := s.m.Close(cctx); err != nil {
		s.log.Error("checkpoint at shutdown failed", "err", err)
	}
	s.runSockets.Shutdown(cctx) // after the commands, which may be using them, are ended
	s.log.Info("stopped")
}

// onDemandTCP is the loopback TCP listener the review page is served on
// when the daemon was started without --listen: the first `paddock ui`
// starts it on a free port of 127.0.0.1, and it is shut down with the
// daemon's other listeners.
type onDemandTCP struct {
	newServer func() *http.Server
	log       *slog.Logger
	mu        sync.Mutex
	listen    string // --listen's address, or the one started here
	srv       *http.Server
	closed    bool
}

func (o *onDemandTCP) addr(context.Context) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.listen != "" {
		return o.listen, nil
	}
	if o.closed {
		return "", paddock.Errorf(paddock.CodeConflict, "the daemon is stopping")
	}
	ln, err := listenLoopback("127.0.0.1:0")
	if err != nil {
		return "", err
	}
	o.srv, o.listen = o.newServer(), ln.Addr().String()
	go func() {
		if err := o.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.log.Error("the review page's listener failed", "err", err)
		}
	}()
	o.log.Info("review page listening", "listen", o.listen)
	return o.listen, nil
}

func (o *onDemandTCP) shutdown(ctx context.Context) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	if o.srv != nil {
		o.srv.Shutdown(ctx)
	}
}

// newHTTPServer bounds every request by time; a command's requests (exec,
// exec/stream), the event stream and a diff lift the write deadline for as
// long as their own limits allow.
func newHTTPServer(h http.Handler, logger *slog.Logger, writeTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ConnContext:       httpapi.ConnContext,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

func newLogger(w interface{ Write([]byte) (int, error) }, level, format string) (*slog.Logger, error) {
	lv := new(slog.LevelVar)
	if err := setLevel(lv, level); err != nil {
		return nil, err
	}
	return newLeveledLogger(w, lv, format)
}

func setLevel(lv *slog.LevelVar, level string) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return paddockcli.UsageError(fmt.Sprintf("log level %q: use debug, info, warn or error", level))
	}
	lv.Set(l)
	return nil
}

// newLeveledLogger is newLogger whose level can change while it logs.
func newLeveledLogger(w interface{ Write([]byte) (int, error) }, lv *slog.LevelVar, format string) (*slog.Logger, error) {
	// Logs pass through the redaction funnel too: an error that quotes a
	// command line or a file must not carry a credential into the log.
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		switch a.Value.Kind() {
		case slog.KindString:
			a.Value = slog.StringValue(string(redact.Shapes([]byte(a.Value.String()))))
		case slog.KindAny:
			if err, ok := a.Value.Any().(error); ok {
				a.Value = slog.StringValue(string(redact.Shapes([]byte(err.Error()))))
			}
		}
		return a
	}}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, paddockcli.UsageError(fmt.Sprintf("log format %q: use text or json", format))
}

// lockHome takes the daemon lock of the state directory, or says who holds it.
func lockHome(home string) (*os.File, error) {
	path := filepath.Join(home, "daemon.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("daemon lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		pid := strings.TrimSpace(string(b))
		return nil, paddock.Errorf(paddock.CodeBusy, "a paddock daemon (pid %s) is already running for %s", pid, home).
			WithDetail("pid", pid)
	}
	f.Truncate(0)
	f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
	return f, nil
}

func loadToken(home string) (string, error) {
	path := paddockcli.TokenPath(home)
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("token: %w", err)
	}
	var raw [32]byte
	rand.Read(raw[:])
	tok := hex.EncodeToString(raw[:])
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return tok, nil
}

// listenUnix listens on path with mode 0600. We hold the daemon lock, so a
// socket file already there is a dead daemon's.
func listenUnix(path string) (net.Listener, error) {
	if len(path) >= 108 {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "socket path %s is %d bytes, longer than a unix socket path may be (107); use a shorter state directory", path, len(path))
	}
	os.Remove(path)
	return listenSocket(path, -1, 0o600)
}

// listenSocket listens on the unix socket path, made with no access for
// anyone and then given group gid (unless -1) and mode.
func listenSocket(path string, gid int, mode os.FileMode) (net.Listener, error) {
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("socket's group: %w", err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("socket mode: %w", err)
	}
	return ln, nil
}

// listenShared listens on path, a socket its group's members may open
// (mode 0660): the principals' (httpapi.Server.SharedHandler). Its
// directory must exist; a socket already there is replaced, anything
// else is refused.
func listenShared(path, group string) (net.Listener, error) {
	if len(path) >= 108 || !filepath.IsAbs(path) {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "shared socket %s: give an absolute path of at most 107 bytes", path)
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "shared socket group %s: %v", group, err)
	}
	gid, _ := strconv.Atoi(g.Gid)
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "shared socket %s: something else is there; remove it", path)
		}
		os.Remove(path)
	}
	return listenSocket(path, gid, 0o660)
}

// listenLoopback listens on addr, which must be a loopback address.
func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, paddockcli.UsageError(fmt.Sprintf("--listen %q: want HOST:PORT", addr))
	}
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, paddockcli.UsageError(fmt.Sprintf("--listen %q: only loopback addresses are allowed", addr))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// secretSource finds a secret's value in <home>/secrets/NAME (a file, best
// kept 0600), else in the daemon's environment as PADDOCK_SECRET_NAME.
func secretSource(home string, getenv func(string) string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if b, err := os.ReadFile(filepath.Join(home, "secrets", name)); err == nil {
			return strings.TrimRight(string(b), "\r\n"), true
		}
		v := getenv(paddock.EnvPrefix + "SECRET_" + name)
		return v, v != ""
	}
}

// openStore opens the state: SQLite in the state directory, or the
// PostgreSQL database a postgres:// URL names, shared with other nodes.
func openStore(ctx context.Context, home, spec string) (paddock.Store, error) {
	switch {
	case spec == "" || spec == "sqlite":
		s, err := sqlite.Open(ctx, filepath.Join(home, "state.db"))
		if err != nil {
			return nil, fmt.Errorf("open state: %w", err)
		}
		return s, nil
	case strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://"):
		s, err := postgres.Open(ctx, spec)
		if err != nil {
			return nil, fmt.Errorf("open state: %w", err)
		}
		return s, nil
	}
	return nil, paddockcli.UsageError("store: want sqlite or a postgres:// URL")
}

// prepareBinDir makes <state>/bin, the directory every run's view shows
// at lifecycle.BinInView: paddockd, this binary, as paddockd (every verb,
// `paddock mcp` an agent's MCP server runs included), and as paddock the
// CLI beside this binary when it is this build's (cliOfThisBuild): the
// `paddock` an agent's shell calls inside a run then starts as fast as
// the operator's, and hands paddockd what it does not hold, as outside.
// Without such a CLI, paddock is this binary too. Each is a hard link, or
// a copy across file systems or where others may not run it, made anew at
// each start: a run gets the binaries of the daemon that serves it.
func prepareBinDir(home string, log *slog.Logger) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(home, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	if err := placeBinary(exe, filepath.Join(dir, paddockcli.DaemonName)); err != nil {
		return "", err
	}
	cli := filepath.Join(filepath.Dir(exe), "paddock")
	src := exe
	switch ok, why := cliOfThisBuild(cli); {
	case ok:
		src = cli
	case why != "":
		log.Warn("runs get this binary as their paddock, not the CLI beside it", "cli", cli, "why", why)
	}
	if err := placeBinary(src, filepath.Join(dir, "paddock")); err != nil {
		return "", err
	}
	return dir, nil
}

// placeBinary puts src at dst, readable and runnable by all, replacing
// dst at once.
func placeBinary(src, dst string) error {
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".new")
	os.Remove(tmp)
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o005 != 0o005 || os.Link(src, tmp) != nil {
		if err := durable.CopyFile(src, tmp, 0o755); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// cliOfThisBuild reports whether path is the CLI (cmd/paddock) of
// the build this binary is: the same module version, Go version and, where
// the build recorded them, the same commit and the same modified tree. A
// CLI of another build could speak another version of the API; why says
// what differs ("" when there is no file there, or path is this binary).
func cliOfThisBuild(path string) (bool, string) {
	self, ok := debug.ReadBuildInfo()
	if !ok {
		return false, "this binary has no build information"
	}
	exe, _ := os.Executable()
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return false, ""
	} else if efi, err := os.Stat(exe); err == nil && os.SameFile(fi, efi) {
		return false, ""
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return false, fmt.Sprintf("not a Go binary: %v", err)
	}
	if !paddockcli.IsCLIBuild(bi) {
		return false, "not a build of cmd/paddock"
	}
	if bi.Main.Path != self.Main.Path || bi.Main.Version != self.Main.Version || bi.GoVersion != self.GoVersion {
		return false, fmt.Sprintf("built from %s %s with %s, this binary from %s %s with %s", bi.Main.Path, bi.Main.Version, bi.GoVersion, self.Main.Path, self.Main.Version, self.GoVersion)
	}
	for _, key := range []string{"vcs.revision", "vcs.time", "vcs.modified"} {
		if a, b := paddockcli.BuildSetting(bi, key), paddockcli.BuildSetting(self, key); a != b {
			return false, fmt.Sprintf("its %s is %q, this binary's %q", key, a, b)
		}
	}
	return true, ""
}
