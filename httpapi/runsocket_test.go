package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// TestRunHandlerReach: a run's own socket is its agent, exactly as its
// token is: the agent's routes on its own run, as the agent; nothing of
// the operator's, no other run, and no token that might reach further.
func TestRunHandlerReach(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.newRun(t)
	h := f.srv.RunHandler(r.ID)
	// refusal calls a route and returns its refusal's code, if refused
	// (a stream's answer is not an envelope: only a refusal is read).
	refusal := func(method, path string) paddock.Code {
		req := httptest.NewRequest(method, "http://paddock"+path, strings.NewReader("{}"))
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		if method == "GET" && (strings.HasSuffix(path, "/stream") || strings.HasSuffix(path, "/mcp")) {
			cancel() // a stream's first look, then its end
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(ctx))
		f.svc.asked()
		if rec.Code != http.StatusForbidden {
			return ""
		}
		var a answer
		if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil || a.Error == nil {
			t.Fatalf("%s %s: a refusal that is not an envelope: %q", method, path, rec.Body)
		}
		return a.Error.Code
	}
	for _, rt := range Routes() {
		if rt.Public {
			continue // anyone's
		}
		path := strings.NewReplacer("{id}", r.ID, "{name}", "read", "{kind}", "changeset", "{job}", "j-1", "{request}", "q-1").Replace(rt.Path)
		code := refusal(rt.Method, path)
		switch {
		case rt.RunToken && code != "":
			t.Errorf("%s %s: the run's socket is refused (%s) what its token reaches", rt.Method, path, code)
		case !rt.RunToken && code != paddock.CodeForbidden:
			t.Errorf("%s %s: the run's socket reaches the operator's route (%q)", rt.Method, path, code)
		}
		if rt.RunToken && strings.Contains(rt.Path, "{id}") {
			other := strings.Replace(path, r.ID, "r-other", 1)
			if code := refusal(rt.Method, other); code != paddock.CodeRunMismatch {
				t.Errorf("%s %s: another run through this run's socket: %q", rt.Method, other, code)
			}
		}
	}
	// It calls as the agent.
	f.do(t, h, "GET", "/v1/runs/"+r.ID+"/tools", "")
	if calls := f.svc.asked(); len(calls) == 0 || !calls[0].agent {
		t.Errorf("a call through the run's socket was not made as the agent: %+v", calls)
	}
	// Even the daemon's own token is refused on it: the socket is the
	// credential, and it is the run's.
	for _, tok := range []string{"Bearer t0k3n", "Bearer pdk_run_x", "Basic x"} {
		if a := f.do(t, h, "GET", "/v1/runs/"+r.ID, "", "Authorization", tok); a.status != 403 {
			t.Errorf("a run's socket took %q: %d", tok, a.status)
		}
	}
	if a := f.do(t, h, "GET", "/v1/runs/"+r.ID, "", "Origin", "http://evil.example"); a.status != 403 {
		t.Errorf("a web page's request on the run's socket: %d", a.status)
	}
}

// TestRunSockets: a run's socket is served at its path (a long one too,
// past a socket address's 108 bytes), mode 0666 in its directory, once;
// Close removes it, and Shutdown refuses new ones.
func TestRunSockets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.newRun(t)
	var logged bytes.Buffer
	rs := &RunSockets{API: f.srv, NewServer: func(h http.Handler) *http.Server { return &http.Server{Handler: h} },
		Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	dir := filepath.Join(t.TempDir(), strings.Repeat("long-directory-name-", 6))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "paddock.sock")
	if len(sock) < 108 {
		t.Fatalf("the path is only %d bytes", len(sock))
	}
	for range 2 {
		if err := rs.Listen(r.ID, sock); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o666 {
		t.Fatalf("the socket: %v %v", fi, err)
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		// The short way to a long path, as a run's view gives it.
		d, err := os.Open(dir)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		return (&net.Dialer{}).DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d/paddock.sock", d.Fd()))
	}}, Timeout: 10 * time.Second}
	resp, err := c.Get("http://paddock/v1/runs/" + r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	json.NewDecoder(resp.Body).Decode(&a)
	resp.Body.Close()
	if !a.OK {
		t.Fatalf("the run through its socket: %d %+v", resp.StatusCode, a.Error)
	}
	rs.Close(r.ID)
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("Close left the socket: %v", err)
	}
	// A run's end closes its socket: that is no warning in the daemon's log.
	if logged.Len() > 0 {
		t.Errorf("closing a run's socket logged: %s", logged.String())
	}
	if err := rs.Listen(r.ID, sock); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rs.Shutdown(ctx)
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("Shutdown left the socket: %v", err)
	}
	if err := rs.Listen(r.ID, sock); err == nil {
		t.Error("Listen after Shutdown served")
	}
}

// TestRunSocketAnswersTheCallThatClosesIt: a call that ends its run (a
// reviewer's last pick of its flow rejects the review run, whose socket
// then closes) is answered whole; new connections are refused from then on.
func TestRunSocketAnswersTheCallThatClosesIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.newRun(t)
	var rs *RunSockets
	rs = &RunSockets{API: f.srv, NewServer: func(h http.Handler) *http.Server {
		return &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Header.Get("X-Close") != "" {
				rs.Close(r.ID) // as the run's end closes it, while this call is answered
				time.Sleep(50 * time.Millisecond)
			}
			h.ServeHTTP(w, req)
		})}
	}}
	sock := filepath.Join(t.TempDir(), "paddock.sock")
	if err := rs.Listen(r.ID, sock); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}, Timeout: 10 * time.Second}
	req, _ := http.NewRequest("GET", "http://paddock/v1/runs/"+r.ID, nil)
	req.Header.Set("X-Close", "1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("the call that closed its socket: %v", err)
	}
	var a answer
	err = json.NewDecoder(resp.Body).Decode(&a)
	resp.Body.Close()
	if err != nil || !a.OK {
		t.Fatalf("the call that closed its socket was not answered whole: %v %+v", err, a)
	}
	if _, err := c.Get("http://paddock/v1/runs/" + r.ID); err == nil {
		t.Fatal("a new call reached a closed run's socket")
	}
}
