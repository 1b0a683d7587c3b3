package webhook

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestSignAndVerify(t *testing.T) {
	secret := []byte("s3cret-of-the-hook")
	body := []byte(`{"id":7,"type":"changeset.submitted","run_id":"r-abc","seq":4}`)
	now := time.Now()
	h := Sign(secret, now, body)
	if !strings.HasPrefix(h, "t=") || !strings.Contains(h, ",v1=") {
		t.Fatalf("header %q", h)
	}
	if err := Verify(secret, h, body, time.Minute); err != nil {
		t.Fatalf("a fresh signature: %v", err)
	}
	for name, c := range map[string]struct {
		secret []byte
		header string
		body   []byte
		want   error
	}{
		"wrong secret":      {[]byte("another"), h, body, ErrSignature},
		"changed body":      {secret, h, append([]byte(nil), strings.Replace(string(body), `"seq":4`, `"seq":5`, 1)...), ErrSignature},
		"old timestamp":     {secret, Sign(secret, now.Add(-10*time.Minute), body), body, ErrTooOld},
		"from the future":   {secret, Sign(secret, now.Add(10*time.Minute), body), body, ErrTooOld},
		"changed timestamp": {secret, strings.Replace(h, "t=", "t=1", 1), body, ErrSignature},
		"no header":         {secret, "", body, ErrNoSignature},
		"no v1":             {secret, "t=" + h[2:12], body, ErrNoSignature},
	} {
		if err := Verify(c.secret, c.header, c.body, time.Minute); !errors.Is(err, c.want) {
			t.Errorf("%s: Verify = %v, want %v", name, err, c.want)
		}
	}
	// A receiver rotating its secret: either of two signatures passes.
	two := h + ",v1=" + strings.Repeat("00", 32)
	if err := Verify(secret, two, body, time.Minute); err != nil {
		t.Errorf("the right signature beside a wrong one: %v", err)
	}
	if err := Verify(secret, Sign(secret, now.Add(-time.Hour), body), body, -1); err != nil {
		t.Errorf("a negative tolerance accepts any time: %v", err)
	}
	if err := verifyAt(secret, h, body, 0, now.Add(DefaultTolerance+time.Minute)); !errors.Is(err, ErrTooOld) {
		t.Errorf("tolerance 0 takes the default: %v", err)
	}
}

func TestSend(t *testing.T) {
	secret := []byte("k")
	got := make(chan *http.Request, 4)
	bodies := make(chan []byte, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/slow":
			time.Sleep(2 * time.Second)
		case "/fail":
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(srv.Close)
	s := NewSender()
	t.Cleanup(s.CloseIdle)
	d := Delivery{URL: srv.URL + "/ok", Secret: secret, ID: "42", Type: "job.finished", Body: []byte(`{"id":42}`)}
	status, err := s.Send(context.Background(), d)
	if err != nil || status != http.StatusNoContent {
		t.Fatalf("Send = %d, %v", status, err)
	}
	r, b := <-got, <-bodies
	if r.Method != "POST" || r.Header.Get(EventIDHeader) != "42" || r.Header.Get(EventTypeHeader) != "job.finished" ||
		r.Header.Get("Content-Type") != "application/json" || string(b) != `{"id":42}` {
		t.Fatalf("request %s %v %q", r.Method, r.Header, b)
	}
	if err := Verify(secret, r.Header.Get(SignatureHeader), b, time.Minute); err != nil {
		t.Fatalf("the delivery's signature: %v", err)
	}

	d.URL = srv.URL + "/redirect"
	if status, err := s.Send(context.Background(), d); status != http.StatusFound || err == nil {
		t.Fatalf("a redirect: %d, %v; want 302 and an error", status, err)
	}
	<-got
	<-bodies
	select {
	case r := <-got:
		t.Fatalf("the redirect was followed to %s", r.URL.Path)
	case <-time.After(100 * time.Millisecond):
	}

	d.URL = srv.URL + "/fail"
	if status, err := s.Send(context.Background(), d); status != 500 || err == nil {
		t.Fatalf("a 500: %d, %v", status, err)
	}
	<-got
	<-bodies

	s.Timeout = 200 * time.Millisecond
	d.URL = srv.URL + "/slow?token=hidden"
	start := time.Now()
	status, err = s.Send(context.Background(), d)
	if status != 0 || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("a hung receiver: %d, %v after %v", status, err, time.Since(start))
	}
	if strings.Contains(err.Error(), "hidden") {
		t.Fatalf("the error names the URL: %v", err)
	}
}
