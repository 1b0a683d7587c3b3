package paddockcli

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"golang.org/x/sys/unix"
)

// terminalIn returns the CLI's stdin when it is a terminal.
func terminalIn(r io.Reader) (*os.File, bool) {
	f, ok := r.(*os.File)
	return f, ok && isTerminal(f)
}

// execOnTerminal runs req attached, on a terminal like the one the CLI's
// stdin is: of its size and resized with it (SIGWINCH), TERM as the CLI's.
// The CLI's terminal is in raw mode meanwhile (every key, Ctrl-C included,
// goes to the command, as at any terminal) and is restored on every way
// out.
func (a *app) execOnTerminal(ctx context.Context, c *client.Client, id string, req paddock.ExecRequest, in *os.File) (*paddock.ExecResult, error) {
	fd := int(in.Fd())
	size, err := terminalSize(fd)
	if err != nil {
		return nil, err
	}
	req.Terminal = &size
	if t := a.getenv("TERM"); t != "" {
		req.Env = append(req.Env, "TERM="+t)
	}
	// Reach the daemon (and start one: its note is a line) while the
	// terminal still reads lines, not once every key is the command's.
	if err := c.Health(ctx); err != nil {
		return nil, err
	}
	restore, err := makeRaw(fd)
	if err != nil {
		return nil, err
	}
	defer restore()

	resize := make(chan paddock.TerminalSize, 1)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-winch:
				s, err := terminalSize(fd)
				if err != nil {
					continue
				}
				select { // only the latest size waits
				case resize <- s:
				default:
					select {
					case <-resize:
					default:
					}
					resize <- s
				}
			case <-done:
				return
			}
		}
	}()
	tr, err := newTerminalReader(fd)
	if err != nil {
		return nil, err
	}
	defer tr.stop()
	return c.ExecAttach(ctx, id, req, paddock.ExecIO{Stdin: tr, Resize: resize, Stdout: a.stdout, Stderr: a.stderr})
}

func terminalSize(fd int) (paddock.TerminalSize, error) {
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil {
		return paddock.TerminalSize{}, err
	}
	s := paddock.TerminalSize{Rows: ws.Row, Cols: ws.Col}
	if s.Rows == 0 || s.Cols == 0 { // a terminal that does not say
		s = paddock.TerminalSize{Rows: 24, Cols: 80}
	}
	return s, nil
}

// makeRaw puts the terminal fd in raw mode (as cfmakeraw does) and returns
// what restores its mode as it was.
func makeRaw(fd int) (restore func(), err error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }) }, nil
}

// errStopped ends a terminalReader's read: not the end of the input (which
// the command would be told), only of reading it.
var errStopped = errors.New("no longer reading the terminal")

// terminalReader reads a terminal until stopped: a read that waits for a
// key must not outlive the command, or it would take the first key typed
// at the prompt that follows.
type terminalReader struct {
	fd           int
	wake         [2]int // a pipe: a byte on it stops the reader
	mu           sync.Mutex
	reading      bool
	stopped      bool
	readerReturn chan struct{}
}

func newTerminalReader(fd int) (*terminalReader, error) {
	r := &terminalReader{fd: fd}
	if err := unix.Pipe2(r.wake[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *terminalReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return 0, errStopped
	}
	r.reading = true
	r.readerReturn = make(chan struct{})
	ret := r.readerReturn
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.reading = false
		close(ret)
		r.mu.Unlock()
	}()
	for {
		fds := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}, {Fd: int32(r.wake[0]), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return 0, err
		}
		if fds[1].Revents != 0 {
			return 0, errStopped
		}
		if fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) == 0 {
			continue
		}
		n, err := unix.Read(r.fd, p)
		switch {
		case errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN):
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// stop ends a read in progress and every later one, then closes the pipe.
func (r *terminalReader) stop() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.stopped = true
	reading, ret := r.reading, r.readerReturn
	r.mu.Unlock()
	unix.Write(r.wake[1], []byte{0})
	if reading {
		select {
		case <-ret:
		case <-time.After(time.Second):
			return // it keeps the pipe: better than a descriptor it could poll after reuse
		}
	}
	unix.Close(r.wake[0])
	unix.Close(r.wake[1])
}
