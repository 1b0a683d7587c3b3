package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// readWire reads one answer from raw bytes as roundTrip does, body whole.
func readWire(raw []byte, method string) (int, []byte, error) {
	br := bufio.NewReader(bytes.NewReader(raw))
	var resp *wireResponse
	var err error
	for {
		if resp, err = readHead(br); err != nil {
			return 0, nil, err
		}
		if resp.status >= 200 || resp.status == 101 {
			break
		}
	}
	if resp.status == 101 {
		return 101, nil, nil
	}
	b, err := io.ReadAll(framedBody(br, method, resp))
	return resp.status, b, err
}

// readNetHTTP reads the same bytes with net/http.
func readNetHTTP(raw []byte, method string) (int, []byte, error) {
	req, _ := http.NewRequest(method, "http://paddock/", nil)
	br := bufio.NewReader(bytes.NewReader(raw))
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return 0, nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == 101 {
			if resp.StatusCode == 101 {
				return 101, nil, nil
			}
			b, err := io.ReadAll(resp.Body)
			return resp.StatusCode, b, err
		}
	}
}

var wireSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\n",
	"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
	"HTTP/1.1 204 No Content\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n\x01\x02",
	"HTTP/1.1 200 OK\r\n\r\nuntil the end",
	"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
	"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	"HTTP/1.1 2x0 OK\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-A: b\r\n continued\r\nContent-Length: 0\r\n\r\n",
	// Framings RFC 9110/9112 let a recipient accept and net/http
	// refuses: refused here too.
	"HTTP/1.1 200 OK\r\nContent-Length: 1,1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 01\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nContent-Length: -0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1 ;a=b\r\nx\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;a=b \r\nx\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nA: b\r\nC: d\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nA: b\n\r\n",
	// net/http reads Content-Length in every answer, whatever frames it.
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: A\r\n\r\n0\r\n\r\n",
	"HTTP/1.1 100 Continue\r\nContent-Length: A\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 101 Switching Protocols\r\nContent-Length: A\r\nUpgrade: x\r\n\r\n",
	"HTTP/1.1 204 No Content\r\nContent-Length: 1,1\r\n\r\n",
}

// FuzzWireAgreesWithNetHTTP: whatever bytes a daemon sends, an answer the
// client's own reader accepts is one net/http reads the same: the same
// status and the same body. (The converse does not hold everywhere:
// net/http is lenient where this reader refuses, such as a chunk line
// without its CR.)
func FuzzWireAgreesWithNetHTTP(f *testing.F) {
	for _, s := range wireSeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, raw []byte, head bool) {
		method := "GET"
		if head {
			method = "HEAD"
		}
		status, body, err := readWire(raw, method)
		if err != nil {
			return
		}
		nstatus, nbody, nerr := readNetHTTP(raw, method)
		if nerr != nil {
			t.Fatalf("%q: ours read status %d body %q; net/http refused it: %v", raw, status, body, nerr)
		}
		if status != nstatus || !bytes.Equal(body, nbody) {
			t.Fatalf("%q: ours %d %q, net/http %d %q", raw, status, body, nstatus, nbody)
		}
	})
}

// TestWireReadsWhatNetHTTPReads: the well-formed seeds read alike, and the
// malformed ones are refused rather than read as something else.
func TestWireReadsWhatNetHTTPReads(t *testing.T) {
	for _, s := range wireSeeds {
		status, body, err := readWire([]byte(s), "GET")
		nstatus, nbody, nerr := readNetHTTP([]byte(s), "GET")
		switch {
		case err == nil && (nerr != nil || status != nstatus || !bytes.Equal(body, nbody)):
			t.Errorf("%q: ours %d %q, net/http %d %q %v", s, status, body, nstatus, nbody, nerr)
		case err != nil && nerr == nil && !strings.HasPrefix(s, "HTTP/1.0"):
			t.Errorf("%q: net/http reads %d %q, ours refused it: %v", s, nstatus, nbody, err)
		}
	}
	// Truncated bodies are errors, not short reads.
	for _, s := range []string{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"} {
		if _, _, err := readWire([]byte(s), "GET"); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%q: %v, want unexpected EOF", s, err)
		}
	}
}

// serveUnix serves h on a unix socket in a test directory, as the daemon
// does, and returns a Client of it.
func serveUnix(t *testing.T, h http.Handler) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return Unix(sock)
}

// TestWireAgainstNetHTTPServer drives the client's transport against a
// net/http server, as the daemon is: each framing the daemon answers with,
// a request body streamed in chunks, an answer given before a large body
// was read, a protocol switch, and an ended context.
func TestWireAgainstNetHTTPServer(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	mux := http.NewServeMux()
	mux.HandleFunc("GET /fixed", func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "paddock" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "host "+r.Host+" auth "+r.Header.Get("Authorization"), 400)
			return
		}
		w.Write(big)
	})
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		for i := range 5 {
			fmt.Fprintf(w, "line %d\n", i)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("DELETE /empty", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		fmt.Fprintf(w, "%d %s %d %v", n, hex.EncodeToString(h.Sum(nil)), r.ContentLength, r.TransferEncoding)
	})
	mux.HandleFunc("POST /refuse", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	})
	mux.HandleFunc("POST /switch", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
		brw.WriteString("first:" + string(body) + "\n") // arrives with the head
		brw.Flush()
		line, _ := brw.ReadString('\n')
		brw.WriteString("echo:" + line)
		brw.Flush()
	})
	mux.HandleFunc("GET /hang", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("start\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	c := serveUnix(t, mux).WithToken("tok")
	ctx := context.Background()

	resp, err := c.request(ctx, "fixed", "GET", "/fixed", nil)
	if err != nil || resp.status != 200 {
		t.Fatalf("fixed: %v %+v", err, resp)
	}
	if b, err := io.ReadAll(resp.body); err != nil || !bytes.Equal(b, big) {
		t.Fatalf("fixed: %d bytes, %v", len(b), err)
	}
	resp.body.Close()

	resp, err = c.request(ctx, "stream", "GET", "/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.body); err != nil || string(b) != "line 0\nline 1\nline 2\nline 3\nline 4\n" {
		t.Fatalf("stream: %q %v", b, err)
	}
	resp.body.Close()

	if resp, err = c.request(ctx, "empty", "DELETE", "/empty", nil); err != nil || resp.status != 204 {
		t.Fatalf("empty: %v %+v", err, resp)
	}
	resp.body.Close()

	sum := sha256.Sum256(big)
	want := fmt.Sprintf("%d %s", len(big), hex.EncodeToString(sum[:]))
	// Known size: Content-Length. Unknown (a pipe): chunked.
	for _, tc := range []struct {
		name string
		body io.Reader
		tail string
	}{
		{"bytes", bytes.NewReader(big), fmt.Sprintf(" %d []", len(big))},
		{"pipe", io.MultiReader(bytes.NewReader(big[:1000]), bytes.NewReader(big[1000:])), " -1 [chunked]"},
		{"none", nil, " 0 []"},
	} {
		resp, err := c.request(ctx, "echo", "POST", "/echo", tc.body)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b, _ := io.ReadAll(resp.body)
		resp.body.Close()
		w := want + tc.tail
		if tc.body == nil {
			e := sha256.Sum256(nil)
			w = "0 " + hex.EncodeToString(e[:]) + tc.tail
		}
		if string(b) != w {
			t.Errorf("%s: the server read %q, want %q", tc.name, b, w)
		}
	}

	// A refusal before a 64 MiB streamed body is read is the answer.
	pr, pw := io.Pipe()
	go func() {
		chunk := make([]byte, 1<<20)
		for range 64 {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	_, err = c.send(ctx, "POST", "/refuse", pr, "application/octet-stream")
	pr.CloseWithError(errors.New("done"))
	if err == nil || !strings.Contains(err.Error(), "413") {
		t.Errorf("a refusal of a large body: %v, want status 413", err)
	}

	// A protocol switch hands over the connection, with what came after
	// the head.
	resp, err = c.request(ctx, "switch", "POST", "/switch", strings.NewReader("hi"), [2]string{"Connection", "Upgrade"}, [2]string{"Upgrade", "test"})
	if err != nil || resp.status != 101 || resp.conn == nil {
		t.Fatalf("switch: %v %+v", err, resp)
	}
	br := bufio.NewReader(resp.conn)
	if l, _ := br.ReadString('\n'); l != "first:hi\n" {
		t.Errorf("switch: first line %q", l)
	}
	resp.conn.Write([]byte("back\n"))
	if l, _ := br.ReadString('\n'); l != "echo:back\n" {
		t.Errorf("switch: echo %q", l)
	}
	resp.conn.Close()

	// An ended context ends a body being read.
	cctx, cancel := context.WithCancel(ctx)
	resp, err = c.request(cctx, "hang", "GET", "/hang", nil)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if _, err := io.ReadAll(resp.body); err == nil {
		t.Error("a cancelled read ended without an error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a cancelled read took %v", d)
	}
	resp.body.Close()
}

// TestWireRefusesInjection: a value that would become another header or
// request line is refused before anything is sent.
func TestWireRefusesInjection(t *testing.T) {
	sent := false
	c := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sent = true }))
	ctx := context.Background()
	for _, tc := range []struct {
		c    *Client
		path string
	}{
		{c.WithToken("tok\r\nX-Paddock-Agent: 1"), "/v1/status"},
		{c.WithToken("tok\n"), "/v1/status"},
		{c, "/v1/runs/a b"},
		{c, "/v1/runs/a\r\nX: y"},
		{c, "v1/status"},
		{c, "/v1/runs/é"},
	} {
		if _, err := tc.c.request(ctx, "x", "GET", tc.path, nil); err == nil {
			t.Errorf("%q with token %q was sent", tc.path, tc.c.token)
		}
	}
	if sent {
		t.Error("the server got a request")
	}
}

// TestWireUnreachable: nothing listening is Unreachable; a socket that
// cannot be opened is an error that says so, not "unreachable".
func TestWireUnreachable(t *testing.T) {
	dir := t.TempDir()
	_, err := Unix(filepath.Join(dir, "none.sock")).Status(context.Background())
	if !Unreachable(err) {
		t.Errorf("no socket: %v, want unreachable", err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	_, err = Unix(filepath.Join(file, "s.sock")).Status(context.Background()) // below a file
	if err == nil || Unreachable(err) {
		t.Errorf("a socket below a file: %v, want an error that is not unreachable", err)
	}
}

// TestWireTimeout: a daemon that takes the connection and never answers
// fails a call bounded by WithTimeout, on the unix socket (the kernel's
// bound) and on TCP (net's deadline), with os.ErrDeadlineExceeded.
func TestWireTimeout(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	for _, c := range []struct {
		network, address string
		client           func(string) *Client
	}{
		{"unix", sock, Unix},
		{"tcp", "127.0.0.1:0", func(a string) *Client { return TCP(a, "tok") }},
	} {
		ln, err := net.Listen(c.network, c.address)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close() // held open, never answered
			}
		}()
		start := time.Now()
		_, err = c.client(ln.Addr().String()).WithTimeout(200 * time.Millisecond).Status(context.Background())
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: %v, want a deadline exceeded", c.network, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", c.network, d)
		}
	}
}

// TestWireOverTCP: the same transport over TCP, with its Host and token.
func TestWireOverTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"ok":true,"data":{"version":%q}}`, r.Host+" "+r.Header.Get("Authorization"))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	st, err := TCP(ln.Addr().String(), "tok").Status(context.Background())
	if err != nil || st.Version != ln.Addr().String()+" Bearer tok" {
		t.Fatalf("%+v %v", st, err)
	}
}

// serveStarted serves, on the unix socket sock, a daemon whose status
// says "started": what an OnUnreachable hook starts in these tests.
func serveStarted(t *testing.T, sock string) error {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"ok":true,"data":{"version":"started"}}`)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return nil
}

// openFDs counts this process's open descriptors, or skips the test
// where /proc does not say.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	return len(ents)
}

// TestOnUnreachable: concurrent requests that find nothing listening call
// the hook once, and are sent again once it has started a server; a hook
// that fails gives its error, which still reads as unreachable when it
// wraps the first.
func TestOnUnreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	var calls atomic.Int32
	c := Unix(sock).OnUnreachable(func(ctx context.Context, err error) error {
		calls.Add(1)
		if !Unreachable(err) {
			t.Errorf("the hook got %v", err)
		}
		time.Sleep(50 * time.Millisecond) // the others wait for it
		return serveStarted(t, sock)
	})
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, err := c.WithTimeout(5 * time.Second).Status(context.Background()); err != nil || st.Version != "started" {
				t.Errorf("%+v %v", st, err)
			}
		}()
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("the hook ran %d times", n)
	}

	none := filepath.Join(t.TempDir(), "none.sock")
	_, err := Unix(none).OnUnreachable(func(_ context.Context, err error) error {
		return fmt.Errorf("no daemon here: %w", err)
	}).Status(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no daemon here") || !Unreachable(err) {
		t.Errorf("a failing hook: %v", err)
	}
}
