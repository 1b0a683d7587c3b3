//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// HarnessArg is argv[1] of a run's harness process.
const HarnessArg = "__paddock-sandbox-harness"

// harnessVersion changes whenever the protocol between daemon and harness
// does; a daemon does not adopt a harness of another version.
const harnessVersion = 5

// maxHarnessMessage bounds one message on the control channel (a command's
// argv and environment); a bigger command runs per-exec.
const maxHarnessMessage = 160 << 10

// harnessSpec is what the daemon tells a new harness.
type harnessSpec struct {
	Spec
	Key    string        `json:"key"`
	Config string        `json:"config"`   // the hash a re-attaching daemon compares
	Base   string        `json:"base"`     // the same without the network (netFreeHash)
	Orphan time.Duration `json:"orphan"`   // exit after this long without a daemon
	PID    int           `json:"host_pid"` // the harness's pid as the daemon sees it
}

// hmsg is one message on the control channel, either way.
type hmsg struct {
	// daemon → harness: exec (with the command's stdout and stderr as
	// SCM_RIGHTS, after its stdin when Stdin, or its terminal alone when
	// Tty, before its pids cgroup when there is one), kill, close.
	Op     string   `json:"op,omitempty"`
	ID     uint64   `json:"id,omitempty"`
	Stdin  bool     `json:"stdin,omitempty"`
	Tty    bool     `json:"tty,omitempty"`
	Argv   []string `json:"argv,omitempty"`
	Env    []string `json:"env,omitempty"`
	Dir    string   `json:"dir,omitempty"`
	Limits *Limits  `json:"limits,omitempty"`
	// OwnNet gives the command a network namespace of its own, empty but
	// for its loopback: no network, under a harness that has one.
	OwnNet bool `json:"own_net,omitempty"`
	// harness → daemon: hello on connect; started or a failure, then done.
	Hello    *hello        `json:"hello,omitempty"`
	Started  bool          `json:"started,omitempty"`
	Done     bool          `json:"done,omitempty"`
	Error    string        `json:"error,omitempty"`
	Code     int           `json:"code,omitempty"` // 125 set-up, 126 cannot run, 127 not found
	ExitCode int           `json:"exit_code,omitempty"`
	Signal   string        `json:"signal,omitempty"`
	TimedOut bool          `json:"timed_out,omitempty"`
	CPU      time.Duration `json:"cpu,omitempty"`
	MaxRSS   int64         `json:"max_rss,omitempty"`
}

type hello struct {
	Version     int         `json:"version"`
	Key         string      `json:"key"`
	Config      string      `json:"config"`
	Base        string      `json:"base"`
	Enforcement Enforcement `json:"enforcement"`
	Started     time.Time   `json:"started"`
	Commands    int         `json:"commands"`
	PID         int         `json:"host_pid"`
}

// harness is the state of a harness process.
type harness struct {
	spec    harnessSpec
	enf     Enforcement
	started time.Time
	rules   []pathRule
	prog    *unix.SockFprog
	filter  []unix.SockFilter // keeps prog's instructions alive
	stdin   int

	mu       sync.Mutex // guards running, commands and writes to conn
	conn     *net.UnixConn
	running  map[uint64]int  // command id → pid
	killed   map[uint64]bool // kills that came before their command's fork
	commands int
}

// HarnessMain is a run's harness: it never returns. Like the helper it
// builds the view in its new namespaces, then, instead of becoming a
// command, it stays: each command the daemon sends is forked from it into
// its own pid and mount namespace, under its own Landlock domain, seccomp
// filter and limits, so a command costs about a fork. It serves one
// daemon connection at a time on its listening socket; when the daemon
// goes away its commands are killed, and when no daemon comes back within
// the orphan time it exits.
func HarnessMain() {
	unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	rep := &report{}
	out := os.NewFile(fdReport, "report")
	fail := func(err error) {
		rep.Error = err.Error()
		var ue unsupportedError
		rep.Unsupported = errors.As(err, &ue)
		json.NewEncoder(out).Encode(rep)
		os.Exit(125)
	}
	h := &harness{running: map[uint64]int{}, killed: map[uint64]bool{}, started: time.Now()}
	cfg := os.NewFile(fdConfig, "config")
	if err := json.NewDecoder(cfg).Decode(&h.spec); err != nil {
		fail(fmt.Errorf("reading the harness spec: %w", err))
	}
	cfg.Close()
	spec := &h.spec.Spec
	spec.Limits = withDefaults(spec.Limits)
	if err := buildView(spec, &h.enf, true); err != nil {
		fail(err)
	}
	if err := h.lockdown(); err != nil {
		fail(err)
	}
	rep.Enforcement, rep.Started = h.enf, true
	json.NewEncoder(out).Encode(rep)
	out.Close()

	ln, err := net.FileListener(os.NewFile(fdListener, "listener"))
	if err != nil {
		os.Exit(125)
	}
	h.serve(ln.(*net.UnixListener))
}

// lockdown prepares what each command applies to itself (the Landlock
// ruleset and seccomp program of the helper), and protects the harness:
// not dumpable (its memory and descriptors are not readable by the
// commands, which run as the same uid), and under the helper's seccomp
// filter except for mount and umount2, with which each command mounts its
// own /proc and unmounts the daemon's view in its own mount namespace.
func (h *harness) lockdown() error {
	spec := &h.spec.Spec
	r := specRights(spec)
	if err := checkCovered(spec, r, &h.enf); err != nil {
		return err
	}
	var err error
	if h.rules, err = openRules(spec); err != nil {
		return err
	}
	if fd, err := newRuleset(spec, h.rules); err != nil {
		return unsupportedError{err.Error()}
	} else if fd >= 0 {
		unix.Close(fd)
	}
	if h.prog, h.filter, err = seccompProgram(seccompPolicy()); err != nil {
		return err
	}
	if h.stdin, err = unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("not dumpable: %w", err)
	}
	if err := loadSeccomp(seccompPolicy("mount", "umount2")); err != nil {
		return unsupportedError{fmt.Sprintf("seccomp: %v", err)}
	}
	h.enf.Landlock = r.abi
	h.enf.Seccomp, h.enf.NoNewPrivs, h.enf.Caps = true, true, "none"
	h.enf.Mode = "resident"
	h.enf.Holds = holds(&h.enf)
	return nil
}

// serve accepts one daemon at a time, until none comes for the orphan time.
func (h *harness) serve(ln *net.UnixListener) {
	for {
		ln.SetDeadline(time.Now().Add(h.spec.Orphan))
		c, err := ln.AcceptUnix()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				os.Exit(0) // orphaned: the pid namespace dies with us
			}
			continue
		}
		if !h.trusted(c) {
			c.Close()
			continue
		}
		h.serveConn(c)
		c.Close()
		h.killAll() // their output went to a daemon that is gone
	}
}

// trusted: the socket lives in the daemon's private directory, outside
// the view, so only the daemon (or root) can reach it; and the peer must be
// outside the harness's pid namespace (its pid reads as 0 here), never one
// of its commands.
func (h *harness) trusted(c *net.UnixConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	rc.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	return err == nil && cred.Pid == 0
}

func (h *harness) send(m hmsg) error {
	b, _ := json.Marshal(m)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil {
		return net.ErrClosed
	}
	_, err := h.conn.Write(b)
	return err
}

func (h *harness) serveConn(c *net.UnixConn) {
	h.mu.Lock()
	h.conn = c
	n := h.commands
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.conn = nil
		h.mu.Unlock()
	}()
	if h.send(hmsg{Hello: &hello{Version: harnessVersion, Key: h.spec.Key, Config: h.spec.Config, Base: h.spec.Base,
		Enforcement: h.enf, Started: h.started, Commands: n, PID: h.spec.PID}}) != nil {
		return
	}
	buf := make([]byte, maxHarnessMessage)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return
		}
		var fds []int
		if oobn > 0 {
			if cms, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for _, cm := range cms {
					if r, err := unix.ParseUnixRights(&cm); err == nil {
						fds = append(fds, r...)
					}
				}
			}
		}
		var m hmsg
		if err := json.Unmarshal(buf[:n], &m); err != nil {
			closeAll(fds)
			return
		}
		switch m.Op {
		case "exec":
			if m.Tty {
				// The terminal is the command's stdin, stdout and stderr.
				if len(fds) != 1 && len(fds) != 2 || m.Stdin {
					closeAll(fds)
					h.send(hmsg{ID: m.ID, Error: "exec on a terminal needs the terminal alone (and its pids cgroup)", Code: 125})
					continue
				}
				cgroup := -1
				if len(fds) == 2 {
					cgroup = fds[1]
				}
				go h.exec(m, -1, fds[0], -1, cgroup)
				continue
			}
			stdin := -1
			if m.Stdin && len(fds) > 0 {
				stdin, fds = fds[0], fds[1:]
			}
			if len(fds) != 2 && len(fds) != 3 || m.Stdin && stdin < 0 {
				closeAll(fds)
				if stdin >= 0 {
					unix.Close(stdin)
				}
				h.send(hmsg{ID: m.ID, Error: "exec needs the command's stdin when it says so, its stdout and stderr (and its pids cgroup)", Code: 125})
				continue
			}
			cgroup := -1
			if len(fds) == 3 {
				cgroup = fds[2]
			}
			go h.exec(m, stdin, fds[0], fds[1], cgroup)
		case "kill":
			h.mu.Lock()
			if pid, ok := h.running[m.ID]; ok && pid > 0 {
				unix.Kill(pid, unix.SIGKILL)
			} else {
				h.killed[m.ID] = true // before its fork: it dies as it starts
			}
			h.mu.Unlock()
			closeAll(fds)
		case "close":
			h.killAll()
			os.Exit(0)
		default:
			closeAll(fds)
		}
	}
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func (h *harness) killAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, pid := range h.running {
		unix.Kill(pid, unix.SIGKILL)
	}
}

// exec runs one command and reports it: started (or why not), then done.
// stdin is the command's own pipe, or -1 for the harness's /dev/null. With
// m.Tty, stdout is the command's terminal, its stdin and stderr too, and
// its controlling terminal.
func (h *harness) exec(m hmsg, stdin, stdout, stderr, cgroup int) {
	if cgroup >= 0 {
		defer unix.Close(cgroup)
	}
	in := h.stdin
	if stdin >= 0 {
		in = stdin
	}
	if m.Tty {
		in, stderr = stdout, stdout
	}
	// Ours are closed once the child has its copies (or never will).
	closeIO := func() {
		unix.Close(stdout)
		if stderr != stdout {
			unix.Close(stderr)
		}
		if stdin >= 0 {
			unix.Close(stdin)
		}
	}
	spec := &h.spec.Spec
	l := spec.Limits
	if m.Limits != nil {
		l = withDefaults(*m.Limits)
	}
	plan, ruleset, err := h.plan(m, [3]int{in, stdout, stderr}, l, cgroup)
	if ruleset >= 0 {
		defer unix.Close(ruleset)
	}
	if err != nil || len(m.Argv) == 0 {
		closeIO()
		if err == nil {
			err = errors.New("no command")
		}
		h.send(hmsg{ID: m.ID, Error: err.Error(), Code: 127})
		return
	}
	// The fork and its bookkeeping under one lock: a kill that arrives
	// meanwhile finds the pid.
	h.mu.Lock()
	pid, err := forkCommand(plan)
	if err == nil {
		h.running[m.ID] = pid
		h.commands++
		if h.killed[m.ID] {
			unix.Kill(pid, unix.SIGKILL) // cancelled while it was being started
		}
	}
	delete(h.killed, m.ID)
	h.mu.Unlock()
	closeIO()
	if err != nil {
		h.send(startFailure(m, err))
		return
	}
	h.send(hmsg{ID: m.ID, Started: true})
	h.send(h.wait(m.ID, pid, l.Wall))
}

// plan prepares the fork of m's command onto the descriptors fds, with a
// Landlock ruleset of its own, which the caller closes when it is not -1.
func (h *harness) plan(m hmsg, fds [3]int, l Limits, cgroup int) (plan *childPlan, ruleset int, err error) {
	spec := &h.spec.Spec
	dir := filepath.Join(spec.Workspace, filepath.Clean("/"+m.Dir))
	path, err := commandPath(&Spec{Argv: m.Argv, Env: m.Env})
	if err != nil || len(m.Argv) == 0 {
		return nil, -1, err
	}
	rspec := spec
	if m.OwnNet {
		// Its Landlock domain is a none network's: TCP on its own loopback.
		rspec = &Spec{Net: NetNone, LandlockBelow: spec.LandlockBelow}
	}
	if ruleset, err = newRuleset(rspec, h.rules); err != nil {
		return nil, -1, err
	}
	plan, err = newChildPlan(path, m.Argv, m.Env, dir, fds, l, ruleset, h.prog, cgroup)
	if err != nil {
		return nil, ruleset, err
	}
	plan.ctty = m.Tty
	if m.OwnNet {
		plan.ownNet()
	}
	if spec.DaemonView {
		plan.hideView, _ = unix.BytePtrFromString(DaemonView)
	}
	if spec.ReadOnly && spec.Scratch {
		plan.scratch = newScratchPlan(ScratchDir, spec.Workspace, l.Tmp)
		plan.scratch.rule.access &= specRights(spec).fs
	}
	return plan, ruleset, nil
}

// startFailure is the reply to a command that could not be started, with
// a shell's exit codes: 126 for a command that cannot run, 127 for one
// that is not there (or a directory that cannot be entered), else 125.
func startFailure(m hmsg, err error) hmsg {
	code := 125
	var ce *ChildError
	if errors.As(err, &ce) && ce.Step == "exec" {
		code = 126
		if ce.Errno == unix.ENOENT {
			code = 127
		}
		err = fmt.Errorf("%s: %v", m.Argv[0], ce.Errno)
	} else if errors.As(err, &ce) && ce.Step == "enter the directory" {
		code = 127
		err = fmt.Errorf("cannot enter %s: %v", m.Dir, ce.Errno)
	}
	return hmsg{ID: m.ID, Error: err.Error(), Code: code}
}

// wait waits for the started command pid, killing it after wall, and
// returns its Done message.
func (h *harness) wait(id uint64, pid int, wall time.Duration) hmsg {
	var timedOut bool
	var tmu sync.Mutex
	timer := time.AfterFunc(wall, func() {
		tmu.Lock()
		timedOut = true
		tmu.Unlock()
		unix.Kill(pid, unix.SIGKILL)
	})
	var ws unix.WaitStatus
	var ru unix.Rusage
	for {
		if _, err := unix.Wait4(pid, &ws, 0, &ru); !errors.Is(err, unix.EINTR) {
			break
		}
	}
	timer.Stop()
	h.mu.Lock()
	delete(h.running, id)
	h.mu.Unlock()
	tmu.Lock()
	done := hmsg{ID: id, Done: true, ExitCode: ws.ExitStatus(), TimedOut: timedOut,
		CPU:    time.Duration(unix.TimevalToNsec(ru.Utime) + unix.TimevalToNsec(ru.Stime)),
		MaxRSS: ru.Maxrss * 1024}
	tmu.Unlock()
	if ws.Signaled() {
		done.Signal = ws.Signal().String()
		done.ExitCode = 128 + int(ws.Signal())
	}
	return done
}
