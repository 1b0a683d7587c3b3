package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/internal/paddockcli"
	"github.com/paddock-dev/paddock/sqlite"
	"github.com/paddock-dev/paddock/webhook"
)

// TestWebhookSurvivesKill9: a daemon with a [[webhook]] whose receiver is
// down records a submit's notice and fails to deliver it; killed with
// SIGKILL, then started again once the receiver is up, it delivers it,
// signed, and then a rejection made after the restart, in order; every
// request the receiver got is signed, the attempts are in the store
// numbered across the restart, and the firehose gives the same notices,
// resumed by Last-Event-ID from the first to the second alone.
func TestWebhookSurvivesKill9(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	os.MkdirAll(home, 0o700)
	secret := "whsec-e2e-0123456789abcdef"
	if err := os.WriteFile(filepath.Join(home, "hook.secret"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A loopback port nobody listens on yet: the receiver is down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	toml := "[[webhook]]\nname = \"ci\"\nurl = \"http://" + addr + "/hook\"\nevents = [\"changeset.submitted\", \"run.rejected\"]\nsecret_file = \"hook.secret\"\n"
	if err := os.WriteFile(filepath.Join(home, "paddock.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "clone").must(t).out)
	cli(t, home, "exec", id, "--", "sh", "-c", "echo changed > README.md").must(t)
	cli(t, home, "submit", id).must(t)
	logFile := filepath.Join(home, "test-daemon.log")
	waitUntil(t, 20*time.Second, "a failed delivery attempt in the daemon's log", func() bool {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "webhook: delivery failed")
	})
	d.kill9()

	// The receiver comes up where the webhook points.
	var mu sync.Mutex
	type req struct {
		id, typ, sig string
		body         []byte
	}
	var got []req
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the receiver's port was taken meanwhile: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, req{r.Header.Get(webhook.EventIDHeader), r.Header.Get(webhook.EventTypeHeader), r.Header.Get(webhook.SignatureHeader), b})
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	received := func() []req {
		mu.Lock()
		defer mu.Unlock()
		return append([]req(nil), got...)
	}

	d = startDaemon(t, home)
	waitUntil(t, 30*time.Second, "the submit's delivery after the restart", func() bool { return len(received()) >= 1 })
	cli(t, home, "reject", id).must(t)
	waitUntil(t, 30*time.Second, "the rejection's delivery", func() bool {
		rs := received()
		return len(rs) >= 2 && rs[len(rs)-1].typ == paddock.NoticeRunRejected
	})

	rs := received()
	var ids []string
	for i, r := range rs {
		if err := webhook.Verify([]byte(secret), r.sig, r.body, time.Minute); err != nil {
			t.Fatalf("request %d (%s) is not signed right: %v (%q)", i+1, r.typ, err, r.sig)
		}
		var n paddock.Notice
		if err := json.Unmarshal(r.body, &n); err != nil || strconv.FormatInt(n.ID, 10) != r.id || n.RunID != id || n.Type != r.typ || n.Project != "app" {
			t.Fatalf("request %d: %s %s %s (%v)", i+1, r.id, r.typ, r.body, err)
		}
		if len(ids) == 0 || ids[len(ids)-1] != r.id {
			ids = append(ids, r.id)
		}
	}
	if len(ids) != 2 || rs[0].typ != paddock.EventSubmitted {
		t.Fatalf("deliveries %v (first %s), want the submit's then the rejection's", ids, rs[0].typ)
	}

	// The firehose: both notices from the start, the second alone resumed
	// after the first (Last-Event-ID), with the ids the webhook sent.
	c := client.Unix(paddockcli.SocketPath(home))
	follow := func(after int64, want int) []*paddock.Notice {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var ns []*paddock.Notice
		enough := io.EOF
		err := c.FollowNotices(ctx, after, []string{paddock.EventSubmitted, paddock.NoticeRunRejected}, func(n *paddock.Notice) error {
			ns = append(ns, n)
			if len(ns) == want {
				return enough
			}
			return nil
		})
		if err != enough {
			t.Fatalf("FollowNotices(after %d): %v after %d", after, err, len(ns))
		}
		return ns
	}
	all := follow(0, 2)
	if strconv.FormatInt(all[0].ID, 10) != ids[0] || strconv.FormatInt(all[1].ID, 10) != ids[1] {
		t.Fatalf("the firehose's notices %d %d, the webhook's %v", all[0].ID, all[1].ID, ids)
	}
	if later := follow(all[0].ID, 1); later[0].ID != all[1].ID || later[0].Type != paddock.NoticeRunRejected {
		t.Fatalf("resumed after %d: %+v", all[0].ID, later[0])
	}

	// The CLI's firehose: paddock events --all, until interrupted.
	cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Second)
	out := cliCtx(cctx, t, home, "events", "--all", "--json", "--types", "run.rejected").must(t).out
	ccancel()
	var rej paddock.Notice
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &rej) != nil || rej.ID != all[1].ID {
		t.Fatalf("paddock events --all --types run.rejected printed:\n%s", out)
	}
	cli(t, home, "events", id, "--types", "run.rejected").wantCode(t, exitUsage, "--all")

	d.stop()
	s, err := sqlite.Open(context.Background(), filepath.Join(home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var as []*paddock.WebhookAttempt
	var cur *paddock.WebhookCursor
	s.View(context.Background(), func(tx paddock.Tx) (err error) {
		if as, err = tx.Webhooks().Attempts(context.Background(), "ci", 0); err != nil {
			return err
		}
		cur, err = tx.Webhooks().Cursor(context.Background(), "ci")
		return err
	})
	if cur == nil || strconv.FormatInt(cur.Delivered, 10) != ids[1] {
		t.Fatalf("the cursor = %+v, want at %s", cur, ids[1])
	}
	first := 0
	for first < len(as) && !as[first].Delivered {
		first++
	}
	if first == 0 || first >= len(as) || strconv.FormatInt(as[first].Notice, 10) != ids[0] || as[first].Attempt != first+1 || as[0].Status != 0 || as[0].Error == "" {
		t.Fatalf("attempts: %d failed before the first delivery; %+v", first, as)
	}
	if b, _ := os.ReadFile(logFile); strings.Contains(string(b), secret) {
		t.Fatal("the daemon's log holds the webhook's secret")
	}
}

func waitUntil(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
