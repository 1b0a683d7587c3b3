package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// TestWaitEvents: WaitEvents asks the daemon to hold each request, no
// longer than ctx has left, and asks again until an event comes or ctx
// ends; then it returns nothing, without an error, as the Manager does.
func TestWaitEvents(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	waits := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		waits <- r.URL.Query().Get("wait")
		if asked.Add(1) < 3 {
			fmt.Fprint(w, `{"ok":true,"data":[]}`)
			return
		}
		fmt.Fprint(w, `{"ok":true,"data":[{"seq":8,"run_id":"r-1","type":"x"}]}`)
	}))
	defer srv.Close()
	c := TCP(strings.TrimPrefix(srv.URL, "http://"), "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs, err := c.WaitEvents(ctx, "r-1", 7, 0)
	if err != nil || len(evs) != 1 || evs[0].Seq != 8 || asked.Load() != 3 {
		t.Fatalf("WaitEvents: %v %v after %d requests", evs, err, asked.Load())
	}
	for range 3 {
		d, err := time.ParseDuration(<-waits)
		if err != nil || d <= 0 || d > 30*time.Second {
			t.Fatalf("wait %v %v", d, err)
		}
	}
	// A daemon that holds the request past ctx: nothing came.
	hold := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer hold.Close()
	c = TCP(strings.TrimPrefix(hold.URL, "http://"), "")
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if evs, err := c.WaitEvents(ctx, "r-1", 0, 0); err != nil || len(evs) != 0 {
		t.Fatalf("after ctx ended: %v %v", evs, err)
	}
}

// TestChangeSetDiff: the diff comes back as the daemon streams it, with
// its hash; an error answer is the daemon's error.
func TestChangeSetDiff(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hash") == "bad" {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"ok":false,"error":{"code":"conflict","message":"moved on"}}`)
			return
		}
		w.Header().Set(paddock.ChangeSetHashHeader, "h1")
		fmt.Fprint(w, "+line\n")
	}))
	defer srv.Close()
	c := TCP(strings.TrimPrefix(srv.URL, "http://"), "")
	d, hash, err := c.ChangeSetDiff(context.Background(), "r-1", "")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(d)
	d.Close()
	if string(b) != "+line\n" || hash != "h1" {
		t.Fatalf("diff %q hash %q", b, hash)
	}
	var sb strings.Builder
	if h, err := c.CopyDiff(context.Background(), "r-1", "", &sb); err != nil || h != "h1" || sb.String() != "+line\n" {
		t.Fatalf("CopyDiff: %q %v %q", h, err, sb.String())
	}
	if _, _, err := c.ChangeSetDiff(context.Background(), "r-1", "bad"); !paddock.IsCode(err, paddock.CodeConflict) {
		t.Fatalf("an error answer: %v", err)
	}
}
