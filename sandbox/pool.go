//go:build linux

package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock"
	"golang.org/x/sys/unix"
)

// Pool keeps one resident sandbox, a harness, per run (per key), and runs
// each command of the run by forking it from there: the namespaces, the
// view and the prepared confinement are made once, so a command costs
// about a fork. A command made for another configuration than the run's
// harness (a network, a /tmp size, protected paths) gets a new harness,
// unless the old one is running commands: then it runs per-exec (an
// overlay run's is refused as busy: its upper layer takes one mount). A
// command the harness cannot serve at all (a degraded sandbox, a command
// line too big for the control channel) runs per-exec. Its Enforcement
// says which and why.
//
// Harnesses outlive the daemon: after a crash a new Pool on the same Dir
// re-attaches to each run's harness on its next command (but to an
// allow-list network's, whose proxy died with the daemon). A harness with no
// daemon for Orphan exits, killing what it ran. A graceful Close gives
// every harness back.
type Pool struct {
	// Dir holds each harness's socket (KEY.sock) and log (KEY.log); it
	// must be private to the daemon (0700).
	Dir string
	// Idle gives a harness back after this long without a command (0: 5 minutes).
	Idle time.Duration
	// Orphan is how long a harness waits for a daemon to come back (0: 10 minutes).
	Orphan time.Duration
	// PerExec turns resident sandboxes off: every command gets its own.
	PerExec bool
	// RunProcs bounds the processes of all of a run's commands together,
	// where a pids cgroup counts them (0: twice DefaultLimits.Procs).
	RunProcs int
	Log      *slog.Logger
	// OnStart, if set, is told of each harness started (not re-attached):
	// how long its set-up took, and the error if it failed.
	OnStart func(d time.Duration, err error)

	mu      sync.Mutex
	hs      map[string]*harnessConn
	making  map[string]chan struct{} // a harness being made for the key, closed when it is
	held    map[string]bool          // keys whose layers are changing: no harness is made (Hold)
	janitor bool
	closed  bool
}

// Run runs spec's command for the run key: through the run's harness when
// it can, per-exec otherwise.
func (p *Pool) Run(ctx context.Context, key string, spec Spec) (*Result, error) {
	if err := prepare(&spec); err != nil {
		return nil, err
	}
	reason := p.perExecReason(&spec)
	if reason == "" && len(p.sockPath(key)) >= len(unix.RawSockaddrUnix{}.Path) {
		reason = "the state directory's path is too long for the harness's socket"
	}
	if reason != "" && spec.Overlay != nil {
		// A second mount of the run's upper layer beside its harness's
		// would be undefined behaviour in overlayfs.
		return nil, paddock.Errorf(paddock.CodeUnsupported, "an overlay run runs its commands only through its harness, and %s", reason)
	}
	if reason != "" {
		return perExec(ctx, spec, reason)
	}
	if spec.Net == NetAllow {
		spec.Env = append(spec.Env, proxyEnv()...)
	}
	for attempt := 0; ; attempt++ {
		h, ownNet, err := p.harness(ctx, key, &spec)
		if errors.Is(err, errHarnessInUse) {
			if spec.Overlay != nil {
				return nil, paddock.Errorf(paddock.CodeBusy, "the run's sandbox is running a command made for another configuration (network, /tmp size or protected paths); an overlay run's commands share one sandbox: try again when it ends")
			}
			return perExec(ctx, spec, "the run's harness is running a command made for another configuration")
		}
		if err != nil {
			return nil, err
		}
		if !ownNet {
			// The proxy's decisions are of commands with its network.
			h.setDecide(spec.Decide)
		}
		res, err := h.run(ctx, &spec, ownNet)
		if errors.Is(err, errHarnessGone) && attempt == 0 {
			p.drop(key, h) // it died before the command started: one more try
			continue
		}
		p.mu.Lock()
		h.inflight--
		h.lastUsed = time.Now()
		p.mu.Unlock()
		return res, err
	}
}

// perExec runs a prepared spec in a sandbox of its own, and says why.
func perExec(ctx context.Context, spec Spec, reason string) (*Result, error) {
	res, err := runFresh(ctx, spec)
	if res != nil {
		res.Enforcement.Mode, res.Enforcement.ModeReason = "per-exec", reason
	}
	return res, err
}

func (p *Pool) perExecReason(spec *Spec) string {
	switch {
	case p.PerExec:
		return "resident sandboxes are turned off (sandbox_mode = per-exec)"
	case spec.AllowDegraded:
		return "a degraded sandbox is set up per command"
	}
	n := 0
	for _, s := range append(spec.Argv, spec.Env...) {
		n += len(s) + 8
	}
	if n > maxHarnessMessage-4096 {
		return "the command line and environment are too big for the harness's control channel"
	}
	return ""
}

// instance tells this process's harnesses from a previous daemon's: a
// harness of an allow-list network reaches the world only through its
// daemon's proxy, so a new daemon does not adopt it.
// It is made on first use, not at init, which every start of the binary
// (the CLI's included) would pay.
var instance = sync.OnceValue(func() string { return fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()) })

func proxyInstance(spec *Spec) string {
	if spec.Net == NetAllow {
		return instance()
	}
	return ""
}

func proxyEnv() []string {
	proxy := fmt.Sprintf("http://127.0.0.1:%d", ProxyPort)
	return []string{"HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy, "http_proxy=" + proxy, "https_proxy=" + proxy}
}

// configHash identifies what a harness was built for: a command whose run
// has changed (the workspace, its protected paths, the network, /tmp) gets
// a new harness, unless it asks only for less network (netFreeHash).
func configHash(spec *Spec) string { return hashConfig(spec, true) }

// netFreeHash is configHash without the network: a command whose spec
// differs from its harness's only there, and asks for no network, is
// forked from that harness into a network namespace of its own. So one
// overlay run serves its agent, whose own process has a network, and the
// commands the agent asks for, which have none (#30 item 1).
func netFreeHash(spec *Spec) string { return hashConfig(spec, false) }

func hashConfig(spec *Spec, withNet bool) string {
	netOf := func(s *Spec) (Net, []string, []netip.Prefix, string) {
		if !withNet {
			return "", nil, nil, ""
		}
		// The proxy's credentials are its own (not the sandbox's): a
		// changed one makes a new harness, with a new proxy.
		return s.Net, s.Allow, s.AllowAddrs, proxyInstance(s) + credentialsHash(s.Credentials)
	}
	net, allow, allowAddrs, proxy := netOf(spec)
	b, _ := json.Marshal(struct {
		Version                     int
		Workspace                   string
		ReadOnly, Scratch           bool
		Protected, Unprotected      []string
		OperatorDir                 bool
		Net                         Net
		UID, GID                    int
		Tmp                         int64
		OpenByPath, ForcePathOpened bool
		Overlay                     *Overlay
		Allow                       []string
		AllowAddrs                  []netip.Prefix
		Binds                       []Bind
		Proxy                       string
	}{harnessVersion, spec.Workspace, spec.ReadOnly, spec.Scratch, spec.Protected, spec.Unprotected, spec.OperatorDir, net, spec.UID, spec.GID, spec.Limits.Tmp, spec.OpenByPath, forcePathOpen, spec.Overlay,
		allow, allowAddrs, spec.Binds, proxy})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

func (p *Pool) runProcs() int {
	if p.RunProcs > 0 {
		return p.RunProcs
	}
	return 2 * DefaultLimits.Procs
}

func (p *Pool) idle() time.Duration {
	if p.Idle > 0 {
		return p.Idle
	}
	return 5 * time.Minute
}
func (p *Pool) orphan() time.Duration {
	if p.Orphan > 0 {
		return p.Orphan
	}
	return 10 * time.Minute
}

func (p *Pool) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.Default()
}

func (p *Pool) sockPath(key string) string { return filepath.Join(p.Dir, key+".sock") }

// harness returns the run's harness for spec: the one it has, one a
// previous daemon left (re-attached), or a new one; ownNet says the
// command is to have a network namespace of its own, made from a harness
// that has a network the command did not ask for.
func (p *Pool) harness(ctx context.Context, key string, spec *Spec) (h *harnessConn, ownNet bool, err error) {
	h, err = p.harnessFor(ctx, key, spec, &ownNet, true)
	return h, ownNet, err
}

// harnessFor finds or makes key's harness for spec. A command counts
// itself in the harness's inflight (forCommand), under the same lock that
// found the harness; the daemon's View does not: a view runs nothing, and
// counting it even for a moment would make a command that came meanwhile
// for another configuration (the run's agent, with its network) take the
// harness for busy and be refused.
func (p *Pool) harnessFor(ctx context.Context, key string, spec *Spec, ownNet *bool, forCommand bool) (*harnessConn, error) {
	count := 0
	if forCommand {
		count = 1
	}
	if key == "" || strings.ContainsAny(key, "/\x00") || strings.HasPrefix(key, ".") {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "sandbox: bad harness key %q", key)
	}
	cfg := configHash(spec)
	p.mu.Lock()
	for {
		if p.closed {
			p.mu.Unlock()
			return nil, paddock.Errorf(paddock.CodeBusy, "the daemon is shutting down")
		}
		if p.held[key] {
			p.mu.Unlock()
			return nil, paddock.Errorf(paddock.CodeBusy, "the run's workspace is being forked; try again in a moment")
		}
		// One harness is made for a run at a time: a second command that
		// came meanwhile would otherwise dial the new harness's socket, find
		// it busy greeting the first, and take it for a stale one.
		wait := p.making[key]
		if wait == nil {
			break
		}
		p.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		p.mu.Lock()
	}
	if p.hs == nil {
		p.hs = map[string]*harnessConn{}
	}
	if !p.janitor {
		p.janitor = true
		go p.reapIdle()
		if pids := pidsFor(p.Dir); pids != nil {
			// What a crashed daemon's harnesses left (a harness it left
			// running keeps its cgroup busy, so it stays); under the lock,
			// before this pool starts any harness of its own.
			pids.sweep(func(string) bool { return false })
		}
	}
	h := p.hs[key]
	if h != nil && h.config == cfg && !h.isDead() {
		h.inflight += count
		p.mu.Unlock()
		return h, nil
	}
	if h != nil && h.inflight > 0 && spec.Net == NetNone && h.net != NetNone && h.base == netFreeHash(spec) && !h.isDead() {
		// Less network than a busy harness has (the run's agent holds it
		// with its own): a namespace of its own, forked from it. An idle
		// harness is made again for the command, as for any other change.
		*ownNet = true
		h.inflight += count
		p.mu.Unlock()
		return h, nil
	}
	if h != nil && h.inflight > 0 && !h.isDead() {
		// Its commands keep it: this one, made for another configuration
		// (another network, /tmp size or protected paths), must not end them.
		p.mu.Unlock()
		return nil, errHarnessInUse
	}
	delete(p.hs, key)
	if p.making == nil {
		p.making = map[string]chan struct{}{}
	}
	made := make(chan struct{})
	p.making[key] = made
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.making, key)
		p.mu.Unlock()
		close(made)
	}()
	if h != nil {
		// The run changed (or the harness died): a new one, once the old
		// one is gone (an overlay must not be mounted twice at once).
		h.close()
		h.waitGone(5 * time.Second)
	} else if c, err := dialHarness(p.sockPath(key)); err == nil {
		// A harness a previous daemon left behind.
		if h, err := p.adopt(c, key, cfg); err == nil {
			p.log().Info("harness re-attached", "run", key, "pid", h.pid)
			return p.keep(key, h, count), nil
		}
	}
	began := time.Now()
	h, err := p.start(ctx, key, spec, cfg)
	if p.OnStart != nil {
		p.OnStart(time.Since(began), err)
	}
	if err != nil {
		return nil, err
	}
	return p.keep(key, h, count), nil
}

func (p *Pool) keep(key string, h *harnessConn, count int) *harnessConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.hs[key]; old != nil && old != h {
		go old.close()
	}
	p.hs[key] = h
	h.inflight += count
	return h
}

// drop forgets a dead harness.
func (p *Pool) drop(key string, h *harnessConn) {
	p.mu.Lock()
	if p.hs[key] == h {
		delete(p.hs, key)
	}
	h.inflight--
	p.mu.Unlock()
	h.close()
}

// View returns the host path through which the daemon sees what the run's
// commands see at spec.Workspace: the workspace inside the run's harness
// (its mount namespace holds an overlay's merged view, which exists
// nowhere else), without the read-only mounts on its protected paths,
// which bind commands, not the daemon. It starts a harness for spec if the
// run has none, and uses the one it has otherwise, whatever its network.
func (p *Pool) View(ctx context.Context, key string, spec Spec) (string, error) {
	spec.Argv = []string{"true"} // a harness runs nothing of its own
	if err := prepare(&spec); err != nil {
		return "", err
	}
	p.mu.Lock()
	h := p.hs[key]
	if h != nil && !h.isDead() {
		h.lastUsed = time.Now()
		p.mu.Unlock()
		return h.view(&spec), nil
	}
	p.mu.Unlock()
	if reason := p.perExecReason(&spec); reason != "" {
		return "", paddock.Errorf(paddock.CodeUnsupported, "no resident sandbox: %s", reason)
	}
	spec.Net, spec.Allow, spec.AllowAddrs = NetNone, nil, nil
	var ownNet bool
	h, err := p.harnessFor(ctx, key, &spec, &ownNet, false)
	if err != nil {
		return "", err
	}
	if testHookViewMade != nil {
		testHookViewMade()
	}
	p.mu.Lock()
	h.lastUsed = time.Now()
	p.mu.Unlock()
	return h.view(&spec), nil
}

// testHookViewMade, if set, runs when View has found or made its harness
// and before it answers: a test starts a command there.
var testHookViewMade func()

// Live says whether key has a harness running now, without starting one.
func (p *Pool) Live(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.hs[key]
	return h != nil && !h.isDead()
}

func (h *harnessConn) view(spec *Spec) string {
	if spec.Overlay != nil {
		return fmt.Sprintf("/proc/%d/root%s", h.pid, DaemonView)
	}
	return fmt.Sprintf("/proc/%d/root%s", h.pid, spec.Workspace)
}

// Hold gives back key's harness and makes no other for key until release
// is called: the run's layers are about to change (a fork freezes its
// upper layer), and no mount of them may be left. It refuses (busy) while
// a command of the run runs or its harness is being made.
func (p *Pool) Hold(key string) (release func(), err error) {
	p.mu.Lock()
	h := p.hs[key]
	if h != nil && h.inflight > 0 && !h.isDead() || p.making[key] != nil || p.held[key] {
		p.mu.Unlock()
		return nil, paddock.Errorf(paddock.CodeBusy, "the run's sandbox is running a command; try again when it ends")
	}
	if p.held == nil {
		p.held = map[string]bool{}
	}
	p.held[key] = true
	p.mu.Unlock()
	p.release(key, true)
	return func() {
		p.mu.Lock()
		delete(p.held, key)
		p.mu.Unlock()
	}, nil
}

// Release gives back the harness of key, if it has one (a run that ends,
// is checkpointed or loses its workspace). A harness a previous daemon
// left is found through its socket.
func (p *Pool) Release(key string) { p.release(key, false) }

// release is Release; keepCgroups leaves the run's pids cgroups (it goes
// on, and its next harness takes them again), which are removed only
// once its exited processes are all released, tens of milliseconds later.
func (p *Pool) release(key string, keepCgroups bool) {
	p.stop(key)
	p.removeFiles(key, true)
	if pids := pidsFor(p.Dir); pids != nil && !keepCgroups {
		pids.removeRun(key)
	}
}

// stop ends the harness of key, this Pool's or, through its socket, one a
// previous daemon left, and waits until it is gone.
func (p *Pool) stop(key string) {
	p.mu.Lock()
	h := p.hs[key]
	delete(p.hs, key)
	p.mu.Unlock()
	if h != nil {
		h.close()
		h.waitGone(5 * time.Second)
	} else if c, err := dialHarness(p.sockPath(key)); err == nil {
		stopStale(c)
	}
}

// stopStale ends a harness no daemon holds, through a fresh connection to
// it, and waits until it is gone. It takes the harness's hello first: a
// harness greets before it reads, and one whose greeting finds the
// connection already closed goes back to waiting, for the orphan time,
// without ever reading the close it was sent.
func stopStale(c *net.UnixConn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, maxHarnessMessage)
	n, err := c.Read(buf)
	var m hmsg
	if err != nil || json.Unmarshal(buf[:n], &m) != nil || m.Hello == nil {
		return // not a harness that answers: nothing to tell
	}
	if sendMsg(c, hmsg{Op: "close"}, nil) == nil {
		// It exits on close; its end of the socket goes with it, a little
		// before the process itself is gone.
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			if _, err := c.Read(buf); err != nil {
				var ne net.Error
				if !errors.As(err, &ne) || !ne.Timeout() {
					waitPidGone(m.Hello.PID, 5*time.Second)
					return
				}
				break
			}
		}
	}
	if m.Hello.PID > 0 {
		unix.Kill(m.Hello.PID, unix.SIGKILL) // it neither listened nor left
	}
}

// removeFiles removes key's socket (and log) unless a harness serves it again.
func (p *Pool) removeFiles(key string, log bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hs[key] != nil {
		return
	}
	os.Remove(p.sockPath(key))
	if log {
		os.Remove(filepath.Join(p.Dir, key+".log"))
	}
}

// Keys lists the runs that have a harness socket in Dir, live or stale.
func (p *Pool) Keys() []string {
	ents, _ := os.ReadDir(p.Dir)
	var keys []string
	for _, e := range ents {
		if k, ok := strings.CutSuffix(e.Name(), ".sock"); ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// Close gives every harness back, those a previous daemon left that no
// command re-attached included (a daemon killed with -9 leaves them, and
// nothing serves them after this one either); the Pool runs nothing after
// it.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	hs := p.hs
	p.hs = nil
	p.mu.Unlock()
	for _, h := range hs {
		h.close()
		p.removeFiles(h.key, true)
	}
	p.Reap(func(string) bool { return false })
	if pids := pidsFor(p.Dir); pids != nil {
		for _, h := range hs {
			h.waitGone(5 * time.Second)
			pids.removeRun(h.key)
		}
		pids.sweep(func(string) bool { return false })
	}
}

// Reap gives back every harness of Dir whose run keep does not keep, at
// once and in parallel: this Pool's; those a previous daemon left, which
// it reaches through their sockets; and those it finds by their processes
// alone (their sockets removed while they ran on), which it kills. Each
// ends its commands (its pid namespace's) and exits, and its mounts (its
// mount namespace's) go with it; its socket, log and cgroups are removed.
// It returns the keys given back, in order. A harness being made
// meanwhile is left to its maker.
func (p *Pool) Reap(keep func(key string) bool) []string {
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		out []string
	)
	procs := harnessProcs(p.Dir)
	keys := p.Keys()
	for key := range procs {
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	for _, key := range keys {
		p.mu.Lock()
		making := p.making[key] != nil
		p.mu.Unlock()
		if making || keep(key) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stop(key)
			// What the socket did not reach, or reached no more.
			for _, pid := range procs[key] {
				if err := killHarness(pid, p.Dir, key); err != nil {
					p.log().Warn("a harness could not be stopped", "run", key, "pid", pid, "err", err)
				}
			}
			p.removeFiles(key, true)
			if pids := pidsFor(p.Dir); pids != nil {
				pids.removeRun(key)
			}
			mu.Lock()
			out = append(out, key)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(out)
	return out
}

func (p *Pool) reapIdle() {
	tick := time.NewTicker(min(p.idle()/4+time.Millisecond, 30*time.Second))
	defer tick.Stop()
	for range tick.C {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		var idle []*harnessConn
		for k, h := range p.hs {
			if h.inflight == 0 && time.Since(h.lastUsed) > p.idle() || h.isDead() && h.inflight == 0 {
				idle = append(idle, h)
				delete(p.hs, k)
			}
		}
		p.mu.Unlock()
		for _, h := range idle {
			p.log().Info("harness given back", "run", h.key, "idle", time.Since(h.lastUsed).Round(time.Second).String())
			h.close()
			p.removeFiles(h.key, false)
			go p.removeCgroups(h)
		}
	}
}

// removeCgroups removes the pids cgroups of h's run once h is gone,
// unless a new harness serves the run meanwhile.
func (p *Pool) removeCgroups(h *harnessConn) {
	if h.pids == nil {
		return
	}
	h.waitGone(5 * time.Second)
	p.mu.Lock()
	busy := p.hs[h.key] != nil
	p.mu.Unlock()
	if !busy {
		h.pids.removeRun(h.key)
	}
}

// start makes a new harness for key.
func (p *Pool) start(ctx context.Context, key string, spec *Spec, cfg string) (*harnessConn, error) {
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return nil, err
	}
	sock := p.sockPath(key)
	os.Remove(sock)
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("sandbox: harness socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	lf, err := ln.File()
	ln.Close()
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	logf, err := os.OpenFile(filepath.Join(p.Dir, key+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	var px *Proxy
	var up atomic.Pointer[harnessConn] // the harness, once it is up, for the proxy's decisions
	if spec.Net == NetAllow {
		px = &Proxy{Allow: spec.Allow, AllowAddrs: spec.AllowAddrs, Credentials: spec.Credentials, CA: spec.ProxyCA, UpstreamRoots: spec.UpstreamRoots, Decide: func(d ProxyDecision) {
			if h := up.Load(); h != nil {
				h.decided(d)
			}
		}}
		psock, err := px.Start(spec.UID)
		if err != nil {
			os.Remove(sock)
			return nil, fmt.Errorf("sandbox: network proxy: %w", err)
		}
		spec.ProxySocket = psock
	}
	fail := func(err error) (*harnessConn, error) {
		if px != nil {
			px.Close()
		}
		return nil, err
	}
	hs := harnessSpec{Spec: *spec, Key: key, Config: cfg, Base: netFreeHash(spec), Orphan: p.orphan()}
	hs.Argv, hs.Env = nil, nil // a harness is not a command
	hs.DaemonView = spec.Overlay != nil
	// The socket's path in argv says, in ps, which daemon and run it serves.
	proc, err := startProcess(&hs.Spec, []string{HarnessArg, sock}, true, logf, logf, lf, nil)
	if err != nil {
		os.Remove(sock)
		return fail(err)
	}
	go proc.cmd.Wait() // reap it when it ends, as long as we are its parent
	hs.PID = proc.cmd.Process.Pid
	if pids := pidsFor(p.Dir); pids != nil {
		// In the run's pids cgroup before it reads its configuration,
		// so before it can start anything.
		cg, err := pids.prepareRun(key, p.runProcs())
		if err == nil {
			err = join(cg, hs.PID)
		}
		if err != nil {
			proc.cmd.Process.Kill()
			proc.config.Close()
			os.Remove(sock)
			return fail(err)
		}
	}
	json.NewEncoder(proc.config).Encode(hs)
	proc.config.Close()
	var rep report
	derr := json.NewDecoder(proc.report).Decode(&rep)
	proc.report.Close()
	if derr != nil || !rep.Started {
		proc.cmd.Process.Kill()
		os.Remove(sock)
		switch {
		case derr != nil:
			return fail(fmt.Errorf("sandbox: the harness ended without a report: %v", derr))
		case rep.Unsupported:
			return fail(paddock.Errorf(paddock.CodeUnsupported, "the sandbox cannot be set up here: %s", rep.Error))
		}
		return fail(fmt.Errorf("sandbox: harness: %s", rep.Error))
	}
	c, err := dialHarness(sock)
	if err != nil {
		proc.cmd.Process.Kill()
		return fail(fmt.Errorf("sandbox: connect to the harness: %w", err))
	}
	h, err := p.adopt(c, key, cfg)
	if err != nil {
		proc.cmd.Process.Kill()
		return fail(err)
	}
	h.proxy = px
	up.Store(h)
	p.log().Debug("harness started", "run", key, "pid", h.pid)
	return h, nil
}

func dialHarness(sock string) (*net.UnixConn, error) {
	return net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: sock, Net: "unixpacket"})
}

// adopt reads a harness's hello and takes it over if it serves cfg;
// otherwise it tells the harness to exit.
func (p *Pool) adopt(c *net.UnixConn, key, cfg string) (*harnessConn, error) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, maxHarnessMessage)
	n, err := c.Read(buf)
	c.SetReadDeadline(time.Time{})
	var m hmsg
	if err == nil {
		err = json.Unmarshal(buf[:n], &m)
	}
	if err != nil || m.Hello == nil {
		c.Close()
		return nil, fmt.Errorf("sandbox: no hello from the harness: %v", err)
	}
	if m.Hello.Version != harnessVersion || m.Hello.Key != key || m.Hello.Config != cfg {
		sendMsg(c, hmsg{Op: "close"}, nil)
		c.Close()
		waitPidGone(m.Hello.PID, 5*time.Second)
		return nil, errors.New("sandbox: the harness serves another configuration")
	}
	h := &harnessConn{key: key, config: cfg, base: m.Hello.Base, net: Net(m.Hello.Enforcement.Net), conn: c, enf: m.Hello.Enforcement, lastUsed: time.Now(), pid: m.Hello.PID,
		pending: map[uint64]chan hmsg{}, pids: pidsFor(p.Dir), runProcs: p.runProcs()}
	h.enf.HarnessPID = h.pid
	go h.readLoop()
	return h, nil
}

var (
	errHarnessGone  = errors.New("sandbox: the harness is gone")
	errHarnessInUse = errors.New("sandbox: the harness is in use for another configuration")
)

// harnessConn is the daemon's side of one harness.
type harnessConn struct {
	key, config string
	// base is config without the network, and net the network the
	// harness has: a command asking for none under it gets its own.
	base string
	net  Net
	conn *net.UnixConn
	enf  Enforcement
	pid  int
	// pids, when set, gives each command a pids cgroup below the run's,
	// which is bounded by runProcs.
	pids     *pidsHierarchy
	runProcs int

	// guarded by Pool.mu
	inflight int
	lastUsed time.Time

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan hmsg
	dead    bool

	// An allow-list network's proxy, and where its decisions go (the
	// latest command's Decide: every command of a run records to the run).
	proxy  *Proxy
	decide func(ProxyDecision)
}

func (h *harnessConn) setDecide(f func(ProxyDecision)) {
	h.mu.Lock()
	h.decide = f
	h.mu.Unlock()
}

// decided passes a decision of the harness's proxy to the latest command's Decide.
func (h *harnessConn) decided(d ProxyDecision) {
	h.mu.Lock()
	f := h.decide
	h.mu.Unlock()
	if f != nil {
		f(d)
	}
}

func (h *harnessConn) isDead() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dead
}

func (h *harnessConn) readLoop() {
	buf := make([]byte, maxHarnessMessage)
	for {
		n, err := h.conn.Read(buf)
		var m hmsg
		if err == nil && n > 0 {
			err = json.Unmarshal(buf[:n], &m)
		} else if err == nil {
			err = errHarnessGone
		}
		h.mu.Lock()
		if err != nil {
			h.dead = true
			for id, ch := range h.pending {
				close(ch)
				delete(h.pending, id)
			}
			h.mu.Unlock()
			return
		}
		if ch := h.pending[m.ID]; ch != nil {
			ch <- m
		}
		h.mu.Unlock()
	}
}

// waitGone waits up to d for the harness process to end.
func (h *harnessConn) waitGone(d time.Duration) { waitPidGone(h.pid, d) }

// waitPidGone waits up to d for process pid to exit.
func waitPidGone(pid int, d time.Duration) {
	if pid <= 0 {
		return
	}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
	}
}

func (h *harnessConn) close() {
	sendMsg(h.conn, hmsg{Op: "close"}, nil)
	h.conn.Close()
	if h.proxy != nil {
		h.proxy.Close()
	}
}

func sendMsg(c *net.UnixConn, m hmsg, fds []int) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_, _, err = c.WriteMsgUnix(b, oob, nil)
	return err
}

// run runs one command in the harness and waits for it.
func (h *harnessConn) run(ctx context.Context, spec *Spec, ownNet bool) (*Result, error) {
	out, errb := outputs(spec)
	// The command's output: two pipes, or its terminal. closeOurs closes
	// the daemon's ends of what the harness is handed; waitOutput then
	// waits for the command's output to end.
	var fds []int
	var closeOurs, waitOutput func()
	var term *terminal
	if spec.Terminal != nil {
		var err error
		if term, err = openTerminal(spec, out); err != nil {
			return nil, err
		}
		defer term.close()
		fds = []int{int(term.slave.Fd())}
		closeOurs, waitOutput = term.handedOver, term.wait
	} else {
		var err error
		if fds, closeOurs, waitOutput, err = outputPipes(out, errb); err != nil {
			return nil, err
		}
	}
	ch := make(chan hmsg, 2)
	h.mu.Lock()
	h.nextID++
	id := h.nextID
	dead := h.dead
	if !dead {
		h.pending[id] = ch
	}
	h.mu.Unlock()
	limits := spec.Limits
	var stdin *os.File
	var err error
	feed := func() {}
	if term == nil {
		var stop func()
		if stdin, feed, stop, err = inputPipe(spec); err != nil {
			closeOurs()
			waitOutput()
			h.forget(id)
			return nil, err
		}
		if stdin != nil {
			defer stop()
			defer stdin.Close()
			fds = append([]int{int(stdin.Fd())}, fds...)
		}
	}
	scope := ProcsPerUID
	var usage func() cgroupUsage
	if h.pids != nil && !dead {
		// The command joins a cgroup of its own between fork and exec.
		dev := diskOf(spec)
		limits = h.pids.held(limits, dev)
		cg, procs, cerr := h.pids.command(h.key, limits, dev, h.runProcs)
		if cerr != nil {
			closeOurs()
			waitOutput()
			h.forget(id)
			return nil, cerr
		}
		defer removeCgroup(cg)
		defer procs.Close()
		fds, scope = append(fds, int(procs.Fd())), ProcsPerCommand
		usage = func() cgroupUsage { return h.pids.usage(cg) }
	} else {
		limits = (*pidsHierarchy)(nil).held(limits, "")
	}
	start := time.Now()
	if !dead {
		err = sendMsg(h.conn, hmsg{Op: "exec", ID: id, Stdin: stdin != nil, Tty: term != nil, Argv: spec.Argv, Env: spec.Env, Dir: spec.Dir, Limits: &limits, OwnNet: ownNet}, fds)
	}
	closeOurs() // the harness has its copies once sent
	if stdin != nil {
		stdin.Close()
	}
	if dead || err != nil {
		waitOutput()
		return nil, errHarnessGone
	}
	stop := context.AfterFunc(ctx, func() { sendMsg(h.conn, hmsg{Op: "kill", ID: id}, nil) })
	defer stop()
	first, ok := <-ch
	if !ok {
		waitOutput()
		return nil, errHarnessGone // before the command started: the caller may retry
	}
	if !first.Started {
		waitOutput()
		h.forget(id)
		return nil, notStarted(first)
	}
	feed()
	if term != nil {
		term.start(terminalInput(spec), spec.Terminal.Resize)
	}
	done, ok := <-ch
	h.forget(id)
	waitOutput()
	res := &Result{Duration: time.Since(start), Stdout: out.bytes(), Stderr: errb.bytes(),
		Truncated: out.truncated || errb.truncated, Enforcement: h.enforcement(limits, scope, ownNet)}
	if !ok {
		// The harness died under the command (killed from outside): the
		// command died with it.
		res.ExitCode, res.Signal = 128+int(syscall.SIGKILL), syscall.SIGKILL.String()
		res.TimedOut = ctx.Err() == nil && time.Since(start) >= limits.Wall
		return res, nil
	}
	res.ExitCode, res.Signal, res.TimedOut, res.CPU, res.MaxRSS = done.ExitCode, done.Signal, done.TimedOut, done.CPU, done.MaxRSS
	if usage != nil {
		res.account(usage())
	}
	res.Denied = denials(res)
	return res, nil
}

// outputBufs are the buffers outputPipes' copies read into, kept from
// command to command: two of 64 KiB a command were more than half of
// what an exec through the API allocated. What reads into one hands it
// only to Write, which keeps none of it (io.Writer).
var outputBufs = sync.Pool{New: func() any {
	b := make([]byte, 64<<10)
	return &b
}}

// outputPipes are a command's stdout and stderr: pipes copied into out and
// errb. fds are the ends the harness is handed, closeOurs closes the
// daemon's copies of them, and waitOutput waits for both copies to end.
func outputPipes(out, errb *capped) (fds []int, closeOurs, waitOutput func(), err error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, nil, nil, err
	}
	var copies sync.WaitGroup
	for _, c := range []struct {
		r *os.File
		w *capped
	}{{outR, out}, {errR, errb}} {
		copies.Add(1)
		go func() {
			defer copies.Done()
			defer c.r.Close()
			bp := outputBufs.Get().(*[]byte)
			defer outputBufs.Put(bp)
			buf := *bp
			for {
				n, err := c.r.Read(buf)
				c.w.Write(buf[:n])
				if err != nil {
					return
				}
			}
		}()
	}
	return []int{int(outW.Fd()), int(errW.Fd())}, func() { outW.Close(); errW.Close() }, copies.Wait, nil
}

// notStarted is the error for a command the harness could not start.
func notStarted(m hmsg) error {
	switch m.Code {
	case 127:
		return paddock.Errorf(paddock.CodeBadRequest, "%s", strings.TrimPrefix(m.Error, "exec: "))
	case 126:
		return paddock.Errorf(paddock.CodeBadRequest, "the command cannot be run: %s", m.Error)
	}
	return fmt.Errorf("sandbox: harness: %s", m.Error)
}

// enforcement is what confines a command the harness runs: the harness's
// own, with the command's limits and pids scope, and its own network
// namespace with only a loopback when ownNet.
func (h *harnessConn) enforcement(limits Limits, scope string, ownNet bool) Enforcement {
	e := h.enf
	e.Limits = limits
	e.ProcsScope = scope
	e.Mode = "resident"
	if ownNet {
		e.Net, e.Allow, e.AllowAddrs, e.OwnNet = string(NetNone), nil, nil, true
		e.Namespaces = append(slices.DeleteFunc(slices.Clone(e.Namespaces), func(s string) bool { return s == "net" }), "net")
	}
	e.Holds = holds(&e)
	return e
}

func (h *harnessConn) forget(id uint64) {
	h.mu.Lock()
	delete(h.pending, id)
	h.mu.Unlock()
}
