package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/broker"
)

// TestRetriesWhatWasNotDone: a call whose error says nothing of it was
// done (a forwarded call that never reached its run's node) is made
// again by the client, the same body and idempotency key each time,
// until it is answered or its retries run out; so is a write that may
// have been done (delivered) or is still being made (in_progress), since
// its key makes it once; no other error is, and a client WithRetries(0)
// makes no call twice.
func TestRetriesWhatWasNotDone(t *testing.T) {
	t.Parallel()
	undone := `{"ok":false,"error":{"code":"node_lost","message":"unreached","details":{"node":"n2","delivered":false,"done":false}}}`
	delivered := `{"ok":false,"error":{"code":"node_lost","message":"maybe","details":{"node":"n2","delivered":true}}}`
	busy := `{"ok":false,"error":{"code":"busy","message":"locked"}}`
	inProgress := `{"ok":false,"error":{"code":"busy","message":"being made","details":{"in_progress":true}}}`
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
		{"maybe done", DefaultRetries, []string{delivered, ok}, 2, ""},
		{"still being made", DefaultRetries, []string{inProgress, inProgress, ok}, 3, ""},
		{"maybe done past the retries", 1, []string{delivered}, 2, paddock.CodeNodeLost},
		{"another error", DefaultRetries, []string{busy, ok}, 1, paddock.CodeBusy},
		{"no retries", 0, []string{undone, ok}, 1, paddock.CodeNodeLost},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var bodies, keys []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				bodies = append(bodies, string(b))
				keys = append(keys, r.Header.Get(paddock.IdempotencyHeader))
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
			for i, b := range bodies {
				var in map[string]any
				if json.Unmarshal([]byte(b), &in) != nil || b != bodies[0] {
					t.Fatalf("a call made again sent %q, the first %q", b, bodies[0])
				}
				if keys[i] == "" || keys[i] != keys[0] {
					t.Fatalf("the attempts' keys: %q", keys)
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

// TestKeysOfWrites: each write carries a key of its own (two calls, two
// keys), or the caller's (WithIdempotencyKey); a read carries none and
// is not made again when its answer says it may have been done; a write
// whose connection broke after it was sent is made again with its key.
func TestKeysOfWrites(t *testing.T) {
	t.Parallel()
	delivered := `{"ok":false,"error":{"code":"node_lost","message":"maybe","details":{"node":"n2","delivered":true}}}`
	var mu sync.Mutex
	var keys []string
	broke := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		mu.Lock()
		keys = append(keys, r.Method+" "+r.Header.Get(paddock.IdempotencyHeader))
		breakIt := r.Method == http.MethodPost && r.Header.Get(paddock.IdempotencyHeader) == "break-once" && !broke
		broke = broke || breakIt
		mu.Unlock()
		switch {
		case breakIt:
			// The call arrived; its answer never leaves.
			c, _, _ := http.NewResponseController(w).Hijack()
			c.Close()
		case r.Method == http.MethodGet:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, delivered)
		default:
			fmt.Fprint(w, `{"ok":true,"data":{"content":[{"type":"text","text":"wrote"}]}}`)
		}
	}))
	defer srv.Close()
	c := TCP(strings.TrimPrefix(srv.URL, "http://"), "")
	ctx := context.Background()
	write := func(ctx context.Context) error {
		_, err := c.CallTool(ctx, "r-1", "write", map[string]string{"path": "a.txt", "content": "x"})
		return err
	}
	if err := write(ctx); err != nil {
		t.Fatal(err)
	}
	if err := write(ctx); err != nil {
		t.Fatal(err)
	}
	if err := write(WithIdempotencyKey(ctx, "mine-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, "r-1"); !paddock.IsCode(err, paddock.CodeNodeLost) {
		t.Fatalf("a read whose answer may be lost: %v", err)
	}
	if err := write(WithIdempotencyKey(ctx, "break-once")); err != nil {
		t.Fatalf("a write whose connection broke: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 6 || keys[0] == keys[1] || len(keys[0]) < len("POST ")+20 || keys[2] != "POST mine-1" || keys[3] != "GET " ||
		keys[4] != "POST break-once" || keys[5] != "POST break-once" {
		t.Fatalf("the calls' keys: %q", keys)
	}
}

// TestReadToolsAreReads: the tools the client sends without a key are
// the broker's read tools, and diff and capabilities, none of which
// writes; a read call whose answer may be lost is made again.
func TestReadToolsAreReads(t *testing.T) {
	t.Parallel()
	for _, tool := range readTools {
		if !slices.Contains(broker.ReadTools, tool) && tool != paddock.ToolDiff && tool != paddock.ToolCapabilities {
			t.Errorf("%s is not a read tool", tool)
		}
	}
	for _, tool := range broker.ReadTools {
		if !slices.Contains(readTools, tool) {
			t.Errorf("the read tool %s is sent with a key", tool)
		}
	}
	delivered := `{"ok":false,"error":{"code":"node_lost","message":"maybe","details":{"node":"n2","delivered":true}}}`
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get(paddock.IdempotencyHeader))
		n := len(keys)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, delivered)
			return
		}
		fmt.Fprint(w, `{"ok":true,"data":{"content":[{"type":"text","text":"page"}]}}`)
	}))
	defer srv.Close()
	if _, err := TCP(strings.TrimPrefix(srv.URL, "http://"), "").CallTool(context.Background(), "r-1", "read", map[string]string{"path": "a.txt"}); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0] != "" || keys[1] != "" {
		t.Fatalf("a read's calls carried keys %q", keys)
	}
}

// TestBigBodiesTakeNoKey: a write whose body is a file, or bigger than a
// node reads whole for a key, is sent without one (a bundle's import).
func TestBigBodiesTakeNoKey(t *testing.T) {
	t.Parallel()
	f, err := os.CreateTemp(t.TempDir(), "bundle")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tc := range []struct {
		body io.Reader
		want bool
	}{
		{nil, true},
		{strings.NewReader("{}"), true},
		{bytes.NewReader(make([]byte, paddock.MaxKeyedBody)), true},
		{bytes.NewReader(make([]byte, paddock.MaxKeyedBody+1)), false},
		{f, false},
		{io.LimitReader(strings.NewReader("x"), 1), false},
	} {
		if got := keyable(tc.body); got != tc.want {
			t.Errorf("keyable(%T) = %v, want %v", tc.body, got, tc.want)
		}
	}
}
