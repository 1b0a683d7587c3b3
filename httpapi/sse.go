package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/redact"
)

// SSEHeartbeat is how often an idle event stream sends a comment, so that
// proxies and clients see it alive.
var SSEHeartbeat = 15 * time.Second

// resumeAfter is where a stream starts: after the Last-Event-ID a
// reconnecting client sends, else after ?after= (0: from the start).
func resumeAfter(r *http.Request) (int64, error) {
	after, err := intParam(r.URL.Query().Get("after"), "after")
	if err != nil {
		return 0, err
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		return intParam(last, "Last-Event-ID")
	}
	return after, nil
}

// sseEvent is one event of a stream: its id, its event name, its data
// (encoded as JSON, credential shapes masked).
type sseEvent struct {
	id   int64
	name string
	data any
}

// serveSSE serves a stream of Server-Sent Events from after on. next
// waits, until its ctx ends (a heartbeat's time), for what follows after,
// and returns the events to send and the id they go up to (which may pass
// the last one sent: what next read and left out). A round that sends
// nothing sends a keep-alive comment. The stream ends with the request,
// or at the round after its caller stopped being admitted (liveCheck).
func serveSSE(w http.ResponseWriter, r *http.Request, after int64, next func(ctx context.Context, after int64) ([]sseEvent, int64, error)) {
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	live := liveCheck(r.Context())
	for r.Context().Err() == nil {
		if live != nil && paddock.IsCode(live(r.Context()), paddock.CodeUnauthorized) {
			// The caller's token was revoked, or its principal removed:
			// the stream ends, and a reconnect is refused. (A store that
			// could not say is asked again next round.)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), SSEHeartbeat)
		evs, upTo, err := next(ctx, after)
		cancel()
		if err != nil {
			return
		}
		if len(evs) == 0 {
			io.WriteString(w, ": keep-alive\n\n")
		}
		for _, e := range evs {
			data, _ := json.Marshal(e.data)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.id, e.name, redact.Shapes(data))
		}
		after = max(after, upTo)
		if rc.Flush() != nil {
			return
		}
	}
}
