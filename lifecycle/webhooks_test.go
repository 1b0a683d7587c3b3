package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/lifecycle"
	"github.com/paddock-dev/paddock/postgres"
	"github.com/paddock-dev/paddock/postgres/pgtest"
	"github.com/paddock-dev/paddock/sqlite"
	"github.com/paddock-dev/paddock/webhook"
	"github.com/paddock-dev/paddock/workspace"
)

// receiver is a webhook's receiving end on loopback: it answers each
// request as script says (by the request's number, from 1) and keeps
// every request it got.
type receiver struct {
	srv    *httptest.Server
	script func(n int) string // "500", "hang", or "200"
	mu     sync.Mutex
	got    []delivery
}

type delivery struct {
	id, typ, sig string
	body         []byte
	answered     int // the status answered, 0 if it hung
}

func newReceiver(t *testing.T, script func(n int) string) *receiver {
	rc := &receiver{script: script}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		d := delivery{id: r.Header.Get(webhook.EventIDHeader), typ: r.Header.Get(webhook.EventTypeHeader), sig: r.Header.Get(webhook.SignatureHeader), body: b}
		n := len(rc.got) + 1
		act := rc.script(n)
		if act != "hang" {
			d.answered, _ = strconv.Atoi(act)
		}
		rc.got = append(rc.got, d)
		rc.mu.Unlock()
		if act == "hang" {
			select { // past the sender's timeout: it gives up first
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		w.WriteHeader(d.answered)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

// TestWebhookDelivery: a receiver that first answers 500, then hangs past
// the attempt's timeout, then answers 200 gets every notice, in order,
// each signed, each under its notice's id; every attempt is recorded, the
// cursor ends at the last notice, a webhook of one type hears only that
// type, and the data is masked as the run's answers are.
func TestWebhookDelivery(t *testing.T) {
	ctx := context.Background()
	secret := []byte("whsec-test-0123456789")
	main := newReceiver(t, func(n int) string {
		switch n {
		case 1:
			return "500"
		case 2:
			return "hang"
		}
		return "200"
	})
	rejects := newReceiver(t, func(int) string { return "204" })
	obs := &attemptObserver{}
	m := newWebhookManager(t, []lifecycle.WebhookConfig{
		{Name: "ci", URL: main.srv.URL + "/hook", Secret: secret},
		{Name: "rejects", URL: rejects.srv.URL, Events: []string{paddock.NoticeRunRejected}, Secret: []byte("other")},
	}, 300*time.Millisecond, obs)
	if _, err := m.Projects.AddProject(ctx, paddock.AddProjectRequest{Path: m.repo}); err != nil {
		t.Fatal(err)
	}
	r, err := m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "clone", Secrets: []string{"DEPLOY_KEY"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []struct {
		typ  string
		data any
	}{
		{paddock.EventSubmitted, map[string]string{"hash": "h1", "note": "key s3cr3t-deploy-value-42 and ghp_" + strings.Repeat("a", 36)}},
		{paddock.EventToolCall, nil}, // not notable
		{paddock.EventApproved, map[string]string{"hash": "h1"}},
	} {
		if err := m.Store.Update(ctx, func(tx paddock.Tx) error { _, err := tx.AppendEvent(ctx, r.ID, ev.typ, ev.data); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Runs.Reject(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	var notices []*paddock.Notice
	m.Store.View(ctx, func(tx paddock.Tx) (err error) { notices, err = tx.Notices(ctx, 0, 0); return err })
	if len(notices) != 3 || notices[2].Type != paddock.NoticeRunRejected {
		t.Fatalf("notices = %+v", notices)
	}
	last := notices[2].ID

	waitFor(t, 20*time.Second, "every notice delivered", func() bool {
		c, err := cursor(m, "ci")
		return err == nil && c.Delivered == last && len(rejects.deliveries()) == 1
	})
	got := main.deliveries()
	if len(got) != 5 || got[0].answered != 500 || got[1].answered != 0 {
		t.Fatalf("the receiver got %d requests (want 5: 500, a hang, then 200 for each notice)", len(got))
	}
	var ids []int64 // the first 2xx of each id, in arrival order
	seen := map[string]bool{}
	for i, d := range got {
		if err := webhook.Verify(secret, d.sig, d.body, time.Minute); err != nil {
			t.Fatalf("request %d's signature: %v", i+1, err)
		}
		var n paddock.Notice
		if err := json.Unmarshal(d.body, &n); err != nil {
			t.Fatalf("request %d's body %q: %v", i+1, d.body, err)
		}
		if strconv.FormatInt(n.ID, 10) != d.id || n.Type != d.typ || n.RunID != r.ID || n.Project != "my-app" || n.Seq == 0 || n.Time.IsZero() {
			t.Fatalf("request %d: headers id %s type %s, body %s", i+1, d.id, d.typ, d.body)
		}
		if d.answered/100 == 2 && !seen[d.id] {
			seen[d.id] = true
			ids = append(ids, n.ID)
		}
		if strings.Contains(string(d.body), "s3cr3t-deploy-value-42") || strings.Contains(string(d.body), "ghp_aaaa") {
			t.Fatalf("request %d holds a secret: %s", i+1, d.body)
		}
	}
	if len(ids) != 3 || ids[0] != notices[0].ID || ids[1] != notices[1].ID || ids[2] != notices[2].ID {
		t.Fatalf("delivered ids in order %v, want %d %d %d", ids, notices[0].ID, notices[1].ID, notices[2].ID)
	}
	if !strings.Contains(string(got[0].body), "[REDACTED") {
		t.Fatalf("the submitted notice's data is not masked: %s", got[0].body)
	}

	as, err := m.Webhooks.Attempts(ctx, "ci", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 5 {
		t.Fatalf("%d attempts recorded, want 5: %+v", len(as), as)
	}
	// The daemon's metrics were told of each attempt.
	waitFor(t, 10*time.Second, "the attempts observed: ci 3 delivered, 2 failed; rejects 1 delivered", func() bool {
		return obs.count("ci true") == 3 && obs.count("ci false") == 2 && obs.count("rejects true") == 1
	})
	want := []struct {
		notice  int64
		attempt int
		status  int
		ok      bool
	}{{notices[0].ID, 1, 500, false}, {notices[0].ID, 2, 0, false}, {notices[0].ID, 3, 200, true}, {notices[1].ID, 1, 200, true}, {notices[2].ID, 1, 200, true}}
	for i, w := range want {
		a := as[i]
		if a.Notice != w.notice || a.Attempt != w.attempt || a.Status != w.status || a.Delivered != w.ok || (w.ok == (a.Error != "")) {
			t.Errorf("attempt %d = %+v, want %+v", i, a, w)
		}
	}
	if !strings.Contains(as[1].Error, "deadline") {
		t.Errorf("the hung attempt's error = %q", as[1].Error)
	}
	rj := rejects.deliveries()
	if rj[0].typ != paddock.NoticeRunRejected || webhook.Verify([]byte("other"), rj[0].sig, rj[0].body, time.Minute) != nil {
		t.Fatalf("the rejects webhook got %s %s", rj[0].typ, rj[0].body)
	}
	if c, _ := cursor(m, "rejects"); c.Delivered != last {
		t.Fatalf("the rejects webhook's cursor = %d, want %d", c.Delivered, last)
	}
}

func cursor(m *webhookManager, name string) (c *paddock.WebhookCursor, err error) {
	err = m.Store.View(context.Background(), func(tx paddock.Tx) (err error) { c, err = tx.Webhooks().Cursor(context.Background(), name); return err })
	return c, err
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type webhookManager struct {
	*lifecycle.Manager
	repo string
}

// newWebhookManager makes a Manager on a fresh state and repository with
// these webhooks, paced for a test, closed at the test's end.
func newWebhookManager(t *testing.T, hooks []lifecycle.WebhookConfig, attemptTimeout time.Duration, obs ...lifecycle.Observer) *webhookManager {
	t.Helper()
	ctx := context.Background()
	g, err := gitx.New(ctx)
	if err != nil {
		t.Skipf("git unavailable: %v", err)
	}
	base := t.TempDir()
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "my app"), map[string]string{"README.md": "hello\n"})
	wsDir := filepath.Join(base, "state", "workspaces")
	os.MkdirAll(wsDir, 0o700)
	s, err := sqlite.Open(ctx, filepath.Join(base, "state", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	m, err := lifecycle.NewManager(ctx, lifecycle.Config{Store: s, Git: g, Providers: workspace.Providers(g, wsDir), WorkspacesDir: wsDir,
		ArtifactsDir: filepath.Join(base, "state", "artifacts"),
		Secret: func(name string) (string, bool) {
			return "s3cr3t-deploy-value-42", name == "DEPLOY_KEY"
		},
		Webhooks: hooks, Observer: observerOf(obs),
		WebhookTiming: lifecycle.WebhookTiming{FirstRetry: 50 * time.Millisecond, MaxRetry: 200 * time.Millisecond,
			Timeout: attemptTimeout, Poll: 100 * time.Millisecond, Lease: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return &webhookManager{Manager: m, repo: repo}
}

// TestWebhookCloseWaits: Close ends an attempt under way at once (not at
// its timeout) and returns only once the deliverer has recorded it and
// given its lease back, so that another node can take over at once.
func TestWebhookCloseWaits(t *testing.T) {
	ctx := context.Background()
	hung := newReceiver(t, func(int) string { return "hang" })
	m := newWebhookManager(t, []lifecycle.WebhookConfig{{Name: "ci", URL: hung.srv.URL, Secret: []byte("k")}}, 20*time.Second)
	if _, err := m.Projects.AddProject(ctx, paddock.AddProjectRequest{Path: m.repo}); err != nil {
		t.Fatal(err)
	}
	r, err := m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "clone"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Runs.Reject(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the receiver's first request", func() bool { return len(hung.deliveries()) == 1 })
	start := time.Now()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v with an attempt under way (its timeout is 20s, the receiver hangs 5s)", d)
	}
	as, err := m.Webhooks.Attempts(ctx, "ci", 0)
	if err != nil || len(as) != 1 || as[0].Delivered || !strings.Contains(as[0].Error, "canceled") {
		t.Fatalf("attempts after Close: %+v, %v", as, err)
	}
	c, err := cursor(m, "ci")
	if err != nil || c.Delivered != 0 || c.LeaseUntil.After(time.Now()) {
		t.Fatalf("the cursor after Close: %+v, %v (want nothing delivered and the lease given back)", c, err)
	}
}

// TestWebhookOneNodeAtATime: two nodes on one PostgreSQL database, both
// with the webhook: every notice is delivered once, never two requests at
// once (one node holds the lease), and when the holder stops the other
// takes over where the cursor is.
func TestWebhookOneNodeAtATime(t *testing.T) {
	ctx := context.Background()
	g, err := gitx.New(ctx)
	if err != nil {
		t.Skipf("git unavailable: %v", err)
	}
	var mu sync.Mutex
	inFlight, overlapped := 0, false
	count := map[string]int{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		inFlight++
		overlapped = overlapped || inFlight > 1
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // a window for another node's request
		mu.Lock()
		inFlight--
		if webhook.Verify([]byte("k"), r.Header.Get(webhook.SignatureHeader), b, time.Minute) == nil {
			count[r.Header.Get(webhook.EventIDHeader)]++
		}
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	base := t.TempDir()
	dsn := pgtest.Need(t).Database(t, base)
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "my app"), map[string]string{"README.md": "hello\n"})
	nodes := map[string]*lifecycle.Manager{}
	for _, id := range []string{"na", "nb"} {
		wsDir := filepath.Join(base, id, "workspaces")
		os.MkdirAll(wsDir, 0o700)
		s, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Join(ctx, postgres.NodeConfig{ID: id, Home: id, Address: "http://127.0.0.1:1", Capacity: 8, Lease: 30 * time.Second}); err != nil {
			t.Fatal(err)
		}
		m, err := lifecycle.NewManager(ctx, lifecycle.Config{Store: s, Cluster: s, Git: g, Providers: workspace.Providers(g, wsDir),
			WorkspacesDir: wsDir, ArtifactsDir: filepath.Join(base, id, "artifacts"),
			Webhooks:      []lifecycle.WebhookConfig{{Name: "ci", URL: recv.URL, Secret: []byte("k")}},
			WebhookTiming: lifecycle.WebhookTiming{Poll: 50 * time.Millisecond, Lease: time.Second, Timeout: 5 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(context.Background()) })
		nodes[id] = m
	}
	a := nodes["na"]
	if _, err := a.Projects.AddProject(ctx, paddock.AddProjectRequest{Path: repo}); err != nil {
		t.Fatal(err)
	}
	r, err := a.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "clone"})
	if err != nil {
		t.Fatal(err)
	}
	notify := func(n int) {
		for i := range n {
			if err := a.Store.Update(ctx, func(tx paddock.Tx) error {
				_, err := tx.AppendEvent(ctx, r.ID, paddock.EventJobFinished, map[string]int{"i": i})
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	delivered := func(want int) {
		t.Helper()
		waitFor(t, 20*time.Second, fmt.Sprintf("%d notices delivered", want), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(count) == want
		})
		mu.Lock()
		defer mu.Unlock()
		for id, n := range count {
			if n != 1 {
				t.Fatalf("notice %s delivered %d times", id, n)
			}
		}
		if overlapped {
			t.Fatal("two requests were in flight at once: both nodes delivered")
		}
	}
	notify(8)
	delivered(8)
	var holder string
	a.Store.View(ctx, func(tx paddock.Tx) error {
		c, err := tx.Webhooks().Cursor(ctx, "ci")
		if err == nil {
			holder = c.LeaseOwner
		}
		return err
	})
	other := map[string]string{"na": "nb", "nb": "na"}[holder]
	if other == "" {
		t.Fatalf("the lease's holder is %q", holder)
	}
	if err := nodes[holder].Close(ctx); err != nil {
		t.Fatal(err)
	}
	if holder == "na" {
		a = nodes["nb"] // the notices are made on the node still serving
	}
	notify(4)
	delivered(12)
	a.Store.View(ctx, func(tx paddock.Tx) error {
		c, err := tx.Webhooks().Cursor(ctx, "ci")
		if err != nil || c.LeaseOwner != other {
			t.Fatalf("after %s stopped the lease is %+v, %v; want %s's", holder, c, err, other)
		}
		return nil
	})
}

func observerOf(obs []lifecycle.Observer) lifecycle.Observer {
	if len(obs) == 0 {
		return nil
	}
	return obs[0]
}

// attemptObserver counts the webhook attempts it is told of (the
// daemon's metrics), by webhook and outcome.
type attemptObserver struct {
	mu       sync.Mutex
	attempts map[string]int
}

func (o *attemptObserver) WebhookAttempt(name string, delivered bool, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.attempts == nil {
		o.attempts = map[string]int{}
	}
	o.attempts[fmt.Sprintf("%s %v", name, delivered)]++
}

func (o *attemptObserver) count(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.attempts[key]
}

func (*attemptObserver) ToolCall(string, paddock.Access, paddock.Decision, string, error, time.Duration) {
}
func (*attemptObserver) Exec(paddock.Access, string, bool, bool, time.Duration) {}
func (*attemptObserver) ExecFailed(error)                                       {}
func (*attemptObserver) CallStage(string, string, time.Duration)                {}
