package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/redact"
)

// maxClientFrame bounds a frame from the client: typed input and resizes
// come in small pieces.
const maxClientFrame = 64 << 10

// execAttach answers POST /v1/runs/{id}/exec/attach: an exec whose stdin
// streams in as the output streams out, on a terminal when the request asks
// for one (see paddock.AttachProtocol for the frames). The request is read
// and checked as exec/stream's is; then the connection is switched over,
// the command runs through the Broker (and the sandbox) with what
// the frames bring, and its result (or the refusal) is the last frame.
// Every output frame passes the run's funnel. The command lasts as long
// as the client stays: a connection that drops ends it.
func (h *brokerHandlers) execAttach(w http.ResponseWriter, r *http.Request) {
	var req paddock.ExecRequest
	if err := decodeN(r, &req, maxExecBody); err != nil {
		writeError(w, err)
		return
	}
	if err := operatorOnly(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if !headerHas(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), paddock.AttachProtocol) {
		writeError(w, paddock.Errorf(paddock.CodeBadRequest, "exec/attach is an HTTP/1.1 upgrade: send Connection: Upgrade and Upgrade: %s", paddock.AttachProtocol))
		return
	}
	id := r.PathValue("id")
	red, err := h.broker.Redactor(r.Context(), id)
	if err != nil {
		h.api.fail(w, r, err)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, paddock.Errorf(paddock.CodeUnsupported, "this connection cannot be switched over (%v)", err))
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Time{}) // the command's own limits bound it, not the server's timeouts
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + paddock.AttachProtocol + "\r\n\r\n")
	if brw.Flush() != nil {
		return
	}
	// Once hijacked the request's context no longer follows the client:
	// the frames' reader cancels it when the connection drops.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	out := &frameWriter{conn: conn, red: red}
	stdin := newInputQueue()
	defer stdin.end(io.EOF)
	resize := make(chan paddock.TerminalSize, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		readFrames(brw.Reader, stdin, resize, cancel)
	}()
	res, err := h.broker.ExecAttach(ctx, id, req, paddock.ExecIO{Stdin: stdin, Resize: resize,
		Stdout: out.stream(paddock.FrameStdout), Stderr: out.stream(paddock.FrameStderr)})
	var end paddock.AttachEnd
	if err != nil {
		var pe *paddock.Error
		if !errors.As(err, &pe) || pe.Code == paddock.CodeInternal {
			h.api.log().Error("exec failed", "path", r.URL.Path, "err", err)
			pe = &paddock.Error{Code: paddock.CodeInternal, Message: "internal error (details are in the daemon log)"}
		}
		end.Error = pe
	} else {
		res.Stdout, res.Stderr = "", "" // already streamed
		end.Result = res
	}
	b, _ := json.Marshal(end)
	// The end may quote the command's arguments (an error): it passes the
	// run's funnel whole, as the output did.
	out.send(paddock.FrameResult, red.Secrets(redact.Shapes(b)))
	// The result is the end: what the client sends after it is not read.
	conn.Close()
	stdin.end(io.EOF)
	<-readerDone
}

// readFrames reads the client's frames until its connection ends: stdin
// into stdin, sizes into resize (only the latest one waits), and cancels
// the command when the connection drops.
func readFrames(r *bufio.Reader, stdin *inputQueue, resize chan paddock.TerminalSize, cancel func()) {
	defer close(resize)
	for {
		kind, p, err := paddock.ReadFrame(r, maxClientFrame)
		if err != nil {
			// The command is ended before its stdin is: a command that
			// saw the end of its input first could finish as if its
			// client had meant it.
			cancel()
			stdin.end(io.ErrUnexpectedEOF)
			return
		}
		switch kind {
		case paddock.FrameStdin:
			stdin.put(p)
		case paddock.FrameEOF:
			stdin.end(io.EOF)
		case paddock.FrameResize:
			var sz paddock.TerminalSize
			if json.Unmarshal(p, &sz) != nil || sz.Rows == 0 || sz.Cols == 0 {
				continue
			}
			select {
			case resize <- sz:
			default:
				select { // replace the size not taken yet
				case <-resize:
				default:
				}
				resize <- sz
			}
		}
	}
}

// maxQueuedInput bounds the stdin an attached command has not taken yet;
// past it the client's frames wait.
const maxQueuedInput = 1 << 20

// inputQueue is an attached command's stdin: what the client sent, until
// the command reads it. Reading the client's frames waits on it only past
// maxQueuedInput, so that a resize, or the client's going away, is seen
// while the command is not reading.
type inputQueue struct {
	mu   sync.Mutex
	cond *sync.Cond
	buf  []byte
	err  error // the end: io.EOF, or how the client went
}

func newInputQueue() *inputQueue {
	q := &inputQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// put queues p, waiting while the queue is full; after the end it drops p.
func (q *inputQueue) put(p []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.buf) >= maxQueuedInput && q.err == nil {
		q.cond.Wait()
	}
	if q.err == nil {
		q.buf = append(q.buf, p...)
		q.cond.Broadcast()
	}
}

// end ends the input (the first end holds): what is queued is still read.
func (q *inputQueue) end(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err == nil {
		q.err = err
	}
	q.cond.Broadcast()
}

func (q *inputQueue) Read(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.buf) == 0 && q.err == nil {
		q.cond.Wait()
	}
	if len(q.buf) == 0 {
		return 0, q.err
	}
	n := copy(p, q.buf)
	q.buf = q.buf[n:]
	if len(q.buf) == 0 {
		q.buf = nil
	}
	q.cond.Broadcast()
	return n, nil
}

// frameWriter writes frames to the client, one at a time, each masked by
// the run's funnel and within WriteStall.
type frameWriter struct {
	mu   sync.Mutex
	conn net.Conn
	red  *redact.Redactor
	dead bool
}

func (f *frameWriter) send(kind byte, p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return
	}
	f.conn.SetWriteDeadline(time.Now().Add(WriteStall))
	if err := paddock.WriteFrame(f.conn, kind, p); err != nil {
		f.dead = true // a gone or stalled client: the command's output is still capped and recorded
	}
}

// stream is an output stream as frames of kind.
func (f *frameWriter) stream(kind byte) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		total := len(p)
		for len(p) > 0 {
			n := min(len(p), paddock.MaxFrame/2) // room for what masking adds
			b := p[:n]
			if f.red != nil && f.red.Declared() {
				b = f.red.Secrets(b)
			}
			f.send(kind, b)
			p = p[n:]
		}
		return total, nil
	})
}

// headerHas reports whether a comma-separated header holds token.
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
