package httpapi

import (
	"context"
	"net/http"
	"sync"
)

// streamsEnd is closed by EndStreams.
type streamsEnd struct {
	once sync.Once
	ch   chan struct{}
}

func (e *streamsEnd) done() chan struct{} {
	e.once.Do(func() { e.ch = make(chan struct{}) })
	return e.ch
}

// EndStreams ends the streams and held requests under way, and any begun
// after: a run's or the operator's event stream, an events request held
// for what comes (wait=), a streamed or attached command (its command is
// cancelled), a forwarded stream. A stopping daemon calls it before it
// shuts its listeners down: a graceful shutdown waits for every handler to
// return, and a stream never returns by itself, so one open stream held
// the stop for its whole budget and left the checkpoints none. Calls that
// answer once are left to finish.
func (s *Server) EndStreams() {
	ch := s.ends.done()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// endable gives each stream or held request a context that EndStreams
// ends.
func (s *Server) endable(next http.Handler) http.Handler {
	end := s.ends.done()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !streamed(r) && !r.URL.Query().Has("wait") {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			select {
			case <-end:
				cancel()
			case <-ctx.Done():
			}
		}()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
