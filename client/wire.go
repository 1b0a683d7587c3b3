package client

// The client speaks HTTP/1.1 itself, one request per connection, over the
// daemon's unix socket or a TCP address, rather than through net/http.
// The paddock a user types is this package and little else, and every
// CLI call pays, before main, for initialising every package its binary
// links: net/http brings crypto/tls, x509, HTTP/2, mime and their
// initialisation, about a third of a hello-world's start here, for a
// client that needs no TLS, no proxy, no HTTP/2, no cookies, no
// redirects and no pool (bench/startup; cmd/paddockd's
// TestClientLinksNoDaemon holds the CLI to it).
//
// What it speaks is the part of RFC 9112 a paddock daemon answers with:
// a request with a Content-Length body, or a chunked one when its size is
// not known (an inbox file or a bundle read from a pipe); answers framed
// by Content-Length, by chunked transfer coding (streams: exec output,
// events, a diff) or by the connection's end; 1xx interim answers
// skipped; and 101 Switching Protocols, whose connection is handed to the
// caller (an attached exec). wire_test.go holds it to net/http's reading
// of the same bytes, and to a net/http server.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// maxHead bounds an answer's status line and headers.
const maxHead = 1 << 20

// wireRequest is one request as the client sends it.
type wireRequest struct {
	method string
	path   string // absolute path and query, escaped
	header [][2]string
	body   io.Reader // nil: none
	// size is body's length when known (a *bytes.Reader or
	// *strings.Reader), else -1: it is sent chunked.
	size int64
	// idle, if set, fails the request when its connection reads or writes
	// nothing for that long (Client.WithTimeout).
	idle time.Duration
}

// wireResponse is an answer. Closing body closes the connection; an
// answer with status 101 has no body and gives its connection, already
// switched, as conn.
type wireResponse struct {
	status  int
	header  textproto.MIMEHeader
	body    io.ReadCloser
	conn    io.ReadWriteCloser
	length  int64 // Content-Length, or -1
	chunked bool  // Transfer-Encoding: chunked
}

// bodyless reports whether a request of this method carries no body when
// it has none to send (RFC 9110 gives GET, HEAD and DELETE no meaning for
// one; a POST without one says Content-Length: 0, as net/http does).
func bodyless(method string) bool {
	return method == "GET" || method == "HEAD" || method == "DELETE"
}

// requestWriters are the buffers requests are written through, kept from
// request to request (a long-lived client makes many). Nothing holds one
// once its request is written: the answer is read through a buffer of its
// own, which its body keeps until it is closed.
var requestWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}

// roundTrip sends req on a new connection to address, with host as its
// Host, and reads the answer's head. The connection closes with the
// answer's body, when ctx ends, or at once on an error.
func roundTrip(ctx context.Context, network, address, host string, req *wireRequest) (*wireResponse, error) {
	if err := checkRequest(host, req); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err // a request its caller gave up on is not sent at all
	}
	conn, err := dial(ctx, network, address, req.idle)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, &unreachableError{err} // nothing listens there
		}
		return nil, fmt.Errorf("connecting to the daemon: %w", err)
	}
	closer := &connCloser{conn: conn, ctx: ctx}
	closer.stop = context.AfterFunc(ctx, func() {
		closer.aborted.Store(true)
		conn.Close()
	})
	fail := func(err error) (*wireResponse, error) {
		closer.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	}
	upgrade := false
	for _, h := range req.header {
		upgrade = upgrade || strings.EqualFold(h[0], "Upgrade")
	}
	// A body of known size up to a buffer is written before the answer is
	// read; a larger or streamed one is written beside the reading, as
	// net/http does, so an answer the daemon gives before reading it all
	// (a refusal of a file too large) is read, not lost to a write that
	// fails once the daemon stops reading.
	bw := requestWriters.Get().(*bufio.Writer)
	bw.Reset(conn)
	release := func() { bw.Reset(nil); requestWriters.Put(bw) } // once the request is written, or could not be
	writeHead(bw, host, req, upgrade)
	var wrote chan error
	if req.body == nil || (req.size >= 0 && req.size <= int64(bw.Available())) {
		err := writeBody(bw, req)
		release()
		if err != nil {
			return fail(fmt.Errorf("sending the request: %w", err))
		}
	} else {
		wrote = make(chan error, 1)
		written := make(chan struct{})
		if _, ok := req.body.(io.Seeker); ok {
			// A body that can be sent again (a retry rewinds it) is not
			// read by this attempt once its connection is closed: Close
			// waits for the writer, which the closed connection ends.
			closer.written = written
		}
		go func() {
			defer close(written)
			err := writeBody(bw, req)
			release()
			wrote <- err
		}()
	}
	limit := &io.LimitedReader{R: conn, N: maxHead}
	br := bufio.NewReaderSize(limit, 32<<10)
	var resp *wireResponse
	for {
		resp, err = readHead(br)
		if err != nil && limit.N == 0 {
			err = fmt.Errorf("the answer's head is too long (over %d bytes)", maxHead)
		}
		if err != nil {
			if wrote != nil { // why the daemon stopped reading may be the writer's error
				select {
				case werr := <-wrote:
					if werr != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
						err = fmt.Errorf("%w (sending the request: %v)", err, werr)
					}
				default:
				}
			}
			return fail(err)
		}
		if resp.status >= 200 || resp.status == 101 {
			break
		}
		// An interim answer (100 Continue, 103 Early Hints): the final
		// one follows on the same connection.
	}
	limit.N = math.MaxInt64
	if resp.status == 101 {
		if !upgrade {
			return fail(errors.New("the daemon switched protocols that were not asked for"))
		}
		if wrote != nil {
			if err := <-wrote; err != nil {
				return fail(fmt.Errorf("sending the request: %w", err))
			}
		}
		resp.conn = &switched{r: br, w: conn, c: closer}
		return resp, nil
	}
	resp.body = &bodyCloser{r: framedBody(br, req.method, resp), c: closer}
	return resp, nil
}

// checkRequest refuses what would let a value reach the wire as
// something else: a line break in a header or the target, a target that
// is not an escaped absolute path.
func checkRequest(host string, req *wireRequest) error {
	if !strings.HasPrefix(req.path, "/") || !printableASCII(req.path, false) {
		return fmt.Errorf("%s %q: not an escaped absolute path", req.method, req.path)
	}
	if !printableASCII(host, false) {
		return fmt.Errorf("host %q: not a host name", host)
	}
	for _, h := range req.header {
		if !printableASCII(h[0], false) || strings.ContainsRune(h[0], ':') {
			return fmt.Errorf("header name %q is not one", h[0])
		}
		if !printableASCII(h[1], true) {
			return fmt.Errorf("the value of header %s holds a control character or a line break", h[0])
		}
	}
	return nil
}

// printableASCII reports whether s is visible ASCII (spaces too if
// spaces), with no control character: what a request line and a header
// line may carry.
func printableASCII(s string, spaces bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c > '~' || c < ' ' || (c == ' ' && !spaces) {
			return false
		}
	}
	return true
}

func writeHead(w *bufio.Writer, host string, req *wireRequest, upgrade bool) {
	fmt.Fprintf(w, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: paddock-client\r\n", req.method, req.path, host)
	switch {
	case req.body == nil && bodyless(req.method):
	case req.body == nil:
		w.WriteString("Content-Length: 0\r\n")
	case req.size >= 0:
		fmt.Fprintf(w, "Content-Length: %d\r\n", req.size)
	default:
		w.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if !upgrade {
		w.WriteString("Connection: close\r\n")
	}
	for _, h := range req.header {
		fmt.Fprintf(w, "%s: %s\r\n", h[0], h[1])
	}
	w.WriteString("\r\n")
}

// writeBody writes req's body, framed as writeHead said, and flushes.
func writeBody(w *bufio.Writer, req *wireRequest) error {
	switch {
	case req.body == nil:
	case req.size >= 0:
		n, err := io.Copy(w, req.body)
		if err != nil {
			return err
		}
		if n != req.size {
			return fmt.Errorf("the body held %d bytes, not the %d it was said to", n, req.size)
		}
	default:
		buf := make([]byte, 32<<10)
		for {
			n, err := req.body.Read(buf)
			if n > 0 {
				fmt.Fprintf(w, "%x\r\n", n)
				w.Write(buf[:n])
				if _, werr := w.WriteString("\r\n"); werr != nil {
					return werr
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("reading the body to send: %w", err)
			}
		}
		w.WriteString("0\r\n\r\n")
	}
	return w.Flush()
}

// readHead reads a status line and its headers.
func readHead(br *bufio.Reader) (*wireResponse, error) {
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	proto, rest, _ := strings.Cut(line, " ")
	code, _, _ := strings.Cut(rest, " ")
	if proto != "HTTP/1.1" { // a daemon answers a 1.1 request in 1.1
		return nil, fmt.Errorf("not an HTTP/1.1 answer: %q", truncate(line))
	}
	status, err := strconv.Atoi(code)
	if err != nil || len(code) != 3 || status < 100 {
		return nil, fmt.Errorf("an answer with no status: %q", truncate(line))
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("reading the answer's headers: %w", err)
	}
	resp := &wireResponse{status: status, header: h}
	if err := framing(resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// framedBody is the reader of an answer's body as RFC 9112 §6.3 frames
// it: none for HEAD and for 1xx, 204 and 304; chunked when
// Transfer-Encoding says so (whatever Content-Length says); Content-Length;
// otherwise the connection's end.
func framedBody(br *bufio.Reader, method string, resp *wireResponse) io.Reader {
	switch {
	case method == "HEAD" || resp.status < 200 || resp.status == 204 || resp.status == 304:
		return eofReader{}
	case resp.chunked:
		return &chunkedReader{br: br}
	case resp.length >= 0:
		return &exactReader{r: br, left: resp.length}
	}
	return br
}

// framing reads an answer's Content-Length and Transfer-Encoding, and
// refuses what net/http refuses in any answer, interim or final, framed
// by them or not: a Content-Length that is not one decimal number, said
// once or said again alike (a list such as "1,1", which RFC 9110 lets a
// recipient read, and values written differently are refused), and a
// transfer coding other than chunked alone.
func framing(resp *wireResponse) error {
	resp.length = -1
	if cl := resp.header.Values("Content-Length"); len(cl) > 0 {
		first := strings.TrimSpace(cl[0])
		m, err := strconv.ParseUint(first, 10, 63)
		for _, v := range cl[1:] {
			if strings.TrimSpace(v) != first {
				err = errors.New("differing values")
			}
		}
		if err != nil {
			return fmt.Errorf("an answer with Content-Length %q", strings.Join(cl, ","))
		}
		resp.length = int64(m)
	}
	if te := resp.header.Values("Transfer-Encoding"); len(te) > 0 {
		if len(te) != 1 || !strings.EqualFold(strings.TrimSpace(te[0]), "chunked") {
			return fmt.Errorf("an answer in transfer coding %q, which this client does not decode", strings.Join(te, ","))
		}
		resp.chunked = true
	}
	return nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// exactReader reads a body of a said length, and fails when the
// connection ends before it.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	if e.left == 0 && err == nil {
		err = io.EOF
	}
	return n, err
}

// chunkedReader decodes the chunked transfer coding (RFC 9112 §7.1):
// chunk extensions are ignored, trailers read and dropped.
type chunkedReader struct {
	br   *bufio.Reader
	left int64 // of the current chunk
	err  error
}

// maxChunkLine bounds a chunk's size line, extensions included.
const maxChunkLine = 4096

func (c *chunkedReader) Read(p []byte) (int, error) {
	for c.err == nil && c.left == 0 {
		c.err = c.next()
	}
	if c.err != nil {
		return 0, c.err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= int64(n)
	if c.left == 0 && err == nil {
		err = c.crlf()
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	c.err = err
	return n, err
}

// next reads a chunk's size line; after the last chunk it reads the
// trailers and gives io.EOF.
func (c *chunkedReader) next() error {
	line, err := c.line()
	if err != nil {
		return err
	}
	// Trailing blanks go, then extensions: blanks before a ';' are
	// refused, as net/http refuses them.
	size, _, _ := strings.Cut(strings.TrimRight(line, " \t"), ";")
	n, err := strconv.ParseUint(size, 16, 63)
	if err != nil {
		return fmt.Errorf("a chunk with size %q", truncate(line))
	}
	if n > 0 {
		c.left = int64(n)
		return nil
	}
	return c.trailers()
}

// maxTrailers bounds the trailers after the last chunk, as net/http's
// buffer bounds them.
const maxTrailers = 4 << 10

// trailers reads the trailer section, header lines up to the empty line,
// and drops it; it gives io.EOF at its end. The section is the empty line
// alone, or lines ended by CRLF CRLF, within maxTrailers: what net/http
// reads.
func (c *chunkedReader) trailers() error {
	var raw []byte
	for {
		line, err := c.br.ReadSlice('\n')
		raw = append(raw, line...)
		if len(raw) > maxTrailers {
			return errors.New("the answer's trailers are too long")
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading the answer's trailers: %w", err)
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			break
		}
	}
	switch {
	case string(raw) == "\r\n":
		return io.EOF
	case !bytes.HasSuffix(raw, []byte("\r\n\r\n")):
		return errors.New("the answer's trailers are not ended by CRLF CRLF")
	}
	if _, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw))).ReadMIMEHeader(); err != nil {
		return fmt.Errorf("reading the answer's trailers: %w", err)
	}
	return io.EOF
}

func (c *chunkedReader) line() (string, error) {
	b, err := c.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull || len(b) > maxChunkLine {
		return "", errors.New("a chunk's size line is too long")
	}
	if err == io.EOF {
		return "", io.ErrUnexpectedEOF
	}
	if err != nil {
		return "", err
	}
	if len(b) < 2 || b[len(b)-2] != '\r' {
		return "", errors.New("a chunk line not ended by CRLF")
	}
	return string(b[:len(b)-2]), nil
}

// crlf reads the CRLF that ends a chunk's data.
func (c *chunkedReader) crlf() error {
	var b [2]byte
	if _, err := io.ReadFull(c.br, b[:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if b != [2]byte{'\r', '\n'} {
		return errors.New("a chunk's data not ended by CRLF")
	}
	return nil
}

// dial connects to the daemon. A unix socket is connected with the
// system's calls and read and written with blocking ones: a CLI call
// makes one request at a time, and the runtime's network poller, which
// net's connections start (an epoll set, an eventfd, a thread waiting on
// them), would be a tenth of its start. A socket whose backlog is full
// (a daemon called faster than it accepts) refuses a connect that does
// not block with EAGAIN, as net's does: it is tried again, under ctx and
// idle, until there is room. TCP goes through net, under ctx.
func dial(ctx context.Context, network, address string, idle time.Duration) (io.ReadWriteCloser, error) {
	if network == "unix" {
		waited, wait := time.Duration(0), time.Millisecond
		for {
			c, err := dialUnix(address, idle)
			if !errors.Is(err, syscall.EAGAIN) {
				return c, err
			}
			if idle > 0 && waited >= idle {
				return nil, fmt.Errorf("the daemon's backlog stayed full for %v: %w (%w)", idle, os.ErrDeadlineExceeded, err)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			waited += wait
			wait = min(2*wait, 50*time.Millisecond)
		}
	}
	var d net.Dialer
	if idle > 0 {
		d.Timeout = idle
	}
	c, err := d.DialContext(ctx, network, address)
	if err != nil || idle <= 0 {
		return c, err
	}
	ic := &idleConn{Conn: c}
	ic.idle = idle
	ic.moved()
	return ic, nil
}

func dialUnix(path string, idle time.Duration) (io.ReadWriteCloser, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	if fd <= 2 {
		// The program closed a standard descriptor and the socket took
		// its number: os kills a program whose write to descriptor 1 or 2
		// fails with EPIPE (a closed stdout), and a daemon that closes the
		// connection while the client writes would do that. The socket
		// moves above them.
		nfd, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 3)
		syscall.Close(fd)
		if errno != 0 {
			return nil, os.NewSyscallError("fcntl", errno)
		}
		fd = int(nfd)
	}
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		syscall.Close(fd)
		return nil, &net.OpError{Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: path, Net: "unix"}, Err: os.NewSyscallError("connect", err)}
	}
	if idle > 0 {
		// The kernel's bound on each blocking read and write: no timer of
		// the runtime's (whose first one starts the network poller).
		tv := syscall.NsecToTimeval(idle.Nanoseconds())
		syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
		syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv)
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		syscall.Close(fd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	b := &blockingConn{f: os.NewFile(uintptr(fd), path)}
	b.idle = idle
	b.moved()
	return b, nil
}

// progress is WithTimeout's bound on a connection: it is idle when
// neither direction moved a byte for idle. Each read or write is given
// idle afresh (the caller may have been the idle one, between two
// writes of an attached exec's stdin); one that runs out while the other
// direction moved (a body the daemon reads slowly while the client waits
// for its answer) waits on for what is left of idle after that.
type progress struct {
	idle time.Duration
	last atomic.Int64 // time.Now().UnixNano() when a byte last moved
}

func (p *progress) moved() { p.last.Store(time.Now().UnixNano()) }

// left is how long the connection may stay idle from now.
func (p *progress) left() time.Duration {
	return p.idle - time.Duration(time.Now().UnixNano()-p.last.Load())
}

// blockingConn is a connected unix socket read and written with blocking
// calls. Close shuts the socket down first, which ends a read or write
// another goroutine is blocked in (closing the file alone would wait for
// it). With idle, SO_RCVTIMEO and SO_SNDTIMEO bound each call.
type blockingConn struct {
	progress
	f    *os.File
	once sync.Once
	err  error
	// shortened says a call set SO_RCVTIMEO (0) or SO_SNDTIMEO (1) to
	// less than idle, for restore to set it back.
	shortened [2]atomic.Bool
}

func timeoutIndex(opt int) int {
	if opt == syscall.SO_SNDTIMEO {
		return 1
	}
	return 0
}

func (b *blockingConn) Read(p []byte) (int, error) {
	defer b.restore(syscall.SO_RCVTIMEO)()
	for {
		n, err := b.f.Read(p)
		if n > 0 {
			b.moved()
			return n, err
		}
		if !b.waitOn(err, syscall.SO_RCVTIMEO) {
			return b.timedOut(n, err)
		}
	}
}

// Write writes p a piece at a time, so that the progress of a large p
// the daemon reads slowly is seen (by a read waiting for its answer) as
// it is made, not once the whole has gone.
func (b *blockingConn) Write(p []byte) (int, error) {
	defer b.restore(syscall.SO_SNDTIMEO)()
	written := 0
	for written < len(p) {
		n, err := b.f.Write(p[written:min(len(p), written+64<<10)])
		written += n
		if n > 0 {
			b.moved()
		}
		if err != nil && !b.waitOn(err, syscall.SO_SNDTIMEO) {
			return b.timedOut(written, err)
		}
	}
	return written, nil
}

// waitOn reports whether a call that failed with err timed out while the
// connection moved within idle, and if so sets its timeout (opt) to what
// is left of idle, for the call to wait on.
func (b *blockingConn) waitOn(err error, opt int) bool {
	if b.idle <= 0 || !errors.Is(err, syscall.EAGAIN) {
		return false
	}
	left := b.left()
	if left <= 0 {
		return false
	}
	b.shortened[timeoutIndex(opt)].Store(true)
	b.setTimeout(opt, max(left, time.Millisecond)) // a zero timeval is none
	return true
}

// restore returns what sets opt back to idle, for the next call, if a
// call shortened it.
func (b *blockingConn) restore(opt int) func() {
	if b.idle <= 0 {
		return func() {}
	}
	return func() {
		if b.shortened[timeoutIndex(opt)].Swap(false) {
			b.setTimeout(opt, b.idle)
		}
	}
}

func (b *blockingConn) setTimeout(opt int, d time.Duration) {
	tv := syscall.NsecToTimeval(d.Nanoseconds())
	if rc, err := b.f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { syscall.SetsockoptTimeval(int(fd), syscall.SOL_SOCKET, opt, &tv) })
	}
}

// Close may be called twice, and at once (a context's end and the body's
// Close): the shutdown goes through the file's own reference to its
// descriptor, never a number kept aside, which once the file is closed
// may be another connection's.
func (b *blockingConn) Close() error {
	b.once.Do(func() {
		if rc, err := b.f.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { syscall.Shutdown(int(fd), syscall.SHUT_RDWR) })
		}
		b.err = b.f.Close()
	})
	return b.err
}

// timedOut says what a blocking call's EAGAIN means: SO_RCVTIMEO or
// SO_SNDTIMEO passed.
func (b *blockingConn) timedOut(n int, err error) (int, error) {
	if errors.Is(err, syscall.EAGAIN) {
		err = fmt.Errorf("the daemon sent and read nothing for %v: %w", b.idle, os.ErrDeadlineExceeded)
	}
	return n, err
}

// idleConn is a net connection held to progress as blockingConn is, by
// net's deadlines.
type idleConn struct {
	progress
	net.Conn
}

func (c *idleConn) Read(p []byte) (int, error) {
	deadline := time.Now().Add(c.idle)
	for {
		c.Conn.SetReadDeadline(deadline)
		n, err := c.Conn.Read(p)
		if n > 0 {
			c.moved()
			return n, err
		}
		left := c.left()
		if !errors.Is(err, os.ErrDeadlineExceeded) || left <= 0 {
			return n, err
		}
		deadline = time.Now().Add(left)
	}
}

// Write writes p a piece at a time, so that a large p the daemon reads
// slowly but steadily is not one call held to idle.
func (c *idleConn) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		piece := p[written:min(len(p), written+64<<10)]
		deadline := time.Now().Add(c.idle)
		for len(piece) > 0 {
			c.Conn.SetWriteDeadline(deadline)
			n, err := c.Conn.Write(piece)
			written += n
			piece = piece[n:]
			if n > 0 {
				c.moved()
			}
			if err != nil {
				left := c.left()
				if !errors.Is(err, os.ErrDeadlineExceeded) || left <= 0 {
					return written, err
				}
				deadline = time.Now().Add(left)
			}
		}
	}
	return written, nil
}

// connCloser closes a connection once, and stops its context's watch.
type connCloser struct {
	once sync.Once
	conn io.ReadWriteCloser
	stop func() bool
	err  error
	ctx  context.Context
	// aborted is set when ctx's end closed the connection: what a read or
	// write then meets (an end of file, after the shutdown) is ctx's
	// error, never the answer's end.
	aborted atomic.Bool
	// written, if set, is closed once the request's body is no longer
	// being written (beside the reading of the answer).
	written chan struct{}
}

// cause is err as the caller is to see it: ctx's error when ctx's end
// closed the connection (as net/http gives it), so that a body framed by
// the connection's end does not read as whole, nor a framed one as the
// daemon's failure.
func (c *connCloser) cause(err error) error {
	if err != nil && c.aborted.Load() {
		if ctxErr := c.ctx.Err(); ctxErr != nil {
			return ctxErr
		}
	}
	return err
}

func (c *connCloser) Close() error {
	c.once.Do(func() {
		c.stop()
		c.err = c.conn.Close()
		if c.written != nil {
			<-c.written
		}
	})
	return c.err
}

type bodyCloser struct {
	r io.Reader
	c *connCloser
}

func (b *bodyCloser) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	return n, b.c.cause(err)
}
func (b *bodyCloser) Close() error { return b.c.Close() }

// switched is a connection after 101: what the reader of the answer's
// head holds already is read first.
type switched struct {
	r *bufio.Reader
	w io.Writer
	c *connCloser
}

func (s *switched) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	return n, s.c.cause(err)
}

func (s *switched) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	return n, s.c.cause(err)
}

func (s *switched) Close() error { return s.c.Close() }
