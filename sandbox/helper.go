//go:build linux

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

// setup builds the view and locks the helper down; what it enforced goes into e.
func setup(spec *Spec, e *Enforcement) error {
	if err := buildView(spec, e, false); err != nil {
		return err
	}
	return lockdown(spec, e)
}

// proxySocketInside is where the proxy's socket appears in the view.
const proxySocketInside = "/run/paddock/proxy.sock"

// loopbackUp brings up the loopback of the namespace's own network.
func loopbackUp() error {
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
	return nil
}

// BridgeArg is argv[1] of the proxy bridge process of an "allow" network.
const BridgeArg = "__paddock-sandbox-bridge"

// startBridge brings up the namespace's loopback, listens on
// 127.0.0.1:ProxyPort and starts the bridge process with the listener.
func startBridge() error {
	if err := loopbackUp(); err != nil {
		return err
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

// addressSpace is RLIMIT_AS for a command: its memory limit, or none when
// its cgroup bounds the memory it uses instead (a virtual reservation, a
// Go heap arena or a JIT's, is not memory used).
func addressSpace(l Limits) uint64 {
	if l.MemoryCgroup {
		return unix.RLIM_INFINITY
	}
	return uint64(l.Memory)
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
		{unix.RLIMIT_AS, addressSpace(l)},
		{unix.RLIMIT_FSIZE, uint64(l.FileSize)},
		{unix.RLIMIT_CORE, 0},
	} {
		if err := set(r.res, r.v); err != nil {
			return err
		}
	}
	return nil
}
