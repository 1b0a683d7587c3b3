//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"

	"github.com/paddock-dev/paddock"
	"golang.org/x/sys/unix"
)

// A command's terminal: the daemon opens a pseudo-terminal (/dev/ptmx) and
// keeps its master; the slave goes to the command (the helper's stdio, or
// over the harness's socket) and the daemon closes its own copy at once,
// so that the master reads EIO, its end, once the command and everything
// it started are gone (its pid namespace dies with it). Nothing of the
// terminal reaches the sandbox but the slave: no /dev/pts, no way to a
// terminal of the host's. The seccomp filter still refuses TIOCSTI and
// TIOCLINUX on it.

// terminal is the daemon's side of one command's pseudo-terminal.
type terminal struct {
	master *os.File
	slave  *os.File // until handed over
	output sync.WaitGroup
	done   chan struct{}
	once   sync.Once
	close1 sync.Once
}

// eofChar is what the end of a terminal's input types: the end-of-file
// character of a terminal in its default (canonical) mode, ^D.
const eofChar = 0x04

// openTerminal opens a pseudo-terminal of spec's size, for spec's uid, and
// starts passing what the command writes on it to out (capped like any
// output). The caller hands slave() over to the command, then calls
// handedOver, start once the command runs, and wait when it has ended.
func openTerminal(spec *Spec, out io.Writer) (*terminal, error) {
	master, slave, err := openPTY(spec.Terminal.Size, spec.UID, spec.GID)
	if err != nil {
		return nil, err
	}
	t := &terminal{master: master, slave: slave, done: make(chan struct{})}
	t.output.Add(1)
	go func() {
		defer t.output.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := master.Read(buf)
			if n > 0 {
				out.Write(buf[:n])
			}
			if err != nil {
				return // EIO: no slave is open any more
			}
		}
	}()
	return t, nil
}

// openPTY opens a pseudo-terminal: its master, and its slave owned by
// uid (a root daemon's commands run as another).
func openPTY(size paddock.TerminalSize, uid, gid int) (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, paddock.Errorf(paddock.CodeUnsupported, "no pseudo-terminals here for the command's terminal (%v)", err)
	}
	fail := func(what string, err error) (*os.File, *os.File, error) {
		master.Close()
		if slave != nil {
			slave.Close()
		}
		return nil, nil, fmt.Errorf("sandbox: terminal: %s: %w", what, err)
	}
	if err := control(master, func(fd int) error { return unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0) }); err != nil {
		return fail("unlock", err)
	}
	// The slave through the master itself (TIOCGPTPEER), not by a path
	// under /dev/pts that could name another; by its path where the
	// kernel is older than 4.13.
	var sfd int
	err = control(master, func(fd int) error {
		r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
		if errno != 0 {
			return errno
		}
		sfd = int(r)
		return nil
	})
	if err == nil {
		slave = os.NewFile(uintptr(sfd), "pty")
	} else if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTTY) {
		var n int
		if err := control(master, func(fd int) (err error) { n, err = unix.IoctlGetInt(fd, unix.TIOCGPTN); return err }); err != nil {
			return fail("name", err)
		}
		if slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0); err != nil {
			return fail("open the slave", err)
		}
	} else {
		return fail("open the slave", err)
	}
	if os.Geteuid() == 0 && uid != 0 {
		if err := slave.Chown(uid, gid); err != nil {
			return fail("give it to the command's user", err)
		}
	}
	if err := setSize(master, size); err != nil {
		return fail("set its size", err)
	}
	return master, slave, nil
}

// control runs f on f's descriptor without making it blocking (as Fd
// would: a Close must still end a Read).
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

func setSize(master *os.File, s paddock.TerminalSize) error {
	return control(master, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: s.Rows, Col: s.Cols})
	})
}

// handedOver closes the daemon's copy of the slave: the command holds it now
// (or never will).
func (t *terminal) handedOver() {
	t.once.Do(func() { t.slave.Close() })
}

// start types input into the terminal (its end: eofChar) and applies
// resizes, until the command's end (wait or close).
func (t *terminal) start(input io.Reader, resize <-chan paddock.TerminalSize) {
	if input != nil {
		go func() {
			if _, err := io.Copy(t.master, input); err == nil {
				t.master.Write([]byte{eofChar})
			}
		}()
	}
	if resize != nil {
		go func() {
			for {
				select {
				case s, ok := <-resize:
					if !ok {
						return
					}
					setSize(t.master, s)
				case <-t.done:
					return
				}
			}
		}()
	}
}

// wait waits until the command's output has ended (every slave is
// closed), then closes the terminal.
func (t *terminal) wait() {
	t.handedOver()
	t.output.Wait()
	t.close()
}

// close closes the terminal, whatever its command's state.
func (t *terminal) close() {
	t.close1.Do(func() {
		t.handedOver()
		t.master.Close()
		close(t.done)
	})
}

// inputPipe is the command's stdin as a pipe fed from spec's Input (or
// its Stdin bytes); nil when it has none (it reads /dev/null). feed starts
// the copy; stop closes the write end: called when the command has ended,
// it frees a writer that the command left blocked by not reading all its
// input.
func inputPipe(spec *Spec) (r *os.File, feed, stop func(), err error) {
	src := spec.Input
	if src == nil && len(spec.Stdin) > 0 {
		src = bytes.NewReader(spec.Stdin)
	}
	if src == nil {
		return nil, func() {}, func() {}, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	var once sync.Once
	feed = func() {
		once.Do(func() {
			go func() {
				io.Copy(w, src) // EPIPE when the command stops reading: its business
				w.Close()
			}()
		})
	}
	return r, feed, func() { w.Close() }, nil
}

// terminalInput is what is typed into a command's terminal: Input, or the
// Stdin bytes; nil: nothing.
func terminalInput(spec *Spec) io.Reader {
	if spec.Input != nil {
		return spec.Input
	}
	if len(spec.Stdin) > 0 {
		return bytes.NewReader(spec.Stdin)
	}
	return nil
}
