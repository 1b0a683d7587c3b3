package paddockcli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
)

// TestUncommittedNeverHoldsTheAgentBack: paddock run counts the checkout's
// uncommitted changes beside its create. A count that is in when the run
// is made is said before the agent starts; one still being read (a large
// checkout's status) does not hold the agent back, and is said when the
// agent ends.
func TestUncommittedNeverHoldsTheAgentBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration // the checkout's status
		late  bool
	}{
		{"in time", 0, false},
		{"late", 2 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var data any
				switch {
				case strings.HasSuffix(r.URL.Path, "/checkout"):
					if tc.delay > 0 {
						select {
						case <-release:
						case <-time.After(tc.delay):
						}
					}
					data = paddock.CheckoutStatus{Root: "/src/app", Uncommitted: 3}
				case r.URL.Path == "/v1/runs" && r.Method == "POST":
					if tc.delay == 0 {
						time.Sleep(500 * time.Millisecond) // the status is in first
					}
					data = paddock.Run{ID: "r-1", Project: "app", Workspace: &paddock.Workspace{BaseRevision: strings.Repeat("a", 40), BaseRef: "HEAD"}}
				default:
					http.NotFound(w, r)
					return
				}
				b, _ := json.Marshal(data)
				json.NewEncoder(w).Encode(map[string]any{"ok": true, "data": json.RawMessage(b)})
			}))
			defer srv.Close()
			var stderr bytes.Buffer
			a := &app{stderr: &stderr, stdout: &bytes.Buffer{}}
			c := client.TCP(strings.TrimPrefix(srv.URL, "http://"), "t")
			t0 := time.Now()
			r, late, err := a.createAgentRun(context.Background(), c, paddock.CreateRunRequest{Project: "app"}, "claude")
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(t0); tc.late && took > time.Second {
				t.Fatalf("the run took %s to be made: the checkout's status held the agent back", took)
			}
			said := strings.Contains(stderr.String(), "3 uncommitted change(s) in /src/app are not in the run")
			if said == tc.late || (late != nil) != tc.late {
				t.Fatalf("before the agent: said %v, late %v; want the note %s\n%s", said, late != nil, map[bool]string{true: "after", false: "before"}[tc.late], stderr.String())
			}
			close(release) // the status is read now
			if late != nil {
				a.noteUncommitted(<-late, r, "claude", "were")
			}
			if tc.late && !strings.Contains(stderr.String(), "3 uncommitted change(s) in /src/app were not in the run") {
				t.Fatalf("after the agent: %s", stderr.String())
			}
		})
	}
}
