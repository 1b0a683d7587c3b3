package httpapi

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWorkAfterTheAnswer: what a call leaves for after its answer (the
// broker's look at what a command changed) begins once its caller has
// the answer, not before: here it waits for the caller to say it read
// the answer, and the answer would never come if it were held until the
// work ends. A streamed call's work (no AnswerFirst) begins at once.
func TestWorkAfterTheAnswer(t *testing.T) {
	f := newFixtureOf(t, func(s *Server, st *fakeState) { s.Broker = fakeBroker{st} })
	r := f.svc.newRun("app", nil)
	read := make(chan struct{})
	ran := make(chan bool, 1)
	f.svc.afterExec = func() {
		select {
		case <-read:
			ran <- true
		case <-time.After(5 * time.Second):
			ran <- false
		}
	}
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f.h}
	go srv.Serve(ln)
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	post := func(path string) (string, time.Duration) {
		t0 := time.Now()
		resp, err := hc.Post("http://paddock/v1/runs/"+r.ID+path, "application/json", strings.NewReader(`{"argv":["true"]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s %v", path, resp.StatusCode, b, err)
		}
		return string(b), time.Since(t0)
	}
	body, took := post("/exec")
	close(read)
	if !<-ran {
		t.Fatal("the work left for after the answer began before its caller had the answer")
	}
	if !strings.Contains(body, `"stdout":"out"`) || took > 4*time.Second {
		t.Fatalf("the answer (after %v): %s", took, body)
	}

	// A stream's work begins at once: the caller has the answer only
	// after it (here, at once, the work waiting for nothing).
	f.svc.afterExec = func() { ran <- true }
	if body, _ := post("/exec/stream"); !strings.Contains(body, `"result"`) {
		t.Fatalf("the stream: %s", body)
	}
	select {
	case <-ran:
	default:
		t.Fatal("a streamed call's work did not begin before its answer ended")
	}
}
