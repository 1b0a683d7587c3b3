package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// TestNoticeStream: the firehose sends the notices of every run as SSE,
// ids the notices' ids; a client that reconnects with Last-Event-ID gets
// every later notice once, in order; ?types= keeps only those types (and
// a resume past the ones left out still sees the next); credential
// shapes are masked; an unknown type is refused.
func TestNoticeStream(t *testing.T) {
	t.Parallel()
	f := newFixtureOf(t, func(s *Server, st *fakeState) { s.Notices = fakeNotices{st} })
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	f.svc.notice("r-a", paddock.EventSubmitted, `{"hash":"h1"}`)
	f.svc.notice("r-b", paddock.EventJobFinished, `{"exit_code":0}`)
	f.svc.notice("r-a", paddock.EventApproved, `{"token":"ghp_`+strings.Repeat("z", 36)+`"}`)

	type got struct {
		id   int64
		name string
		n    paddock.Notice
	}
	// read reads want events of the stream from query and Last-Event-ID.
	read := func(query, lastID string, want int, during func()) []got {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/events/stream"+query, nil)
		req.Host = "localhost"
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if during != nil {
			go during()
		}
		var out []got
		var cur got
		sc := bufio.NewScanner(resp.Body)
		for len(out) < want && sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				cur.id, _ = strconv.ParseInt(line[4:], 10, 64)
			case strings.HasPrefix(line, "event: "):
				cur.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(line[6:]), &cur.n); err != nil {
					t.Fatalf("data %q: %v", line, err)
				}
			case line == "" && cur.id != 0:
				out = append(out, cur)
				cur = got{}
			}
		}
		return out
	}
	all := read("", "", 3, nil)
	for i, g := range all {
		if g.id != int64(i+1) || g.n.ID != g.id || g.name != g.n.Type || g.n.Project != "app" {
			t.Fatalf("event %d: %+v", i, g)
		}
	}
	if all[2].n.Type != paddock.EventApproved || strings.Contains(string(all[2].n.Data), "ghp_zzz") {
		t.Fatalf("the approval's data is not masked: %s", all[2].n.Data)
	}
	// Resumed after 2 while two more are made: 3, 4, 5 once each, in order.
	resumed := read("?after=1", "2", 3, func() {
		time.Sleep(50 * time.Millisecond)
		f.svc.notice("r-c", paddock.EventNodeLost, `{}`)
		f.svc.notice("r-a", paddock.NoticeRunRejected, `{}`)
	})
	if len(resumed) != 3 || resumed[0].id != 3 || resumed[1].id != 4 || resumed[2].id != 5 || resumed[2].name != paddock.NoticeRunRejected {
		t.Fatalf("resumed with Last-Event-ID 2: %+v", resumed)
	}
	// Only rejections, from the start and after a resume past the others.
	if only := read("?types=run.rejected,changeset.submitted", "", 2, nil); len(only) != 2 || only[0].id != 1 || only[1].id != 5 {
		t.Fatalf("types=run.rejected,changeset.submitted: %+v", only)
	}
	later := read("?types=run.rejected", "5", 1, func() {
		time.Sleep(50 * time.Millisecond)
		f.svc.notice("r-b", paddock.EventJobInterrupted, `{}`)
		f.svc.notice("r-b", paddock.NoticeRunRejected, `{}`)
	})
	if len(later) != 1 || later[0].id != 7 {
		t.Fatalf("resumed rejections: %+v", later)
	}
	if a := f.do(t, f.h, "GET", "/v1/events/stream?types=exec", ""); a.status != 400 || !strings.Contains(a.Error.Message, "exec") {
		t.Fatalf("an unknown type: %d %+v", a.status, a.Error)
	}
	if a := f.do(t, f.h, "GET", "/v1/events/stream?after=-1", ""); a.status != 400 {
		t.Fatalf("a bad after: %d", a.status)
	}
}
