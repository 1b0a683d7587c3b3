//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// screen is what a terminal shows: the command's output as it comes.
type screen struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	more chan struct{}
}

func newScreen() *screen { return &screen{more: make(chan struct{}, 1)} }

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.buf.Write(p)
	s.mu.Unlock()
	select {
	case s.more <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until the screen shows want.
func (s *screen) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !strings.Contains(s.String(), want) {
		select {
		case <-s.more:
		case <-deadline:
			t.Fatalf("the terminal never showed %q; it shows:\n%q", want, s.String())
		}
	}
}

// runAsync runs spec as runSpec does, in the background.
func runAsync(t *testing.T, spec Spec) <-chan *Result {
	t.Helper()
	if spec.UID == 0 {
		spec.UID = sandboxUID()
	}
	if spec.Env == nil {
		spec.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + spec.Workspace, "LANG=C", "TERM=xterm"}
	}
	if spec.Protected == nil {
		spec.Protected = []string{".git"}
	}
	done := make(chan *Result, 1)
	go func() {
		var res *Result
		var err error
		if testPool != nil {
			res, err = testPool.Run(context.Background(), "r-test", spec)
			if err == nil && res.Enforcement.Mode != "resident" {
				t.Errorf("%v ran %s (%s), not through the harness", spec.Argv, res.Enforcement.Mode, res.Enforcement.ModeReason)
			}
		} else {
			res, err = Run(context.Background(), spec)
		}
		if err != nil {
			t.Errorf("%v: %v", spec.Argv, err)
		}
		done <- res
	}()
	return done
}

func skipUnlessPTY(t *testing.T) {
	t.Helper()
	m, s, err := openPTY(paddock.TerminalSize{Rows: 24, Cols: 80}, sandboxUID(), sandboxUID())
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	m.Close()
	s.Close()
}

// TestTerminal: a command given a terminal has one, as at a login: stdin,
// stdout and stderr are it, it is the controlling terminal (/dev/tty opens
// it, /proc says so), of the size asked; a resize reaches it as SIGWINCH
// with the new size; what is typed reaches it; its output, to the last
// byte, comes back through the master, capped like any output; and the
// seccomp filter still refuses TIOCSTI on it.
func TestTerminal(t *testing.T) {
	skipUnlessSandbox(t)
	skipUnlessPTY(t)
	ws, _ := newWorkspace(t)
	scr := newScreen()
	inR, inW := io.Pipe()
	defer inW.Close()
	resize := make(chan paddock.TerminalSize, 1)
	script := `test -t 0 && test -t 1 && test -t 2 && echo "TTY yes"
read -r _ _ _ _ _ _ nr _ < /proc/$$/stat; echo "TTYNR $nr"
echo "SIZE $(stty size </dev/tty)"
trap 'w=1' WINCH
echo READY
i=0; while [ -z "$w" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
echo "RESIZED by signal=$w: $(stty size)"
IFS= read -r line
echo "GOT $line"
exit 7`
	done := runAsync(t, Spec{Argv: []string{"bash", "-c", script}, Workspace: ws, Stdout: scr, LiveOnly: true, Input: inR,
		Terminal: &Terminal{Size: paddock.TerminalSize{Rows: 24, Cols: 80}, Resize: resize}})
	scr.waitFor(t, "READY")
	resize <- paddock.TerminalSize{Rows: 31, Cols: 101}
	scr.waitFor(t, "RESIZED")
	inW.Write([]byte("typed here\n"))
	inW.Close()
	res := <-done
	if res == nil {
		t.FailNow()
	}
	out := scr.String()
	t.Logf("%q", out)
	for _, want := range []string{"TTY yes\r\n", "SIZE 24 80\r\n", "RESIZED by signal=1: 31 101\r\n", "GOT typed here\r\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal does not show %q", want)
		}
	}
	if strings.Contains(out, "TTYNR 0\r\n") || !strings.Contains(out, "TTYNR ") {
		t.Errorf("no controlling terminal in /proc/PID/stat")
	}
	if res.ExitCode != 7 || len(res.Stderr) != 0 || !bytes.Contains(res.Stdout, []byte("GOT typed here")) {
		t.Fatalf("result: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}

	// Its last bytes are not lost at its end; the output limit binds.
	res = runTerminal(t, Spec{Argv: []string{"sh", "-c", "head -c 300000 /dev/zero | tr '\\0' a; echo END"}, Workspace: ws})
	if n := bytes.Count(res.Stdout, []byte("a")); n != 300000 || !bytes.HasSuffix(res.Stdout, []byte("END\r\n")) {
		t.Fatalf("%d of 300000 bytes, ending %q", n, res.Stdout[max(0, len(res.Stdout)-20):])
	}
	res = runTerminal(t, Spec{Argv: []string{"sh", "-c", "head -c 300000 /dev/zero | tr '\\0' a"}, Workspace: ws, Limits: Limits{Output: 1000}})
	if !res.Truncated || !bytes.HasSuffix(res.Stdout, []byte(TruncatedMarker)) || len(res.Stdout) != 1000+len(TruncatedMarker) {
		t.Fatalf("the output limit on a terminal: truncated %v, %d bytes", res.Truncated, len(res.Stdout))
	}
	// Stdin bytes are typed too; nothing but the terminal is open.
	res = runTerminal(t, Spec{Argv: []string{"sh", "-c", "read -r a; echo \"A=$a\"; ls /proc/self/fd"}, Workspace: ws, Stdin: []byte("bytes\n")})
	if !bytes.Contains(res.Stdout, []byte("A=bytes\r\n")) || !bytes.Contains(res.Stdout, []byte("0  1  2  3\r\n")) && !bytes.Contains(res.Stdout, []byte("0\r\n1\r\n2\r\n3\r\n")) {
		t.Fatalf("stdin bytes on a terminal: %q", res.Stdout)
	}
	// The filter still refuses pushing input into the terminal.
	probe := withProbe(t, ws)
	res = runTerminal(t, Spec{Argv: []string{probe, "probe", "tiocsti"}, Workspace: ws})
	if bytes.Contains(res.Stdout, []byte("ESCAPED")) || !bytes.Contains(res.Stdout, []byte("refused: operation not permitted")) {
		t.Fatalf("TIOCSTI on the command's own terminal: %q", res.Stdout)
	}
}

func runTerminal(t *testing.T, spec Spec) *Result {
	t.Helper()
	spec.Terminal = &Terminal{Size: paddock.TerminalSize{Rows: 24, Cols: 80}}
	res := <-runAsync(t, spec)
	if res == nil {
		t.FailNow()
	}
	return res
}

// TestTerminalStreamsInput: a command without a terminal reads Input as it
// comes, through a pipe, up to its end.
func TestTerminalStreamsInput(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	scr := newScreen()
	inR, inW := io.Pipe()
	defer inW.Close()
	done := runAsync(t, Spec{Argv: []string{"sh", "-c", "test -t 0 || echo PIPE; read -r a; echo \"one=$a\"; cat"}, Workspace: ws, Stdout: scr, LiveOnly: true, Input: inR})
	inW.Write([]byte("first\n"))
	scr.waitFor(t, "one=first\n") // answered before the rest is written
	inW.Write([]byte("rest"))
	inW.Close()
	res := <-done
	if res == nil || res.ExitCode != 0 || scr.String() != "PIPE\none=first\nrest" {
		t.Fatalf("streamed input: %q %+v", scr.String(), res)
	}
}
