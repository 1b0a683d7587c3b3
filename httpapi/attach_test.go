package httpapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// attached is one exec/attach connection, as a client speaks it.
type attached struct {
	t      *testing.T
	conn   net.Conn
	r      *bufio.Reader
	status int
	env    answer // the envelope of a request that was not switched over
}

// attach sends POST path with body as an upgrade to the attach protocol,
// on a real connection to h (a recorder cannot be switched over).
func attach(t *testing.T, h http.Handler, path, body string, hdr ...string) *attached {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	req, _ := http.NewRequest("POST", "http://127.0.0.1"+path, strings.NewReader(body))
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", paddock.AttachProtocol)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	a := &attached{t: t, conn: conn, r: bufio.NewReader(conn)}
	resp, err := http.ReadResponse(a.r, req)
	if err != nil {
		t.Fatal(err)
	}
	a.status = resp.StatusCode
	if a.status != http.StatusSwitchingProtocols {
		json.NewDecoder(resp.Body).Decode(&a.env)
	} else if resp.Header.Get("Upgrade") != paddock.AttachProtocol {
		t.Fatalf("switched to %q", resp.Header.Get("Upgrade"))
	}
	return a
}

func (a *attached) send(kind byte, p string) {
	a.t.Helper()
	if err := paddock.WriteFrame(a.conn, kind, []byte(p)); err != nil {
		a.t.Fatal(err)
	}
}

// until reads frames until stdout holds want; it returns stdout so far.
func (a *attached) until(want string) string {
	a.t.Helper()
	var out strings.Builder
	for !strings.Contains(out.String(), want) {
		kind, p, err := paddock.ReadFrame(a.r, paddock.MaxFrame)
		if err != nil {
			a.t.Fatalf("waiting for %q (stdout %q): %v", want, out.String(), err)
		}
		if kind == paddock.FrameStdout {
			out.Write(p)
		}
	}
	return out.String()
}

// end reads the remaining frames: stdout, stderr and the end.
func (a *attached) end() (stdout, stderr string, end paddock.AttachEnd) {
	a.t.Helper()
	for {
		kind, p, err := paddock.ReadFrame(a.r, paddock.MaxFrame)
		if err != nil {
			a.t.Fatalf("before the result: %v (stdout %q, stderr %q)", err, stdout, stderr)
		}
		switch kind {
		case paddock.FrameStdout:
			stdout += string(p)
		case paddock.FrameStderr:
			stderr += string(p)
		case paddock.FrameResult:
			if err := json.Unmarshal(p, &end); err != nil {
				a.t.Fatalf("the end: %q: %v", p, err)
			}
			if _, _, err := paddock.ReadFrame(a.r, paddock.MaxFrame); err != io.EOF {
				a.t.Fatalf("after the end: %v", err)
			}
			return
		default:
			a.t.Fatalf("frame %q from the daemon", kind)
		}
	}
}

// TestExecAttach: the attach route switches the connection over, then
// carries stdin, resizes and its end in, the output out (through the run's
// funnel) and the result last; an error the command meets is the last
// frame; a request that is not an upgrade, or not the operator's to make,
// is an envelope before anything runs.
func TestExecAttach(t *testing.T) {
	t.Parallel()
	f := newFixtureOf(t, func(s *Server, st *fakeState) { s.Broker, s.Jobs = fakeBroker{st}, fakeJobs{st} })
	const v = "s3cr3t-attach-7"
	r := f.svc.newRun("app", nil)
	f.svc.secret[r.ID] = "API_TOKEN=" + v
	f.svc.asked()
	path := "/v1/runs/" + r.ID + "/exec/attach"
	a := attach(t, f.h, path, `{"argv":["agent"],"terminal":{"rows":24,"cols":80}}`)
	if a.status != 101 {
		t.Fatalf("attach: %d %+v", a.status, a.env.Error)
	}
	a.send(paddock.FrameResize, `{"rows":30,"cols":100}`)
	a.until("[size 30x100]")
	a.send(paddock.FrameStdin, "typed "+v+" ")
	a.until("typed ")
	a.send(paddock.FrameStdin, "more")
	a.send(paddock.FrameEOF, "")
	a.send(paddock.FrameStdin, "after the end: dropped")
	stdout, stderr, end := a.end()
	if end.Error != nil || end.Result == nil || end.Result.ExitCode != len("typed "+v+" more") || end.Result.Stdout != "" {
		t.Fatalf("the end: %+v %+v", end.Result, end.Error)
	}
	if strings.Contains(stdout, v) || strings.Contains(stdout, "dropped") || stderr != "[eof]" {
		t.Fatalf("output: %q, %q", stdout, stderr)
	}
	if got := f.svc.whats(); got != "ExecAttach "+r.ID+" [agent]  24x80" {
		t.Fatalf("asked %q", got)
	}

	// An error after the switch is the last frame, an internal one without
	// its detail.
	f.svc.fail = fmt.Errorf("disk of alice is on fire")
	a = attach(t, f.h, path, `{"argv":["agent"]}`)
	if _, _, end = a.end(); end.Error == nil || end.Error.Code != paddock.CodeInternal || strings.Contains(end.Error.Message, "alice") {
		t.Fatalf("a failed exec: %+v", end.Error)
	}
	f.svc.fail = nil

	// Not an upgrade: an envelope, nothing asked.
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest("POST", "http://paddock"+path, strings.NewReader(`{"argv":["agent"]}`)))
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "Upgrade: paddock-attach") {
		t.Fatalf("without the upgrade: %d %s", rec.Code, rec.Body)
	}
	f.svc.asked()
	// A run's token: on its own run, not on another, and not with what
	// only the operator decides.
	b1, b2 := f.bootstrap(t), f.bootstrap(t)
	tcp := f.srv.TCPHandler()
	agent := []string{"Authorization", "Bearer " + b1.Token}
	for _, tc := range []struct {
		path, body string
		want       int
		code       paddock.Code
	}{
		{"/v1/runs/" + b2.Run.ID + "/exec/attach", `{"argv":["agent"]}`, 403, paddock.CodeRunMismatch},
		{"/v1/runs/" + b1.Run.ID + "/exec/attach", `{"argv":["agent"],"allow_degraded":true}`, 403, paddock.CodeForbidden},
	} {
		a := attach(t, tcp, tc.path, tc.body, agent...)
		if a.status != tc.want || a.env.Error == nil || a.env.Error.Code != tc.code {
			t.Errorf("%s %s: %d %+v", tc.path, tc.body, a.status, a.env.Error)
		}
	}
	if calls := f.svc.asked(); len(calls) != 0 {
		t.Fatalf("refused attaches reached the service: %+v", calls)
	}
	a = attach(t, tcp, "/v1/runs/"+b1.Run.ID+"/exec/attach", `{"argv":["agent"]}`, agent...)
	a.send(paddock.FrameEOF, "")
	if _, _, end := a.end(); end.Result == nil {
		t.Fatalf("the agent on its own run: %+v", end.Error)
	}
	if calls := f.svc.asked(); len(calls) != 1 || !calls[0].agent || !strings.Contains(calls[0].what, "[agent]  none") {
		t.Fatalf("the agent's attach: %+v", calls)
	}
}

// TestExecAttachEndsWithItsClient: a client that goes away ends the
// command (the service's context), as a dropped exec/stream does.
func TestExecAttachEndsWithItsClient(t *testing.T) {
	t.Parallel()
	f := newFixtureOf(t, func(s *Server, st *fakeState) { s.Broker = fakeBroker{st} })
	r := f.svc.newRun("app", nil)
	a := attach(t, f.h, "/v1/runs/"+r.ID+"/exec/attach", `{"argv":["agent"]}`)
	a.send(paddock.FrameStdin, "x")
	a.until("x")
	a.conn.Close()
	waitGone(t, f, r.ID)
	// Nor when the command reads none of what was typed.
	r = f.svc.newRun("app", nil)
	a = attach(t, f.h, "/v1/runs/"+r.ID+"/exec/attach", `{"argv":["noread"]}`)
	for range 4 {
		a.send(paddock.FrameStdin, strings.Repeat("p", 60<<10)) // a paste
	}
	a.send(paddock.FrameResize, `{"rows":30,"cols":100}`)
	a.conn.Close()
	waitGone(t, f, r.ID)
}

func waitGone(t *testing.T, f *fixture, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f.svc.wentAway(id) {
		if time.Now().After(deadline) {
			t.Fatal("the command outlived its client")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bootstrap makes a run with a token, as the operator on TCP.
func (f *fixture) bootstrap(t *testing.T) paddock.BootstrapResult {
	t.Helper()
	req := httptest.NewRequest("POST", "http://127.0.0.1:7070/v1/bootstrap", strings.NewReader(`{"project":"app","agent":{"name":"coder","workspace":"write"},"task":"t"}`))
	req.Header.Set("Authorization", "Bearer t0k3n")
	rec := httptest.NewRecorder()
	f.srv.TCPHandler().ServeHTTP(rec, req)
	var a answer
	json.Unmarshal(rec.Body.Bytes(), &a)
	var b paddock.BootstrapResult
	if err := json.Unmarshal(a.Data, &b); err != nil || b.Token == "" {
		t.Fatalf("bootstrap: %d %s", rec.Code, rec.Body)
	}
	f.svc.asked()
	return b
}
