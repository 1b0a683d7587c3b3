package paddock

import (
	"encoding/binary"
	"fmt"
	"io"
)

// An attached exec (POST /v1/runs/{id}/exec/attach) is an HTTP/1.1
// Upgrade to AttachProtocol: after the request (an ExecRequest, as JSON)
// and the 101 answer, both sides exchange frames on the connection until
// the daemon has sent the command's result and closed it. A frame is one
// kind byte, its payload's length (4 bytes, big-endian), and the payload.
const (
	// AttachProtocol is the Upgrade header's value.
	AttachProtocol = "paddock-attach"

	// client → daemon
	FrameStdin  byte = 'i' // bytes for the command's stdin (its terminal)
	FrameResize byte = 'r' // a TerminalSize, as JSON: the terminal's new size
	FrameEOF    byte = 'e' // no more stdin (no payload)

	// daemon → client
	FrameStdout byte = 'o' // output (a terminal's is all stdout), masked
	FrameStderr byte = 'E' // error output, masked
	FrameResult byte = 'R' // the end, as JSON: {"result": ExecResult} or {"error": Error}

	// MaxFrame bounds a frame's payload.
	MaxFrame = 1 << 20
)

// AttachEnd is the payload of the last frame.
type AttachEnd struct {
	Result *ExecResult `json:"result,omitempty"`
	Error  *Error      `json:"error,omitempty"`
}

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, kind byte, payload []byte) error {
	if len(payload) > MaxFrame {
		return fmt.Errorf("a frame of %d bytes: at most %d", len(payload), MaxFrame)
	}
	b := make([]byte, 5+len(payload))
	b[0] = kind
	binary.BigEndian.PutUint32(b[1:5], uint32(len(payload)))
	copy(b[5:], payload)
	_, err := w.Write(b)
	return err
}

// ReadFrame reads one frame whose payload is at most max bytes.
func ReadFrame(r io.Reader, max int) (kind byte, payload []byte, err error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:5])
	if int64(n) > int64(max) {
		return 0, nil, fmt.Errorf("a frame of %d bytes: at most %d", n, max)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return h[0], payload, nil
}
