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
	"syscall"
	"testing"
	"time"
)

// The tests of this file: what the transport holds stays bounded (an
// answer's head and trailers) and is released however a request ends
// (descriptors, connections, goroutines), against daemons that are hostile
// or broken in ways a net/http server is not.

// rawDaemon listens on a unix socket in a test directory and answers
// every connection with serve, which gets the request's head as read: a
// daemon that is hostile or broken in ways a net/http server is not.
func rawDaemon(t *testing.T, serve func(conn net.Conn, head string)) *Client {
	t.Helper()
	return unixDaemon(t, func(conn net.Conn) {
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
	})
}

// unixDaemon listens on a unix socket in a test directory and hands
// every connection to handle, closing it after; the listener is closed,
// and its loop ended, with the test.
func unixDaemon(t *testing.T, handle func(conn net.Conn)) *Client {
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
				handle(conn)
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
