package client

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
)

// TestRetryRewindsAfterTheWriter: a write of a body past the inline size,
// answered "not done" before the daemon read it all, is sent again whole
// and from its start: the first attempt's writer (beside the reading of
// the answer) has stopped reading the body before the retry rewinds it
// (under -race, a rewind beside it is a race; without, a shifted body).
func TestRetryRewindsAfterTheWriter(t *testing.T) {
	undone := `{"ok":false,"error":{"code":"node_lost","message":"unreached","details":{"node":"n2","delivered":false,"done":false}}}`
	want := bytes.Repeat([]byte("0123456789abcdef"), 4<<16) // 4 MiB
	var calls atomic.Int64
	c := unixDaemon(t, func(conn net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(conn))
		if err != nil {
			return
		}
		if calls.Add(1) == 1 {
			io.CopyN(io.Discard, req.Body, 1<<20)
			io.WriteString(conn, "HTTP/1.1 503 x\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"+undone)
			return
		}
		got, _ := io.ReadAll(req.Body)
		if !bytes.Equal(got, want) {
			t.Errorf("retry sent %d bytes, want the %d first sent", len(got), len(want))
		}
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"ok\":true}")
	}).WithRetries(2)
	for range 5 {
		calls.Store(0)
		err := c.doRaw(context.Background(), "POST", "/v1/x", bytes.NewReader(want), "application/octet-stream", nil)
		if err != nil || calls.Load() != 2 {
			t.Fatalf("the write, retried once: %v after %d attempts", err, calls.Load())
		}
	}
}
