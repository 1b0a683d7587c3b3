//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock"
	"golang.org/x/sys/unix"
)

// forcePathOpen makes Run take the unprivileged daemon's way to the
// workspace even as root, so that tests cover it.
var forcePathOpen = false

// TruncatedMarker ends output that hit its limit.
const TruncatedMarker = "\n[paddock: output truncated at the limit]\n"

// Run runs spec's command confined, and returns how it ended. A command
// that fails is not an error; a sandbox that cannot be set up is (code
// unsupported when this machine lacks a mechanism the spec needs).
func Run(ctx context.Context, spec Spec) (*Result, error) {
	if err := prepare(&spec); err != nil {
		return nil, err
	}
	return runFresh(ctx, spec)
}

// prepare checks a spec and fills in its defaults.
func prepare(spec *Spec) error {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return paddock.Errorf(paddock.CodeBadRequest, "no command to run")
	}
	if !filepath.IsAbs(spec.Workspace) {
		return paddock.Errorf(paddock.CodeBadRequest, "the workspace path must be absolute")
	}
	if spec.Net == "" {
		spec.Net = NetNone
	}
	switch spec.Net {
	case NetNone, NetHost:
		if len(spec.Allow) > 0 || len(spec.AllowAddrs) > 0 {
			return paddock.Errorf(paddock.CodeBadRequest, "an allow-list needs network allow")
		}
	case NetAllow:
		if err := ValidateDomains(spec.Allow); err != nil {
			return paddock.Errorf(paddock.CodeBadRequest, "network allow-list: %v", err)
		}
	default:
		return paddock.Errorf(paddock.CodeBadRequest, "unknown network policy %q (none, allow or host)", spec.Net)
	}
	if filepath.IsAbs(spec.Dir) || filepath.Clean("/"+spec.Dir) != "/"+filepath.Clean(spec.Dir) && spec.Dir != "" {
		return paddock.Errorf(paddock.CodeBadRequest, "the working directory must be relative to the workspace and stay inside it")
	}
	if spec.UID == 0 {
		spec.UID, spec.GID = os.Getuid(), os.Getgid()
	}
	if spec.UID == 0 {
		return paddock.Errorf(paddock.CodeUnsupported,
			"the daemon runs as root and no unprivileged user was given for commands; commands never run as root")
	}
	if spec.GID == 0 {
		spec.GID = spec.UID
	}
	spec.Limits = withDefaults(spec.Limits)
	if err := checkBinds(spec); err != nil {
		return err
	}
	if why := uncovered(spec, specRights(spec)); why != "" && !spec.AllowDegraded {
		return paddock.Errorf(paddock.CodeUnsupported, "%s (see paddock doctor)", why)
	}
	return nil
}

// sandboxProcess is a helper or harness process being started: the host
// writes the spec to config and reads the process's report from report.
type sandboxProcess struct {
	cmd    *exec.Cmd
	config *os.File
	report *os.File
	// feedStdin starts writing the command's input into its stdin pipe;
	// stopStdin closes the pipe from our end (see inputPipe).
	feedStdin, stopStdin func()
	// locks hold a per-exec command's layers (openLayers) until it ends.
	locks []*os.File
}

// startProcess re-executes this binary with args (HelperArg, HarnessArg…) in
// the sandbox's new namespaces, as the spec's uid, with the workspace
// handed over (descriptor 5, or 7–9 for an overlay's layers) and a
// harness's listener (6). The caller writes the spec to p.config and then
// reads p.report. A helper given a terminal (tty, the slave) has it as its
// stdin, stdout and stderr and as its controlling terminal.
func startProcess(spec *Spec, args []string, persistent bool, stdout, stderr io.Writer, listener, tty *os.File) (*sandboxProcess, error) {
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer cfgR.Close()
	repR, repW, err := os.Pipe()
	if err != nil {
		cfgW.Close()
		return nil, err
	}
	defer repW.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		cfgW.Close()
		repR.Close()
		return nil, err
	}
	defer devnull.Close()
	ws, layers, err := openWorkspace(spec)
	if err != nil {
		cfgW.Close()
		repR.Close()
		return nil, err
	}
	defer closeFiles(layers)
	defer ws.Close()
	if listener == nil {
		listener = devnull
	}

	// Descriptors at fixed places: the layers' two slots always (devnull
	// without an overlay), then one per bind, then an overlay's frozen
	// layers.
	extra := []*os.File{cfgR, repW, ws, listener}
	for len(layers) < 2 {
		layers = append(layers, devnull)
	}
	extra = append(extra, layers[:2]...)
	binds, err := openBinds(spec)
	if err != nil {
		cfgW.Close()
		repR.Close()
		return nil, err
	}
	defer closeFiles(binds)
	extra = append(extra, binds...)
	// An overlay's frozen layers (fdBinds+len(spec.Binds) on), then the
	// upper directories of the binds that are layers (fdBindUpper).
	extra = append(extra, layers[2:]...)
	uppers, locks, err := openLayers(spec, devnull)
	if err != nil {
		cfgW.Close()
		repR.Close()
		return nil, err
	}
	defer closeUppers(uppers, devnull)
	extra = append(extra, uppers...)
	if persistent {
		// A harness holds its layers for its life: the locks go with it
		// (they outlive this daemon with it), and nothing refers to them.
		extra = append(extra, locks...)
		defer closeFiles(locks)
		locks = nil
	}

	attr := helperAttr(spec, persistent)
	// The helper becomes the command: its stdin is the command's. A
	// harness keeps /dev/null and is handed each command's own.
	var stdin io.Reader = devnull
	feedStdin, stopStdin := func() {}, func() {}
	if !persistent && tty == nil {
		r, feed, stop, err := inputPipe(spec)
		if err != nil {
			cfgW.Close()
			repR.Close()
			closeFiles(locks)
			return nil, err
		}
		if r != nil {
			defer r.Close()
			stdin, feedStdin, stopStdin = r, feed, stop
		}
	}
	if tty != nil {
		// Setsid above makes the helper a session leader; the terminal
		// becomes its controlling terminal, and the command's.
		stdin, stdout, stderr = tty, tty, tty
		attr.Setctty, attr.Ctty = true, 0
	}
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        append([]string{"paddock-sandbox"}, args...),
		Env:         []string{},
		Dir:         "/",
		Stdin:       stdin,
		Stdout:      stdout,
		Stderr:      stderr,
		ExtraFiles:  extra,
		SysProcAttr: attr,
	}
	if err := cmd.Start(); err != nil {
		stopStdin()
		cfgW.Close()
		repR.Close()
		closeFiles(locks)
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSPC) {
			return nil, paddock.Errorf(paddock.CodeUnsupported, "cannot create the sandbox's namespaces (%v): user namespaces are disabled or restricted here (see paddock doctor)", err)
		}
		return nil, fmt.Errorf("sandbox: start helper: %w", err)
	}
	return &sandboxProcess{cmd: cmd, config: cfgW, report: repR, feedStdin: feedStdin, stopStdin: stopStdin, locks: locks}, nil
}

// openWorkspace opens what the helper mounts as the workspace: a detached
// copy of the workspace's mount or, for an overlay, /dev/null in its place
// and the overlay's layers. Where the daemon may not make detached copies
// it opens paths instead and sets spec.OpenByPath. The caller closes ws and
// the layers.
func openWorkspace(spec *Spec) (ws *os.File, layers []*os.File, err error) {
	// A detached copy of the workspace's mount, which the helper attaches in
	// its own mount namespace: the command's uid may not be able to walk the
	// path to the workspace (a root daemon's state directory is 0700).
	// Without CAP_SYS_ADMIN (an unprivileged daemon) there is no detached
	// copy; the helper, running as the daemon's uid, opens the path itself.
	wsfd, err := -1, error(syscall.EPERM)
	if spec.Overlay != nil {
		// Detached copies of the lower layer and of the directory holding
		// upper and work (overlayfs wants those two on one mount), which
		// the sandbox attaches in its own mount namespace: overlayfs takes
		// only layers mounted there. Without CAP_SYS_ADMIN the sandbox,
		// running as the daemon's uid, opens them by path.
		// Then the frozen layers stacked between them, if any, which are
		// handed over after the binds.
		dirs := append([]string{spec.Overlay.Lower, filepath.Dir(spec.Overlay.Upper)}, spec.Overlay.Frozen...)
		for _, d := range dirs {
			fd, err := -1, error(syscall.EPERM)
			if !forcePathOpen {
				fd, err = unix.OpenTree(unix.AT_FDCWD, d, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
			}
			if errors.Is(err, syscall.EPERM) {
				spec.OpenByPath = true
				fd, err = unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			}
			if err != nil {
				closeFiles(layers)
				return nil, nil, paddock.Errorf(paddock.CodeConflict, "the workspace's layers are missing (%v)", err)
			}
			layers = append(layers, os.NewFile(uintptr(fd), "layer"))
		}
		wsfd, err = unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	} else if !forcePathOpen {
		wsfd, err = unix.OpenTree(unix.AT_FDCWD, spec.Workspace, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	}
	if errors.Is(err, syscall.EPERM) {
		spec.OpenByPath = true
		wsfd, err = unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		closeFiles(layers)
		return nil, nil, paddock.Errorf(paddock.CodeConflict, "the workspace is missing")
	}
	return os.NewFile(uintptr(wsfd), "workspace"), layers, nil
}

// helperAttr is how the helper is started: in namespaces of its own (a
// network one unless the spec's network is the host's), as the spec's uid
// with ambient capabilities in its user namespace only, and, unless it is
// a persistent harness, killed when the daemon's thread ends.
func helperAttr(spec *Spec, persistent bool) *syscall.SysProcAttr {
	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	if spec.Net != NetHost {
		flags |= unix.CLONE_NEWNET
	}
	attr := &syscall.SysProcAttr{
		Cloneflags:                 flags,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: spec.UID, HostID: spec.UID, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: spec.GID, HostID: spec.GID, Size: 1}},
		GidMappingsEnableSetgroups: false,
		Credential:                 &syscall.Credential{Uid: uint32(spec.UID), Gid: uint32(spec.GID), NoSetGroups: true},
		AmbientCaps:                ambientCaps,
		Setsid:                     true,
	}
	if !persistent {
		attr.Pdeathsig = syscall.SIGKILL
	}
	return attr
}

// openLayers makes and opens the upper directory of each bind that is a
// copy-on-write layer (Bind.Upper), as openBinds opens sources, and locks
// it (flock on Upper) for the sandbox about to mount it: overlayfs must
// not mount one upper twice at once (a second mount empties the first's
// work directory). A layer held by another sandbox of the run (its
// harness, a command of its own) is Throwaway for this one: it gets an
// upper in memory instead, and its slot holds filler. spec.Binds is copied
// before it changes: it is the caller's.
func openLayers(spec *Spec, filler *os.File) (uppers, locks []*os.File, err error) {
	fail := func(err error) ([]*os.File, []*os.File, error) {
		closeUppers(uppers, filler)
		closeFiles(locks)
		return nil, nil, err
	}
	copied := false
	for i, b := range spec.Binds {
		if b.Upper == "" {
			continue
		}
		if b.Throwaway {
			uppers = append(uppers, filler)
			continue
		}
		if err := makeLayer(b.Upper, spec.UID, spec.GID); err != nil {
			return fail(paddock.Errorf(paddock.CodeConflict, "the layer of %s cannot be made in %s (%v)", b.Target, b.Upper, err))
		}
		lock, err := os.Open(b.Upper)
		if err != nil {
			return fail(fmt.Errorf("sandbox: open the layer of %s: %w", b.Target, err))
		}
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			lock.Close()
			if !errors.Is(err, unix.EWOULDBLOCK) {
				return fail(fmt.Errorf("sandbox: lock the layer of %s: %w", b.Target, err))
			}
			if !copied {
				spec.Binds, copied = slices.Clone(spec.Binds), true
			}
			spec.Binds[i].Throwaway = true
			uppers = append(uppers, filler)
			continue
		}
		locks = append(locks, lock)
		fd, err := -1, error(syscall.EPERM)
		if !forcePathOpen {
			fd, err = unix.OpenTree(unix.AT_FDCWD, b.Upper, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		}
		if errors.Is(err, syscall.EPERM) {
			spec.OpenByPath = true
			fd, err = unix.Open(b.Upper, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			return fail(paddock.Errorf(paddock.CodeConflict, "the layer of %s in %s is missing (%v)", b.Target, b.Upper, err))
		}
		uppers = append(uppers, os.NewFile(uintptr(fd), "layer"))
	}
	return uppers, locks, nil
}

// makeLayer makes a layer's directory and its upper and work directories
// where they are missing, for uid (a root daemon's are handed over).
func makeLayer(dir string, uid, gid int) error {
	for _, d := range []string{dir, filepath.Join(dir, "upper"), filepath.Join(dir, "work")} {
		if err := os.Mkdir(d, 0o755); errors.Is(err, os.ErrExist) {
			continue
		} else if err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(d, uid, gid); err != nil {
				return err
			}
		}
	}
	return nil
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// closeUppers closes openLayers' uppers but not the filler among them.
func closeUppers(uppers []*os.File, filler *os.File) {
	for _, f := range uppers {
		if f != filler {
			f.Close()
		}
	}
}

// openBinds opens each bind's source as the workspace is: a detached copy
// of its mount where the daemon may make one, else a descriptor (O_PATH)
// the sandbox binds by path (spec.OpenByPath then says so).
func openBinds(spec *Spec) ([]*os.File, error) {
	var out []*os.File
	for _, b := range spec.Binds {
		fd, err := -1, error(syscall.EPERM)
		if !forcePathOpen {
			fd, err = unix.OpenTree(unix.AT_FDCWD, b.Source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		}
		if errors.Is(err, syscall.EPERM) {
			spec.OpenByPath = true
			fd, err = unix.Open(b.Source, unix.O_PATH|bindOpenFlags(b)|unix.O_CLOEXEC, 0)
		}
		if err == nil {
			var st unix.Stat_t
			if err = unix.Fstat(fd, &st); err == nil && (st.Mode&unix.S_IFMT == unix.S_IFDIR) == b.File {
				unix.Close(fd)
				err = fmt.Errorf("not a %s", map[bool]string{true: "regular file", false: "directory"}[b.File])
			}
		}
		if err != nil {
			for _, f := range out {
				f.Close()
			}
			return nil, paddock.Errorf(paddock.CodeConflict, "%s, shown in the sandbox at %s, is missing (%v)", b.Source, b.Target, err)
		}
		out = append(out, os.NewFile(uintptr(fd), "bind"))
	}
	return out, nil
}

// checkBinds refuses a bind the view could not show as asked: not
// absolute, inside the workspace or a system directory (which are
// read-only binds of the host's), or on /proc, /dev or /tmp.
func checkBinds(spec *Spec) error {
	if len(spec.Binds) > MaxBinds {
		return paddock.Errorf(paddock.CodeBadRequest, "at most %d binds", MaxBinds)
	}
	if spec.Overlay != nil {
		if len(spec.Overlay.Frozen) > MaxFrozen {
			return paddock.Errorf(paddock.CodeBadRequest, "at most %d frozen layers", MaxFrozen)
		}
		for _, d := range spec.Overlay.Frozen {
			if !filepath.IsAbs(d) || filepath.Clean(d) != d || strings.ContainsAny(d, ":,\\") {
				return paddock.Errorf(paddock.CodeBadRequest, "frozen layer %q: must be an absolute, clean path", d)
			}
		}
	}
	// Below /tmp is fine (the private /tmp is mounted first, a bind is made
	// inside it, as a workspace under /tmp is), /tmp itself is not.
	reserved := append([]string{"/proc", "/dev", spec.Workspace, DaemonView, "/run/paddock/proxy.sock"}, systemDirs...)
	for _, b := range spec.Binds {
		t := filepath.Clean(b.Target)
		if !filepath.IsAbs(b.Source) || !filepath.IsAbs(b.Target) || t != b.Target || t == "/" || t == "/tmp" {
			return paddock.Errorf(paddock.CodeBadRequest, "bind %s on %s: both must be absolute and clean, and not /tmp itself", b.Source, b.Target)
		}
		for _, r := range reserved {
			if t == r || strings.HasPrefix(t, r+"/") || strings.HasPrefix(r, t+"/") {
				return paddock.Errorf(paddock.CodeBadRequest, "bind on %s: it would cover or sit in %s", t, r)
			}
		}
		if b.Upper == "" {
			continue
		}
		u, src := filepath.Clean(b.Upper), filepath.Clean(b.Source)
		switch {
		case b.ReadOnly || b.File:
			return paddock.Errorf(paddock.CodeBadRequest, "bind on %s: a copy-on-write layer is a writable directory", t)
		case !filepath.IsAbs(b.Upper) || u != b.Upper || u == "/":
			return paddock.Errorf(paddock.CodeBadRequest, "bind on %s: its layer %q must be an absolute, clean path", t, b.Upper)
		case u == src || strings.HasPrefix(u, src+"/") || strings.HasPrefix(src, u+"/"):
			return paddock.Errorf(paddock.CodeBadRequest, "bind on %s: its layer %s and its source %s overlap", t, u, src)
		}
	}
	return nil
}

// perExecCgroups names the pids cgroups of commands run per-exec.
const perExecCgroups = "per-exec"

// runFresh runs a prepared spec in a helper of its own.
func runFresh(ctx context.Context, spec Spec) (*Result, error) {
	if spec.Net == NetAllow {
		px, err := startProxy(&spec)
		if err != nil {
			return nil, err
		}
		defer px.Close()
	}
	out, errb := outputs(&spec)
	var term *terminal
	var tty *os.File
	if spec.Terminal != nil {
		var err error
		if term, err = openTerminal(&spec, out); err != nil {
			return nil, err
		}
		defer term.close()
		tty = term.slave
	}
	start := time.Now()
	p, err := startProcess(&spec, []string{HelperArg}, false, out, errb, nil, tty)
	if term != nil {
		term.handedOver()
	}
	if err != nil {
		return nil, err
	}
	cmd, repR := p.cmd, p.report
	defer repR.Close()
	defer closeFiles(p.locks) // after Wait, below: the command's layers are free again
	defer p.stopStdin()
	p.feedStdin()
	if term != nil {
		term.start(terminalInput(&spec), spec.Terminal.Resize)
	}
	pids := pidsFor(perExecCgroups)
	dev := diskOf(&spec)
	spec.Limits = pids.held(spec.Limits, dev)
	var usage func() cgroupUsage
	if pids != nil {
		// In a cgroup of its own before it reads its spec, so before it
		// starts anything; the per-exec group itself is unbounded, so
		// that no run's commands starve another's.
		cg, err := pids.enter(perExecCgroups, spec.Limits, dev, 0, cmd.Process.Pid)
		if err != nil {
			cmd.Process.Kill()
			p.config.Close()
			cmd.Wait()
			return nil, err
		}
		defer pids.removeCommand(cg)
		spec.ProcsCgroup = true
		usage = func() cgroupUsage { return pids.usage(cg) }
	}
	json.NewEncoder(p.config).Encode(spec)
	p.config.Close()

	// The wall limit kills the helper, which is the pid namespace's init:
	// every process the command started dies with it.
	timedOut := false
	var once sync.Once
	kill := func() { once.Do(func() { cmd.Process.Signal(syscall.SIGKILL) }) }
	timer := time.AfterFunc(spec.Limits.Wall, func() { timedOut = true; kill() })
	stop := context.AfterFunc(ctx, kill)
	repDone := readReports(repR)
	waitErr := cmd.Wait()
	timer.Stop()
	stop()
	reps := <-repDone
	if term != nil {
		term.wait() // what the command wrote last, up to the terminal's end
	}

	res := &Result{Duration: time.Since(start), Stdout: out.bytes(), Stderr: errb.bytes(),
		Truncated: out.truncated || errb.truncated, TimedOut: timedOut}
	if usage != nil {
		res.account(usage())
	}
	if reps.err != nil {
		if !timedOut && ctx.Err() == nil {
			return nil, fmt.Errorf("sandbox: the helper ended without a report (%v): %s", waitErr, bytes.TrimSpace(errb.bytes()))
		}
		// Killed (the wall limit, a cancellation) before it reported.
		res.ExitCode, res.Signal = 128+int(syscall.SIGKILL), syscall.SIGKILL.String()
		res.Enforcement.Namespaces = []string{"unknown: killed before reporting"}
		return res, nil
	}
	return commandResult(res, reps.list, cmd.ProcessState)
}

// startProxy starts the network proxy of an allow network and points the
// spec's command at it. The caller closes it.
func startProxy(spec *Spec) (*Proxy, error) {
	px := &Proxy{Allow: spec.Allow, AllowAddrs: spec.AllowAddrs, Decide: spec.Decide,
		Credentials: spec.Credentials, CA: spec.ProxyCA, UpstreamRoots: spec.UpstreamRoots}
	sock, err := px.Start(spec.UID)
	if err != nil {
		return nil, fmt.Errorf("sandbox: network proxy: %w", err)
	}
	spec.ProxySocket = sock
	spec.Env = append(spec.Env, proxyEnv()...)
	return px, nil
}

// helperReports are what the helper reported, and err if it reported
// nothing before its pipe ended.
type helperReports struct {
	list []report
	err  error
}

// readReports reads the helper's reports until its pipe ends. The helper
// reports once before it becomes the command, and once more only if
// becoming it failed.
func readReports(r io.Reader) <-chan helperReports {
	done := make(chan helperReports, 1)
	go func() {
		var reps helperReports
		dec := json.NewDecoder(r)
		for {
			var rep report
			if err := dec.Decode(&rep); err != nil {
				if len(reps.list) == 0 {
					reps.err = err
				}
				done <- reps
				return
			}
			reps.list = append(reps.list, rep)
		}
	}()
	return done
}

// commandResult completes res from the helper's reports (at least one)
// and, once the helper became the command, the command's process state.
func commandResult(res *Result, reps []report, ps *os.ProcessState) (*Result, error) {
	rep := reps[len(reps)-1]
	res.Enforcement = reps[0].Enforcement
	if !rep.Started {
		switch {
		case rep.Unsupported:
			return nil, paddock.Errorf(paddock.CodeUnsupported, "the sandbox cannot be set up here: %s", rep.Error)
		case rep.ExitCode == 127:
			return nil, paddock.Errorf(paddock.CodeBadRequest, "%s", rep.Error)
		case rep.ExitCode == 126:
			return nil, paddock.Errorf(paddock.CodeBadRequest, "the command cannot be run: %s", rep.Error)
		}
		return nil, fmt.Errorf("sandbox: %s", rep.Error)
	}
	// The helper became the command: its status and resource use are the command's.
	if ps != nil {
		ws := ps.Sys().(syscall.WaitStatus)
		res.ExitCode = ws.ExitStatus()
		if ws.Signaled() {
			res.Signal = ws.Signal().String()
			res.ExitCode = 128 + int(ws.Signal())
		}
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			res.CPU = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
			res.MaxRSS = ru.Maxrss * 1024
		}
	}
	res.Denied = denials(res)
	return res, nil
}

// denials reports what the output says the sandbox refused. The kernel does
// not tell a process why an EPERM or EACCES happened; these are the messages
// libc prints for them, as a hint, not a proof.
func denials(r *Result) []string {
	if r.ExitCode == 0 {
		return nil
	}
	said := func(s string) bool { return bytes.Contains(r.Stderr, []byte(s)) || bytes.Contains(r.Stdout, []byte(s)) }
	var out []string
	for msg, what := range map[string]string{
		"Operation not permitted": "an operation the sandbox forbids (seccomp or a missing capability)",
		"Permission denied":       "a file or network access outside what the sandbox allows (Landlock)",
		"Read-only file system":   "a write to a read-only part of the sandbox's view",
		"Network is unreachable":  "network access while the sandbox's network is off",
	} {
		if said(msg) {
			out = append(out, "possibly denied by the sandbox: "+what+" ("+msg+")")
		}
	}
	// A protected path that did not exist is an empty directory mounted
	// read-only: a write to it says "Is a directory", not what it is.
	if said("Is a directory") || said("Read-only file system") || said("Device or resource busy") || said("Not a directory") {
		for _, p := range r.Enforcement.ReadOnlyIn {
			if said(p) {
				out = append(out, "denied by the sandbox: "+p+" is a protected path, read-only in this view (one that did not exist is an empty directory there)")
			}
		}
	}
	return out
}

// capped keeps at most limit bytes and drains the rest, so a command that
// floods its output is cut, not blocked.
// LiveKeep is how much of each stream a LiveOnly command's Result keeps
// (enough for the helper's own messages about a failed start).
const LiveKeep = 64 << 10

// outputs are the capped writers of a command's stdout and stderr.
func outputs(spec *Spec) (out, errb *capped) {
	keep := spec.Limits.Output
	if spec.LiveOnly && (spec.Stdout != nil || spec.Stderr != nil) {
		keep = min(keep, LiveKeep)
	}
	return &capped{limit: spec.Limits.Output, keep: keep, live: spec.Stdout},
		&capped{limit: spec.Limits.Output, keep: keep, live: spec.Stderr}
}

// capped passes a stream on up to its limit, and holds at most keep bytes
// of it in memory: memory is bounded by keep whatever the command writes.
type capped struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	limit     int64 // bytes passed on
	keep      int64 // bytes held in buf
	n         int64 // bytes passed on so far
	truncated bool
	live      io.Writer // also gets what passes, as it comes
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	passed := p
	if room := c.limit - c.n; room > 0 {
		if int64(len(p)) > room {
			passed = p[:room]
			c.truncated = true
		}
	} else {
		passed = nil
		c.truncated = c.truncated || len(p) > 0
	}
	c.n += int64(len(passed))
	if room := c.keep - int64(c.buf.Len()); room > 0 {
		c.buf.Write(passed[:min(int64(len(passed)), room)])
	}
	if c.live != nil && len(passed) > 0 {
		c.live.Write(passed) // a slow or gone reader must not stop the command
	}
	return len(p), nil
}

func (c *capped) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := bytes.Clone(c.buf.Bytes())
	if c.truncated {
		b = append(b, TruncatedMarker...)
	}
	return b
}

var _ io.Writer = (*capped)(nil)

// ambientCaps are what a helper or harness holds in its own user namespace
// while it builds the view: mounts, the loopback, and the file capabilities
// overlayfs uses on the mounter's behalf (its work directory is made mode
// 000). They reach only files of the sandbox's uid, the one id mapped; every
// command starts with none.
var ambientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_CHOWN, unix.CAP_MKNOD}

// bindOpenFlags are the flags a bind's source is opened by path with.
func bindOpenFlags(b Bind) int {
	if b.File {
		return unix.O_NOFOLLOW
	}
	return unix.O_DIRECTORY
}
