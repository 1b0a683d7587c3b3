package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// The tests of this file: a request ends when its context does, with the
// context's error, whatever the daemon does meanwhile (stalls, a full
// backlog, a hook that hangs).

// TestCancelledBodyReadIsContextError: a body whose read ctx ended reads
// as ctx's error, as net/http's did, never as the body's end: a body
// framed by the connection's end would otherwise read as complete
// (Bundle would write a truncated bundle and return nil), and a framed
// one as the daemon's failure ("did it stop?").
func TestCancelledBodyReadIsContextError(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	c := rawDaemon(t, func(conn net.Conn, head string) {
		if strings.Contains(head, "chunked-path") {
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\npartial\r\n")
		} else {
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\npartial")
		}
		<-release // holds the connection open, sending nothing more
	})
	for _, id := range []string{"close-delimited", "chunked-path"} {
		ctx, cancel := context.WithCancel(context.Background())
		w := &cancelAfter{n: len("partial"), cancel: cancel}
		err := c.Bundle(ctx, id, w)
		if err == nil {
			t.Errorf("%s: Bundle cancelled after %q returned nil: a truncated bundle read as whole", id, w.buf.String())
		} else if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: Bundle cancelled: %v, want context.Canceled", id, err)
		}
	}
}

// cancelAfter cancels once n bytes were written to it.
type cancelAfter struct {
	buf    bytes.Buffer
	n      int
	cancel func()
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	c.buf.Write(p)
	if c.buf.Len() >= c.n {
		c.cancel()
	}
	return len(p), nil
}

// TestFollowCancelledIsContextError: Follow ended by ctx returns ctx's
// error, as it did over net/http.
func TestFollowCancelledIsContextError(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	c := rawDaemon(t, func(conn net.Conn, head string) {
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		ev := "id: 1\ndata: {\"seq\":1,\"run_id\":\"r\",\"type\":\"x\"}\n\n"
		fmt.Fprintf(conn, "%x\r\n%s\r\n", len(ev), ev)
		<-release
	})
	ctx, cancel := context.WithCancel(context.Background())
	err := c.Follow(ctx, "r", 0, func(e *paddock.Event) error {
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Follow cancelled: %v, want context.Canceled", err)
	}
}

// TestCancelledContextSendsNothing: a request whose ctx has ended before
// it is made never reaches the daemon (net/http checks first too): a POST
// that the caller gave up on must not be carried out.
func TestCancelledContextSendsNothing(t *testing.T) {
	var got atomic.Int32
	c := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		io.WriteString(w, `{"ok":true,"data":{}}`)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 20 {
		if _, err := c.Submit(ctx, "r-1"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Submit with an ended ctx: %v, want context.Canceled", err)
		}
	}
	// A request made after them all is the first the daemon sees.
	if _, err := c.Submit(context.Background(), "r-1"); err != nil {
		t.Fatal(err)
	}
	if n := got.Load(); n != 1 {
		t.Errorf("the daemon carried out %d requests, want only the 1 whose ctx was live", n)
	}
}

// TestOnUnreachableHookEndedByItsCallersContext: a hook that fails
// because the request that ran it was cancelled does not stand for the
// requests after it, which have contexts of their own; they run it again.
func TestOnUnreachableHookEndedByItsCallersContext(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	var calls atomic.Int32
	c := Unix(sock).OnUnreachable(func(ctx context.Context, err error) error {
		if calls.Add(1) == 1 {
			<-ctx.Done() // a slow start its caller gave up on
			return fmt.Errorf("autostart: %w", ctx.Err())
		}
		return serveStarted(t, sock)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Status(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the first call: %v, want its deadline", err)
	}
	st, err := c.Status(context.Background())
	if err != nil || st.Version != "started" {
		t.Fatalf("a call after the first's deadline: %+v %v (the hook ran %d times)", st, err, calls.Load())
	}
}

// TestOnUnreachableWaitHonoursContext: a request waiting for another's
// hook to finish gives up when its own ctx ends.
func TestOnUnreachableWaitHonoursContext(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	started, release := make(chan struct{}), make(chan struct{})
	c := Unix(sock).OnUnreachable(func(ctx context.Context, err error) error {
		close(started)
		<-release
		return errors.New("no daemon")
	})
	first := make(chan error, 1)
	go func() { _, err := c.Status(context.Background()); first <- err }()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	waited := make(chan error, 1)
	go func() { _, err := c.Status(ctx); waited <- err }()
	select {
	case err := <-waited:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the waiting call: %v, want its deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("a call whose ctx ended still waits for another's hook")
		defer func() { <-waited }()
	}
	close(release)
	if err := <-first; err == nil || !strings.Contains(err.Error(), "no daemon") {
		t.Errorf("the first call: %v", err)
	}
}

// TestFullBacklogWaitsUnderContext: a daemon whose listen backlog is full
// (called faster than it accepts) is waited for, under ctx, not failed
// at once with EAGAIN; and ctx bounds the wait.
func TestFullBacklogWaitsUnderContext(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	lfd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(lfd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(lfd, 0); err != nil {
		t.Fatal(err)
	}
	lf := os.NewFile(uintptr(lfd), sock)
	ln, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// Fill the backlog with connections nobody accepts yet.
	full := false
	for range 64 {
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: sock})
		if errors.Is(err, syscall.EAGAIN) {
			syscall.Close(fd)
			full = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
	}
	if !full {
		t.Skip("the backlog never filled")
	}
	c := Unix(sock)
	if _, err := c.WithTimeout(100 * time.Millisecond).Status(context.Background()); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a full backlog nobody makes room in, WithTimeout: %v, want a deadline exceeded", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Status(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a full backlog nobody makes room in: %v, want the ctx's deadline", err)
	}
	// The daemon catches up: the waiting request gets in.
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"ok":true,"data":{"version":"in"}}`)
	})}
	defer srv.Close()
	time.AfterFunc(50*time.Millisecond, func() { go srv.Serve(ln) })
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if st, err := c.Status(ctx); err != nil || st.Version != "in" {
		t.Fatalf("a full backlog the daemon makes room in: %+v %v", st, err)
	}
}

// TestStalledUploadEndsWithContext: a daemon that takes a streamed body's
// head and then reads nothing and answers nothing is left when ctx ends,
// promptly, with ctx's error; so is one that switches protocols before
// reading a large body.
func TestStalledUploadEndsWithContext(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	c := rawDaemon(t, func(conn net.Conn, head string) {
		if strings.Contains(head, "Upgrade") {
			io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
		}
		<-release
	})
	for _, tc := range []struct {
		name   string
		body   func() io.Reader
		header [][2]string
	}{
		{"a pipe", func() io.Reader { return io.LimitReader(zeros{}, 64<<20) }, nil},
		{"a switch", func() io.Reader { return bytes.NewReader(make([]byte, 16<<20)) }, [][2]string{{"Connection", "Upgrade"}, {"Upgrade", "test"}}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		_, err := c.request(ctx, "x", "POST", "/up", tc.body(), tc.header...)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v, want the ctx's deadline", tc.name, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", tc.name, d)
		}
		// And WithTimeout's bound, the kernel's: the upload stalls (the
		// write times out), and so does the wait for the answer.
		start = time.Now()
		_, err = c.WithTimeout(150*time.Millisecond).request(context.Background(), "x", "POST", "/up", tc.body(), tc.header...)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s, WithTimeout: %v, want a deadline exceeded", tc.name, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s, WithTimeout: took %v", tc.name, d)
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestWithTimeoutSlowUploadProgresses: WithTimeout fails a request whose
// connection sends and receives nothing for its bound; an upload the
// daemon reads slowly, longer than the bound in all but never idle that
// long, is not that, on the unix socket as on TCP.
func TestWithTimeoutSlowUploadProgresses(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 64<<10)
		n := 0
		for {
			m, err := r.Body.Read(buf)
			n += m
			if err != nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		fmt.Fprintf(w, `{"ok":true,"data":{"version":"%d"}}`, n)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	defer srv.Close()
	body := make([]byte, 32<<20) // longer than the bound to send, more than the kernel buffers
	for _, c := range []*Client{serveUnix(t, h), TCP(ln.Addr().String(), "")} {
		start := time.Now()
		resp, err := c.WithTimeout(300*time.Millisecond).request(context.Background(), "x", "POST", "/up", bytes.NewReader(body))
		if err != nil {
			t.Errorf("%s after %v: %v", c.network, time.Since(start), err)
			continue
		}
		b, _ := io.ReadAll(resp.body)
		resp.body.Close()
		if !strings.Contains(string(b), fmt.Sprint(len(body))) {
			t.Errorf("%s: %s", c.network, b)
		}
		t.Logf("%s: %v", c.network, time.Since(start))
	}
}
