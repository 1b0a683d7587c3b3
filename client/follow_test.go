package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// sseDaemon serves a run's event stream on a unix socket as the daemon
// does: the events after Last-Event-ID up to last, then it holds the
// stream open until it is closed.
func sseDaemon(t *testing.T, sock string, last int64) *http.Server {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for seq := after + 1; seq <= last; seq++ {
			fmt.Fprintf(w, "id: %d\ndata: {\"seq\":%d,\"run_id\":\"r-1\",\"type\":\"x\"}\n\n", seq, seq)
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// TestFollowNoDaemon: following a run where no daemon listens ends at
// once with the error that says so (the CLI's exit 8), rather than
// trying again for ever: nothing was ever followed.
func TestFollowNoDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err := Unix(sock).Follow(ctx, "r-1", 0, func(*paddock.Event) error { return nil })
	if !Unreachable(err) || time.Since(start) > 2*time.Second {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
}

// TestFollowDaemonGone: a stream whose daemon goes away (kill -9) is
// taken up again if a daemon answers within followGrace (a restart), and
// ends with the unreachable error once none has for that long: the
// follower is told, neither left waiting nor starting a daemon.
func TestFollowDaemonGone(t *testing.T) {
	defer func(g time.Duration) { followGrace = g }(followGrace)
	followGrace = time.Second
	sock := filepath.Join(t.TempDir(), "d.sock")
	srv := sseDaemon(t, sock, 1)
	var hooked atomic.Int32
	c := Unix(sock).OnUnreachable(func(context.Context, error) error {
		hooked.Add(1) // the CLI would start a daemon here
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := make(chan int64, 10)
	done := make(chan error, 1)
	go func() {
		done <- c.Follow(ctx, "r-1", 0, func(e *paddock.Event) error {
			seen <- e.Seq
			return nil
		})
	}()
	if s := <-seen; s != 1 {
		t.Fatalf("first event %d", s)
	}
	// A restart: the daemon goes, another answers on the socket soon after.
	srv.Close()
	time.Sleep(followGrace / 4)
	srv = sseDaemon(t, sock, 2)
	select {
	case s := <-seen:
		if s != 2 {
			t.Fatalf("after the restart: event %d", s)
		}
	case err := <-done:
		t.Fatalf("Follow ended at a restart: %v", err)
	}
	// Gone for good.
	srv.Close()
	gone := time.Now()
	select {
	case err := <-done:
		if !Unreachable(err) || ctx.Err() != nil {
			t.Fatalf("Follow ended with %v", err)
		}
		if d := time.Since(gone); d < followGrace || d > followGrace+3*time.Second {
			t.Errorf("Follow ended %v after the daemon went (grace %v)", d, followGrace)
		}
	case <-ctx.Done():
		t.Fatal("Follow kept trying after the daemon went")
	}
	if n := hooked.Load(); n != 0 {
		t.Errorf("the unreachable hook ran %d times for a daemon that had answered", n)
	}
}

// TestOnUnreachableOnlyFirst: the hook runs for a client that has never
// reached its daemon (the CLI starts one then), not for one whose daemon
// answered and then went away: that one was stopped, and a later request
// of the same call must say so rather than start another.
func TestOnUnreachableOnlyFirst(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"ok":true,"data":{"version":"up"}}`)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	var hooked atomic.Int32
	c := Unix(sock).OnUnreachable(func(_ context.Context, err error) error {
		hooked.Add(1)
		return errors.New("the hook ran")
	})
	if _, err := c.Status(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	_, err = c.Status(context.Background())
	if !Unreachable(err) || hooked.Load() != 0 {
		t.Fatalf("after the daemon went: %v, hook ran %d times", err, hooked.Load())
	}
}

// TestFollowNotices: the firehose is followed across a dropped
// connection: the reconnection sends the last notice id as Last-Event-ID,
// the types as ?types=, and fn sees every notice once, in order, even
// when the daemon sends one again.
func TestFollowNotices(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/events/stream" || r.URL.Query().Get("types") != "job.finished,run.rejected" {
			http.Error(w, "bad request "+r.URL.String(), 400)
			return
		}
		after, _ := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		n := conns.Add(1)
		from := after + 1
		if n == 2 {
			from = after // once more the last one seen: fn must not see it twice
		}
		for id := from; id <= after+2 && id <= 5; id++ {
			fmt.Fprintf(w, "id: %d\nevent: job.finished\ndata: {\"id\":%d,\"type\":\"job.finished\",\"run_id\":\"r-1\",\"seq\":%d}\n\n", id, id, id)
		}
		w.(http.Flusher).Flush() // and the connection ends: the client reconnects
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []int64
	errDone := errors.New("done")
	err = Unix(sock).FollowNotices(ctx, 0, []string{"job.finished", "run.rejected"}, func(n *paddock.Notice) error {
		got = append(got, n.ID)
		if n.ID == 5 {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) || fmt.Sprint(got) != "[1 2 3 4 5]" || conns.Load() < 3 {
		t.Fatalf("FollowNotices = %v after %d connections, saw %v", err, conns.Load(), got)
	}
}
