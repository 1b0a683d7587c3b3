package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// rawDaemon listens on a unix socket in a test directory and answers
// every connection with serve, which gets the request's head as read: a
// daemon that is hostile or broken in ways a net/http server is not.
func rawDaemon(t *testing.T, serve func(conn net.Conn, head string)) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				var head strings.Builder
				for {
					line, err := br.ReadString('\n')
					head.WriteString(line)
					if err != nil || line == "\r\n" {
						break
					}
				}
				serve(conn, head.String())
			}()
		}
	}()
	return Unix(sock)
}

// TestBlockingConnSecondCloseSparesAReusedFd: a connection closed twice
// (its context's end and its body's Close both close it) must not shut
// down whatever socket the kernel gave the same descriptor number to in
// between: another request's connection.
func TestBlockingConnSecondCloseSparesAReusedFd(t *testing.T) {
	for try := 0; try < 10; try++ {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		syscall.Close(fds[1])
		conn := &blockingConn{f: os.NewFile(uintptr(fds[0]), "first")}
		conn.Close()
		other, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if other[0] != fds[0] {
			syscall.Close(other[0])
			syscall.Close(other[1])
			continue // the number went elsewhere: try again
		}
		conn.Close() // again, as AfterFunc and connCloser both do
		_, werr := syscall.Write(other[0], []byte("x"))
		syscall.Close(other[0])
		syscall.Close(other[1])
		if werr != nil {
			t.Fatalf("a second Close shut down the socket that reused descriptor %d: write: %v", fds[0], werr)
		}
		return
	}
	t.Skip("the kernel never reused the descriptor number")
}

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

// TestTrailersAreBounded: a daemon that sends trailers without end is
// refused once they pass the bound on a head, not read into memory
// without limit (net/http bounds them too).
func TestTrailersAreBounded(t *testing.T) {
	c := rawDaemon(t, func(conn net.Conn, head string) {
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n")
		line := []byte("X-Trailer-Without-End: " + strings.Repeat("y", 1000) + "\r\n")
		for range 4 << 10 { // 4 MiB of trailers, then their end
			if _, err := conn.Write(line); err != nil {
				return
			}
		}
		io.WriteString(conn, "\r\n")
	})
	resp, err := c.request(context.Background(), "x", "GET", "/trailers", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.body.Close()
	if b, err := io.ReadAll(resp.body); err == nil {
		t.Errorf("4 MiB of trailers were read: body %q", b)
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

// TestSocketOnStdoutSurvivesAPeerGone: a program that closed its stdout
// gets descriptor 1 for its next socket; os treats a write failing with
// EPIPE on descriptor 1 or 2 as a write to a closed stdout and kills the
// program with SIGPIPE. A daemon that closes the connection while the
// client writes must give an error, not that death.
func TestSocketOnStdoutSurvivesAPeerGone(t *testing.T) {
	if os.Getenv("PADDOCK_CLIENT_TEST_CHILD") == "stdout" {
		sock := filepath.Join(os.Getenv("PADDOCK_CLIENT_TEST_DIR"), "s.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				conn.Close() // gone before reading anything
			}
		}()
		os.Stdout.Close()
		conn, err := dialUnix(sock, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fd := -1
		if rc, err := conn.(*blockingConn).f.SyscallConn(); err == nil {
			rc.Control(func(f uintptr) { fd = int(f) })
		}
		buf := make([]byte, 1<<20)
		for i := 0; ; i++ {
			if _, err := conn.Write(buf); err != nil {
				fmt.Fprintf(os.Stderr, "SURVIVED on descriptor %d: %v\n", fd, err)
				return
			}
			if i > 100 {
				t.Fatal("writes to a closed connection kept succeeding")
			}
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSocketOnStdoutSurvivesAPeerGone$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PADDOCK_CLIENT_TEST_CHILD=stdout", "PADDOCK_CLIENT_TEST_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if !strings.Contains(string(out), "SURVIVED") {
		t.Fatalf("the client's process: %v\n%s", err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}

// TestHeadIsBounded: an answer whose head does not end within maxHead
// (endless header lines, or one endless line) is refused once past it,
// and the error says so rather than blame a daemon that stopped.
func TestHeadIsBounded(t *testing.T) {
	for _, endless := range []string{"X-Header: value\r\n", "X-Line: " + strings.Repeat("v", 1000)} {
		c := rawDaemon(t, func(conn net.Conn, head string) {
			io.WriteString(conn, "HTTP/1.1 200 OK\r\n")
			b := []byte(strings.Repeat(endless, 64<<10/len(endless)+1))
			for range 64 { // 4 MiB
				if _, err := conn.Write(b); err != nil {
					return
				}
			}
		})
		_, err := c.request(context.Background(), "x", "GET", "/", nil)
		if err == nil || !strings.Contains(err.Error(), "too long") {
			t.Errorf("a head of 4 MiB: %v, want it refused as too long", err)
		}
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

// TestNothingLeftBehind: requests that end every way (an answer read
// whole, an error answer, an answer given before a large body was read,
// a cancelled wait, a protocol switch, a closed body never read) leave no
// descriptor open and no goroutine running once their bodies are closed.
func TestNothingLeftBehind(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ok", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"ok":true,"data":{}}`) })
	mux.HandleFunc("GET /err", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(404)
		io.WriteString(w, `{"ok":false,"error":{"code":"not_found","message":"no"}}`)
	})
	mux.HandleFunc("POST /refuse", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	})
	mux.HandleFunc("GET /hang", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 4<<20)) })
	c := serveUnix(t, mux)
	round := func() {
		ctx := context.Background()
		if err := c.do(ctx, "GET", "/ok", nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.do(ctx, "GET", "/err", nil, nil); err == nil {
			t.Fatal("an error answer read as success")
		}
		if err := c.doRaw(ctx, "POST", "/refuse", io.LimitReader(zeros{}, 64<<20), "", nil); err == nil {
			t.Fatal("a refusal read as success")
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		if err := c.do(cctx, "GET", "/hang", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("hang: %v", err)
		}
		cancel()
		resp, err := c.request(ctx, "big", "GET", "/big", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.body.Close() // unread
	}
	round() // the server's goroutines and the runtime's settle
	fd0, g0 := openFDs(t), runtime.NumGoroutine()
	for range 10 {
		round()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		fd, g := openFDs(t), runtime.NumGoroutine()
		if fd <= fd0 && g <= g0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 rounds: %d descriptors (was %d), %d goroutines (was %d)", fd, fd0, g, g0)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConcurrentCancelsLeaveNothing: requests from many goroutines on one
// client, their contexts ending at every point of the exchange (before
// the dial, while the head is awaited, in the middle of a body), race
// nothing (under -race) and leave no descriptor open.
func TestConcurrentCancelsLeaveNothing(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; r.Context().Err() == nil && i < 50; i++ {
			w.Write(make([]byte, 16<<10))
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
	})
	c := serveUnix(t, mux)
	fd0 := openFDs(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((g*15+i)%12)*time.Millisecond)
				resp, err := c.request(ctx, "slow", "GET", "/slow", nil)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.body)
					resp.body.Close()
				}
				if err != nil && ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("a request whose ctx ended: %v", err)
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for openFDs(t) > fd0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors open, %d before", openFDs(t), fd0)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
