package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// TestRetriesWhatWasNotDone: a call whose error says nothing of it was
// done (a forwarded call that never reached its run's node) is made
// again by the client, the same body each time, until it is answered or
// its retries run out; one that may have been done (delivered) is never
// made again, nor is any other error, and a client WithRetries(0) makes
// no call twice.
func TestRetriesWhatWasNotDone(t *testing.T) {
	t.Parallel()
	undone := `{"ok":false,"error":{"code":"node_lost","message":"unreached","details":{"node":"n2","delivered":false,"done":false}}}`
	delivered := `{"ok":false,"error":{"code":"node_lost","message":"maybe","details":{"node":"n2","delivered":true}}}`
	busy := `{"ok":false,"error":{"code":"busy","message":"locked"}}`
	ok := `{"ok":true,"data":{"content":[{"type":"text","text":"wrote"}]}}`
	cases := []struct {
		name    string
		retries int
		answers []string // the server's answers in turn; the last one repeats
		calls   int      // how many the client makes
		wantErr paddock.Code
	}{
		{"not done, then answered", DefaultRetries, []string{undone, undone, ok}, 3, ""},
		{"not done past the retries", 2, []string{undone}, 3, paddock.CodeNodeLost},
		{"maybe done", DefaultRetries, []string{delivered, ok}, 1, paddock.CodeNodeLost},
		{"another error", DefaultRetries, []string{busy, ok}, 1, paddock.CodeBusy},
		{"no retries", 0, []string{undone, ok}, 1, paddock.CodeNodeLost},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var bodies []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				bodies = append(bodies, string(b))
				answer := tc.answers[min(len(bodies), len(tc.answers))-1]
				mu.Unlock()
				if strings.Contains(answer, `"ok":false`) {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
				fmt.Fprint(w, answer)
			}))
			defer srv.Close()
			c := TCP(strings.TrimPrefix(srv.URL, "http://"), "").WithRetries(tc.retries)
			_, err := c.CallTool(context.Background(), "r-1", "write", map[string]string{"path": "a.txt", "content": "x"})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && !paddock.IsCode(err, tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(bodies) != tc.calls {
				t.Fatalf("the client called %d times, want %d", len(bodies), tc.calls)
			}
			for _, b := range bodies {
				var in map[string]any
				if json.Unmarshal([]byte(b), &in) != nil || b != bodies[0] {
					t.Fatalf("a call made again sent %q, the first %q", b, bodies[0])
				}
			}
		})
	}
	// A caller's deadline ends the waiting: the error is the last answer.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, undone)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := TCP(strings.TrimPrefix(srv.URL, "http://"), "").CallTool(ctx, "r-1", "write", map[string]string{"path": "a.txt", "content": "x"})
	if !paddock.Undone(err) || time.Since(start) > 5*time.Second {
		t.Fatalf("after the caller's deadline: %v after %s", err, time.Since(start))
	}
}
