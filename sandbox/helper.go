package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Descriptors the host hands the helper, after 0–2.
const (
	fdConfig    = 3 // the Spec, as JSON; closed by the host after writing
	fdReport    = 4 // the helper's report, as JSON
	fdWorkspace = 5 // the workspace directory, opened by the host (O_PATH)
	fdListener  = 6 // a harness's listening socket (/dev/null for the helper)
	fdLower     = 7 // an overlay's lower layer, a detached mount made by the host
	fdUpperWork = 8 // the directory of its upper and work directories, likewise
	fdBinds     = 9 // Spec.Binds' sources, in order, likewise

)

// report is what the helper tells the host, as one JSON object before it
// becomes the command, and a second one only if that failed.
type report struct {
	Enforcement Enforcement `json:"enforcement"`
	Started     bool        `json:"started"`
	Error       string      `json:"error,omitempty"`
	Unsupported bool        `json:"unsupported,omitempty"`
	ExitCode    int         `json:"exit_code"`
}

// HelperMain is the helper process: it never returns. It runs in the new
// namespaces, as the command's uid with CAP_SYS_ADMIN (and CAP_NET_ADMIN)
// in its own user namespace only. It builds the view, locks itself down,
// sets the limits and then becomes the command (execve): the command is the
// pid namespace's init, so when it ends every process it left behind dies,
// and the limits bind the command alone, not a Go runtime beside it.
func HelperMain() {
	// Whatever the helper inherited beyond 0–2 (the config and report pipes
	// among them) must not reach the command: a command holding the report
	// pipe could forge its own result.
	unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	rep := &report{}
	out := os.NewFile(fdReport, "report")
	send := func() { json.NewEncoder(out).Encode(rep) }
	fail := func(code int) {
		send()
		out.Close()
		os.Exit(code)
	}
	var spec Spec
	cfg := os.NewFile(fdConfig, "config")
	if err := json.NewDecoder(cfg).Decode(&spec); err != nil {
		rep.Error = "reading the sandbox spec: " + err.Error()
		fail(125)
	}
	cfg.Close()
	spec.Limits = withDefaults(spec.Limits)
	if err := setup(&spec, &rep.Enforcement); err != nil {
		rep.Error = err.Error()
		var ue unsupportedError
		rep.Unsupported = errors.As(err, &ue)
		fail(125)
	}
	path, err := commandPath(&spec)
	if err != nil {
		rep.Error, rep.ExitCode = err.Error(), 127
		fail(127)
	}
	if err := unix.Chdir(filepath.Join(spec.Workspace, spec.Dir)); err != nil {
		rep.Error, rep.ExitCode = fmt.Sprintf("cannot enter %s: %v", spec.Dir, err), 127
		fail(127)
	}
	rep.Started = true
	send()
	if err := limit(spec.Limits, spec.ProcsCgroup); err != nil {
		rep.Started, rep.Error, rep.ExitCode = false, err.Error(), 125
		fail(125)
	}
	err = unix.Exec(path, spec.Argv, spec.Env)
	rep.Started, rep.Error, rep.ExitCode = false, fmt.Sprintf("%s: %v", spec.Argv[0], err), 126
	fail(126)
}

type unsupportedError struct{ msg string }

func (e unsupportedError) Error() string { return e.msg }

// commandPath resolves the command with the PATH of the Spec's environment.
func commandPath(spec *Spec) (string, error) {
	p := spec.Argv[0]
	if strings.Contains(p, "/") {
		return p, nil
	}
	for _, kv := range spec.Env {
		if dirs, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, d := range filepath.SplitList(dirs) {
				cand := filepath.Join(d, p)
				if fi, err := os.Stat(cand); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
					return cand, nil
				}
			}
		}
	}
	return "", fmt.Errorf("%s: command not found in the sandbox's PATH", p)
}

// systemDirs are mounted read-only at their own paths when they exist.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc"}

// devNodes are bound from the host into the minimal /dev.
var devNodes = []string{"null", "zero", "full", "random", "urandom"}

// setup builds the view and locks the helper down; what it enforced goes into e.
func setup(spec *Spec, e *Enforcement) error {
	if err := buildView(spec, e, false); err != nil {
		return err
	}
	return lockdown(spec, e)
}

// buildView makes the command's view of the file system (and its network)
// in the process's new namespaces, and makes it the process's root.
//
// persistentView says the view is a harness's, from which each command is
// forked into a mount namespace of its own (and mounts its own scratch
// layer there), rather than the one command's.
func buildView(spec *Spec, e *Enforcement, persistentView bool) error {
	e.Namespaces = []string{"user", "mount", "pid", "ipc", "uts"}
	e.Net = string(spec.Net)
	if spec.Net != NetHost {
		e.Namespaces = append(e.Namespaces, "net")
	}
	e.UID = os.Getuid()
	var err error
	e.ReadOnly = spec.ReadOnly
	e.Limits = spec.Limits
	e.ProcsScope = ProcsPerUID
	if spec.ProcsCgroup {
		e.ProcsScope = ProcsPerCommand
	}

	// The host opened the workspace: the command's uid may not be able to
	// walk the path to it (a root daemon's state directory is 0700), and a
	// tmpfs is about to be mounted over /tmp, where it may live.
	wsfd := fdWorkspace
	if spec.OpenByPath && spec.Overlay != nil {
		// The layers, by path in this mount namespace (overlayfs takes only
		// layers mounted here), before a tmpfs covers /tmp where they may be.
		for fd, dir := range map[int]string{fdLower: spec.Overlay.Lower, fdUpperWork: filepath.Dir(spec.Overlay.Upper)} {
			nfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open an overlay layer: %w", err)
			}
			if err := unix.Dup3(nfd, fd, unix.O_CLOEXEC); err != nil {
				return err
			}
			unix.Close(nfd)
		}
	}
	if spec.OpenByPath {
		// The binds' sources, by path in this mount namespace, likewise.
		for i, b := range spec.Binds {
			nfd, err := unix.Open(b.Source, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open %s: %w", b.Source, err)
			}
			if err := unix.Dup3(nfd, fdBinds+i, unix.O_CLOEXEC); err != nil {
				return err
			}
			unix.Close(nfd)
		}
	}
	if spec.OpenByPath && spec.Overlay == nil {
		unix.Close(fdWorkspace)
		var err error
		if wsfd, err = unix.Open(spec.Workspace, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return fmt.Errorf("open workspace: %w", err)
		}
	}
	defer unix.Close(wsfd)

	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// The proxy's socket, opened before /tmp (where it lives) is covered.
	proxyfd := -1
	if spec.Net == NetAllow {
		if proxyfd, err = unix.Open(spec.ProxySocket, unix.O_PATH|unix.O_CLOEXEC, 0); err != nil {
			return fmt.Errorf("open the proxy socket: %w", err)
		}
		defer unix.Close(proxyfd)
		e.Allow = spec.Allow
		for _, a := range spec.AllowAddrs {
			e.AllowAddrs = append(e.AllowAddrs, a.String())
		}
	}
	// Stage the new root in a tmpfs over /tmp (only in this mount namespace).
	if err := unix.Mount("paddock", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=16m,mode=0755"); err != nil {
		return fmt.Errorf("stage root: %w", err)
	}
	root := "/tmp/root"
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(root, root, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("stage root: %w", err)
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(d)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, root+d); err != nil {
				return err
			}
			continue
		}
		if err := bindRO(d, root+d, true); err != nil {
			return err
		}
	}
	// A private /tmp first: a workspace under /tmp is mounted inside it.
	if err := os.Mkdir(root+"/tmp", 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("tmp", root+"/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("size=%d,mode=1777", spec.Limits.Tmp)); err != nil {
		return fmt.Errorf("mount /tmp: %w", err)
	}
	// The workspace at its own path.
	wsTarget := root + spec.Workspace
	if err := os.MkdirAll(wsTarget, 0o755); err != nil {
		return err
	}
	switch {
	case spec.Overlay != nil:
		if err = mountOverlay(spec, wsTarget); err == nil && spec.DaemonView {
			// The daemon's way in (/proc/PID/root/.paddock-view): a copy
			// of the overlay's mount taken before the protected paths are
			// made read-only on it, for what the daemon itself writes (the
			// staged recipes). Landlock rules follow inodes, not paths, so
			// the workspace's rule would cover it: each command unmounts it
			// in its own mount namespace before it execs (forkexec.go).
			var vfd int
			if vfd, err = unix.OpenTree(unix.AT_FDCWD, wsTarget, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC); err == nil {
				if err = os.Mkdir(root+DaemonView, 0o700); err == nil {
					err = unix.MoveMount(vfd, "", unix.AT_FDCWD, root+DaemonView, unix.MOVE_MOUNT_F_EMPTY_PATH)
				}
				unix.Close(vfd)
			}
		}
	case spec.OpenByPath:
		err = unix.Mount(fmt.Sprintf("/proc/self/fd/%d", wsfd), wsTarget, "", unix.MS_BIND|unix.MS_REC, "")
	default:
		err = unix.MoveMount(wsfd, "", unix.AT_FDCWD, wsTarget, unix.MOVE_MOUNT_F_EMPTY_PATH)
	}
	var ue unsupportedError
	if errors.As(err, &ue) {
		return err
	}
	if err != nil {
		return fmt.Errorf("mount workspace: %w", err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	if spec.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("", wsTarget, "", flags, ""); err != nil {
		return fmt.Errorf("remount workspace: %w", err)
	}
	if spec.ReadOnly && spec.Scratch {
		// Every command of a harness gets a fresh layer (forkexec.go); the
		// place for it must exist before the root turns read-only.
		if err := os.MkdirAll(root+ScratchDir, 0o755); err != nil {
			return err
		}
		if !persistentView {
			if err := mountScratch(root+ScratchDir, wsTarget, spec.Limits.Tmp); err != nil {
				return err
			}
		}
		e.Scratch = true
	}
	if e.ReadOnlyIn, e.Unprotected, err = protect(wsTarget, spec.Protected, !spec.ReadOnly && !spec.OperatorDir, !spec.ReadOnly); err != nil {
		return err
	}
	e.Unprotected = append(e.Unprotected, spec.Unprotected...)
	if err := mountBinds(spec, root); err != nil {
		return err
	}
	if proxyfd >= 0 {
		os.MkdirAll(root+"/run/paddock", 0o755)
		f, err := os.Create(root + proxySocketInside)
		if err != nil {
			return err
		}
		f.Close()
		if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", proxyfd), root+proxySocketInside, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mount the proxy socket: %w", err)
		}
	}
	// A minimal /dev, and /proc of the new pid namespace.
	if err := os.Mkdir(root+"/dev", 0o755); err != nil {
		return err
	}
	if err := unix.Mount("dev", root+"/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,mode=0755"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, n := range devNodes {
		f, err := os.Create(root + "/dev/" + n)
		if err != nil {
			return err
		}
		f.Close()
		if err := unix.Mount("/dev/"+n, root+"/dev/"+n, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mount /dev/%s: %w", n, err)
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		os.Symlink(target, root+"/dev/"+name)
	}
	if err := unix.Mount("", root+"/dev", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("remount /dev: %w", err)
	}
	if err := os.Mkdir(root+"/proc", 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", root+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return unsupportedError{fmt.Sprintf("cannot mount /proc for the new pid namespace (%v); a container or an LSM hides /proc", err)}
	}

	// The bridge to the proxy is its own process: the helper is about to
	// become the command. Started before pivot_root, it follows the new root.
	if spec.Net == NetAllow {
		if err := startBridge(); err != nil {
			return err
		}
	}
	// Swap roots and drop the old one.
	if err := os.Mkdir(root+"/.old", 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(root, root+"/.old"); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/.old", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("drop the old root: %w", err)
	}
	os.Remove("/.old")
	if err := unix.Mount("", "/", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("remount / read-only: %w", err)
	}
	unix.Sethostname([]byte("paddock"))
	return nil
}

// mountOverlay mounts the copy-on-write view at target; it exists in this
// mount namespace only. overlayfs takes layers mounted in the mounter's
// namespace: the host's detached copies are attached under /tmp/layers
// first (the staging tmpfs, dropped with the old root once the overlay
// holds its own references), or, for an unprivileged daemon, opened by path.
func mountOverlay(spec *Spec, target string) error {
	lower, rw := fmt.Sprintf("/proc/self/fd/%d", fdLower), fmt.Sprintf("/proc/self/fd/%d", fdUpperWork)
	if !spec.OpenByPath {
		lower, rw = "/tmp/layers/lower", "/tmp/layers/rw"
		for fd, dir := range map[int]string{fdLower: lower, fdUpperWork: rw} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
				return fmt.Errorf("attach an overlay layer: %w", err)
			}
		}
	}
	defer unix.Close(fdLower)
	defer unix.Close(fdUpperWork)
	// userxattr: in a user namespace overlayfs keeps its marks (opaque
	// directories) in user.* attributes.
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,userxattr", lower,
		filepath.Join(rw, filepath.Base(spec.Overlay.Upper)), filepath.Join(rw, filepath.Base(spec.Overlay.Work)))
	if err := unix.Mount("paddock-overlay", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return unsupportedError{fmt.Sprintf("cannot mount the overlay workspace in a user namespace (%v); use kind clone", err)}
	}
	return nil
}

// mountScratch puts a writable layer that lives in a tmpfs of size bytes
// at dir over the read-only workspace at ws.
func mountScratch(dir, ws string, size int64) error {
	if err := unix.Mount("scratch", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		return fmt.Errorf("scratch layer: %w", err)
	}
	for _, d := range []string{"u", "w"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("paddock-scratch", ws, "overlay", unix.MS_NOSUID|unix.MS_NODEV, scratchOptions(dir, ws)); err != nil {
		return fmt.Errorf("scratch layer: %w", err)
	}
	return nil
}

func scratchOptions(dir, ws string) string {
	return fmt.Sprintf("lowerdir=%s,upperdir=%s/u,workdir=%s/w,userxattr", ws, dir, dir)
}

// mountBinds shows each bind's source at its target in the view being
// built at root, read-only where asked.
func mountBinds(spec *Spec, root string) error {
	for i, b := range spec.Binds {
		fd := fdBinds + i
		target := root + b.Target
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("bind %s: %w", b.Target, err)
		}
		var err error
		if spec.OpenByPath {
			err = unix.Mount(fmt.Sprintf("/proc/self/fd/%d", fd), target, "", unix.MS_BIND|unix.MS_REC, "")
		} else {
			err = unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH)
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("bind %s: %w", b.Target, err)
		}
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
		if b.ReadOnly {
			flags |= unix.MS_RDONLY
		}
		if err := unix.Mount("", target, "", flags|lockedFlags(target), ""); err != nil {
			return fmt.Errorf("remount %s: %w", b.Target, err)
		}
	}
	return nil
}

// DaemonView is where, in an overlay run's view, the daemon finds the
// workspace without its protected paths' read-only mounts.
const DaemonView = "/.paddock-view"

// proxySocketInside is where the proxy's socket appears in the view.
const proxySocketInside = "/run/paddock/proxy.sock"

// BridgeArg is argv[1] of the proxy bridge process of an "allow" network.
const BridgeArg = "__paddock-sandbox-bridge"

// startBridge brings up the namespace's loopback, listens on
// 127.0.0.1:ProxyPort and starts the bridge process with the listener.
func startBridge() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	var lc net.ListenConfig
	lc.SetMultipathTCP(false) // Landlock's TCP rules see classic TCP only
	ln, err := lc.Listen(context.Background(), "tcp4", fmt.Sprintf("127.0.0.1:%d", ProxyPort))
	if err != nil {
		return fmt.Errorf("proxy bridge: %w", err)
	}
	lf, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		return fmt.Errorf("proxy bridge: %w", err)
	}
	defer lf.Close()
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{"paddock-bridge", BridgeArg}, ExtraFiles: []*os.File{lf}}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("proxy bridge: %w", err)
	}
	return nil
}

// BridgeMain is the bridge process: it forwards every connection to the
// loopback listener it was given (descriptor 3) to the host's proxy socket.
// It drops what it does not need first: no capabilities to inherit, no new
// privileges, the same seccomp filter as the command.
func BridgeMain() {
	unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	if err := loadSeccomp(seccompPolicy()); err != nil {
		os.Exit(1)
	}
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(0)
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("unix", proxySocketInside)
			if err != nil {
				return
			}
			defer up.Close()
			go func() { io.Copy(up, c); up.(*net.UnixConn).CloseWrite() }()
			io.Copy(c, up)
		}()
	}
}

// bindRO binds src at dst read-only, without setuid or devices.
func bindRO(src, dst string, dir bool) error {
	if dst != src {
		if dir {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		} else {
			f, err := os.Create(dst)
			if err != nil {
				return err
			}
			f.Close()
		}
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if err := remountRO(dst); err != nil {
		return fmt.Errorf("remount %s read-only: %w", dst, err)
	}
	return nil
}

// remountRO makes the bind mount whose root is at read-only (and nosuid,
// nodev).
func remountRO(at string) error {
	err := unix.Mount("", at, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
	if err != nil {
		// A mount locked by the parent namespace keeps its own flags; try
		// again keeping nodev/nosuid/noexec as they were.
		if unix.Mount("", at, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|lockedFlags(at), "") == nil {
			return nil
		}
	}
	return err
}

// lockedFlags returns the flags of the mount at path that a user namespace
// may not clear.
func lockedFlags(path string) uintptr {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil {
		return 0
	}
	var f uintptr
	for bit, ms := range map[int64]uintptr{unix.ST_NOSUID: unix.MS_NOSUID, unix.ST_NODEV: unix.MS_NODEV,
		unix.ST_NOEXEC: unix.MS_NOEXEC, unix.ST_NOATIME: unix.MS_NOATIME, unix.ST_RELATIME: unix.MS_RELATIME} {
		if st.Flags&bit != 0 {
			f |= ms
		}
	}
	return f
}

// nproc is RLIMIT_NPROC for a command: its process limit, or none when a
// pids cgroup counts its processes instead (the rlimit counts the uid's).
// (As high as this process may set it: its own hard limit.)
func nproc(l Limits, inCgroup bool) uint64 {
	if inCgroup {
		var r unix.Rlimit
		if unix.Getrlimit(unix.RLIMIT_NPROC, &r) == nil {
			return r.Max
		}
	}
	return uint64(l.Procs)
}

// limit sets the resource limits the command inherits.
func limit(l Limits, inCgroup bool) error {
	set := func(res int, v uint64) error {
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("setrlimit %d: %w", res, err)
		}
		return nil
	}
	cpu := uint64(l.CPU / time.Second)
	if cpu == 0 {
		cpu = 1
	}
	for _, r := range []struct {
		res int
		v   uint64
	}{
		{unix.RLIMIT_CPU, cpu},
		{unix.RLIMIT_NPROC, nproc(l, inCgroup)},
		{unix.RLIMIT_AS, uint64(l.Memory)},
		{unix.RLIMIT_FSIZE, uint64(l.FileSize)},
		{unix.RLIMIT_CORE, 0},
	} {
		if err := set(r.res, r.v); err != nil {
			return err
		}
	}
	return nil
}
