package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"golang.org/x/net/netutil"
	"golang.org/x/sys/unix"
)

// RunHandler is the API as run id's own socket serves it: whoever
// connects is that run's agent, exactly as if it carried the run's token
// (the socket is reachable only from inside the run's view). It reaches
// the routes a run token reaches, on its own run; a token it sends is
// refused, so that nothing reaches further through it.
func (s *Server) RunHandler(id string) http.Handler {
	next := s.mux()
	return s.endable(s.traced(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuseForeign(w, r, false) {
			return
		}
		if r.Header.Get("Authorization") != "" {
			writeError(w, paddock.Errorf(paddock.CodeForbidden, "this socket is run %s's own and takes no token", id))
			return
		}
		ctx := context.WithValue(r.Context(), actorKey, "run "+id+" (its socket)")
		next.ServeHTTP(w, r.WithContext(paddock.WithAgent(context.WithValue(ctx, scopeKey, id))))
	}), agentsOnly))
}

// MaxRunConns bounds the connections a run's socket serves at once.
const MaxRunConns = 16

// RunSockets serves each run its own API on a unix socket
// (lifecycle.RunAPI): one listener and one http.Server per run, made on
// the first Listen, closed by Close or Shutdown.
type RunSockets struct {
	API *Server
	// Bin is the directory holding the paddock binary shown in runs' views.
	Bin string
	// NewServer makes the http.Server of a socket (timeouts, logging).
	NewServer func(http.Handler) *http.Server
	Logger    *slog.Logger

	mu     sync.Mutex
	live   map[string]*runSocket
	closed bool
}

type runSocket struct {
	path   string
	ln     net.Listener
	srv    *http.Server
	served chan struct{} // closed once Serve returned
}

// closeGrace is how long a closed run socket's requests in flight have to
// end: the call that ended the run (a flow's last pick, say) is answered.
const closeGrace = 10 * time.Second

// BinDir implements lifecycle.RunAPI.
func (rs *RunSockets) BinDir() string { return rs.Bin }

// Listen implements lifecycle.RunAPI: run id's API answers at path.
func (rs *RunSockets) Listen(id, path string) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		return errors.New("the daemon is stopping")
	}
	if rs.API == nil {
		return errors.New("the daemon's API is not made yet")
	}
	if s, ok := rs.live[id]; ok && s.path == path {
		if _, err := os.Lstat(path); err == nil {
			return nil
		}
		// Its file is gone (removed with a workspace made again): serve anew.
		s.srv.Close()
		delete(rs.live, id)
	}
	ln, err := listenUnixAt(path)
	if err != nil {
		return err
	}
	// A run's commands share a few connections at once: more wait in the
	// kernel's queue, so that one run can hold neither the daemon's
	// descriptors nor its memory (each request in flight may carry an
	// exec's stdin) from the others.
	ln = netutil.LimitListener(ln, MaxRunConns)
	srv := rs.NewServer(rs.API.RunHandler(id))
	srv.IdleTimeout = 15 * time.Second // an idle connection gives its place back soon
	if rs.live == nil {
		rs.live = map[string]*runSocket{}
	}
	s := &runSocket{path: path, ln: ln, srv: srv, served: make(chan struct{})}
	rs.live[id] = s
	go func() {
		defer close(s.served)
		// Close ends it by closing its listener (net.ErrClosed), Shutdown
		// by ending the server: neither is news.
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			rs.log().Warn("a run's API socket stopped", "run", id, "err", err)
		}
	}()
	return nil
}

// Close implements lifecycle.RunAPI.
func (rs *RunSockets) Close(id string) {
	rs.mu.Lock()
	s, ok := rs.live[id]
	delete(rs.live, id)
	rs.mu.Unlock()
	if !ok {
		return
	}
	// No new connection from now on; the requests in flight are answered
	// (often the very call that ended the run: a reviewer's last pick of
	// its flow answered "unexpected EOF" though it had taken effect), then
	// the connections go.
	s.ln.Close()
	<-s.served // at once: Serve returns when its listener closes, not waiting for handlers
	os.Remove(s.path)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		defer cancel()
		if s.srv.Shutdown(ctx) != nil {
			s.srv.Close()
		}
	}()
}

// Shutdown stops every run's socket, letting requests in flight end
// until ctx is done; Listen refuses from then on.
func (rs *RunSockets) Shutdown(ctx context.Context) {
	rs.mu.Lock()
	rs.closed = true
	live := rs.live
	rs.live = nil
	rs.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.srv.Shutdown(ctx) != nil {
				s.srv.Close()
			}
			os.Remove(s.path)
		}()
	}
	wg.Wait()
}

func (rs *RunSockets) log() *slog.Logger {
	if rs.Logger == nil {
		return slog.Default()
	}
	return rs.Logger
}

// listenUnixAt listens on a unix socket at path, replacing a stale one,
// mode 0666: the directory it is in decides who reaches it. A path longer
// than a socket address holds is reached through the directory's
// descriptor (/proc/self/fd/N/NAME).
func listenUnixAt(path string) (net.Listener, error) {
	os.Remove(path)
	addr := path
	if len(path) >= len(unix.RawSockaddrUnix{}.Path) {
		dir, err := os.Open(filepath.Dir(path))
		if err != nil {
			return nil, err
		}
		defer dir.Close()
		addr = fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path))
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// Close must not unlink by a name that may be a descriptor's path of
	// this moment; Close and Shutdown remove the file by its own.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
