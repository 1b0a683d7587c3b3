package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// testNotices: a notable event's AppendEvent adds its notice, in the same
// transaction; a rolled-back one leaves none; Notices pages in id order,
// joined to the event's data and the run's project; a rejection is the
// notice run.rejected; a project's deletion takes its notices.
func testNotices(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "a", "b")
	seed(t, s, "lib", "c")
	update(t, s, func(tx paddock.Tx) error {
		for _, ev := range []struct {
			run, typ string
			data     any
		}{
			{"a", paddock.EventToolCall, nil},
			{"a", paddock.EventSubmitted, map[string]string{"hash": "h1"}},
			{"b", paddock.EventJobFinished, map[string]int{"exit_code": 0}},
			{"a", paddock.EventExec, nil},
		} {
			if _, err := tx.AppendEvent(ctx, ev.run, ev.typ, ev.data); err != nil {
				return err
			}
		}
		return nil
	})
	err := s.Update(ctx, func(tx paddock.Tx) error {
		if _, err := tx.AppendEvent(ctx, "a", paddock.EventApproved, nil); err != nil {
			return err
		}
		return fmt.Errorf("roll back")
	})
	if err == nil {
		t.Fatal("the failing update succeeded")
	}
	update(t, s, func(tx paddock.Tx) error {
		r, err := tx.Run(ctx, "c")
		if err != nil {
			return err
		}
		for _, to := range []paddock.WorkspaceState{paddock.StatePreparing, paddock.StateReady, paddock.StateRejected} {
			if err := paddock.Transition(ctx, tx, r.Workspace, to, "test"); err != nil {
				return err
			}
		}
		_, err = tx.AppendEvent(ctx, "c", paddock.EventNodeLost, map[string]string{"node": "n1"})
		return err
	})
	var all []*paddock.Notice
	s.View(ctx, func(tx paddock.Tx) error {
		var err error
		if all, err = tx.Notices(ctx, 0, 0); err != nil {
			t.Fatal(err)
		}
		return nil
	})
	want := []struct {
		typ, run, project, data string
		seq                     int64
	}{
		{paddock.EventSubmitted, "a", "app", `{"hash":"h1"}`, 2},
		{paddock.EventJobFinished, "b", "app", `{"exit_code":0}`, 1},
		{paddock.NoticeRunRejected, "c", "lib", "", 3},
		{paddock.EventNodeLost, "c", "lib", `{"node":"n1"}`, 4},
	}
	if len(all) != len(want) {
		t.Fatalf("%d notices, want %d: %+v", len(all), len(want), all)
	}
	for i, w := range want {
		n := all[i]
		if n.Type != w.typ || n.RunID != w.run || n.Project != w.project || n.Seq != w.seq || n.Time.IsZero() {
			t.Errorf("notice %d = %+v, want %+v", i, n, w)
		}
		if w.data != "" && string(n.Data) != w.data {
			t.Errorf("notice %d's data = %s, want %s", i, n.Data, w.data)
		}
		if i > 0 && n.ID <= all[i-1].ID {
			t.Errorf("notice ids out of order: %d after %d", n.ID, all[i-1].ID)
		}
	}
	var td paddock.TransitionData
	if err := json.Unmarshal(all[2].Data, &td); err != nil || td.To != paddock.StateRejected {
		t.Errorf("the rejection's data = %s (%v)", all[2].Data, err)
	}
	s.View(ctx, func(tx paddock.Tx) error {
		page, err := tx.Notices(ctx, all[0].ID, 2)
		if err != nil || len(page) != 2 || page[0].ID != all[1].ID || page[1].ID != all[2].ID {
			t.Fatalf("Notices(after %d, 2) = %+v, %v", all[0].ID, page, err)
		}
		page, err = tx.Notices(ctx, all[3].ID, 0)
		if err != nil || page == nil || len(page) != 0 {
			t.Fatalf("notices after the last = %v, %v; want empty non-nil", page, err)
		}
		return nil
	})
	update(t, s, func(tx paddock.Tx) error { return tx.DeleteProject(ctx, "lib") })
	s.View(ctx, func(tx paddock.Tx) error {
		left, _ := tx.Notices(ctx, 0, 0)
		if len(left) != 2 {
			t.Fatalf("after the project's deletion %d notices are left, want 2", len(left))
		}
		return nil
	})
}

// testNoticesInCommitOrder: writers append notable events to runs of
// their own at once, each holding its transaction open a little after the
// append, while a reader follows the notices with a cursor (id > the last
// it saw): it must see every notice, none skipped because a lower id
// committed after a higher one.
func testNoticesInCommitOrder(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	const workers, each = 6, 15
	runs := make([]string, workers)
	for w := range runs {
		runs[w] = fmt.Sprintf("r%d", w)
	}
	seed(t, s, "app", runs...)
	var wg sync.WaitGroup
	errs := make(chan error, workers*each+1)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				errs <- s.Update(ctx, func(tx paddock.Tx) error {
					if _, err := tx.AppendEvent(ctx, runs[w], paddock.EventJobFinished, nil); err != nil {
						return err
					}
					time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
					_, err := tx.AppendEvent(ctx, runs[w], paddock.EventExec, nil)
					return err
				})
			}
		}()
	}
	done := make(chan struct{})
	seen := map[int64]bool{}
	var cursor int64
	follow := func() {
		s.View(ctx, func(tx paddock.Tx) error {
			ns, err := tx.Notices(ctx, cursor, 0)
			if err != nil {
				errs <- err
				return nil
			}
			for _, n := range ns {
				seen[n.ID] = true
				cursor = n.ID
			}
			return nil
		})
	}
	writersDone := stop(&wg)
	go func() {
		defer close(done)
		for {
			follow()
			select {
			case <-writersDone:
				follow()
				return
			default:
			}
		}
	}()
	<-done
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var all []*paddock.Notice
	s.View(ctx, func(tx paddock.Tx) (err error) { all, err = tx.Notices(ctx, 0, 0); return err })
	if len(all) != workers*each {
		t.Fatalf("%d notices, want %d", len(all), workers*each)
	}
	for _, n := range all {
		if !seen[n.ID] {
			t.Fatalf("the reader following with a cursor skipped notice %d (it committed after a higher id)", n.ID)
		}
	}
}

// stop returns a channel closed once wg is done.
func stop(wg *sync.WaitGroup) <-chan struct{} {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	return ch
}

// testWebhooks: a webhook's cursor starts at the last notice, its lease
// goes to one owner at a time until it expires, only the holder advances
// it and never backwards; attempts are numbered per notice, listed
// oldest first and kept to the latest WebhookAttemptsKept.
func testWebhooks(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "a")
	update(t, s, func(tx paddock.Tx) error {
		_, err := tx.AppendEvent(ctx, "a", paddock.EventSubmitted, nil)
		return err
	})
	var first []*paddock.Notice
	s.View(ctx, func(tx paddock.Tx) (err error) { first, err = tx.Notices(ctx, 0, 0); return err })
	if len(first) != 1 {
		t.Fatalf("%d notices, want 1", len(first))
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	update(t, s, func(tx paddock.Tx) error {
		_, err := tx.Webhooks().Cursor(ctx, "ci")
		wantCode(t, err, paddock.CodeNotFound)
		c, held, err := tx.Webhooks().Lease(ctx, "ci", "node-1", now, now.Add(30*time.Second))
		if err != nil || !held || c.Delivered != first[0].ID || c.LeaseOwner != "node-1" || !c.LeaseUntil.Equal(now.Add(30*time.Second)) {
			t.Fatalf("first lease = %+v, %v, %v", c, held, err)
		}
		if c, held, err = tx.Webhooks().Lease(ctx, "ci", "node-2", now.Add(time.Second), now.Add(31*time.Second)); err != nil || held || c.LeaseOwner != "node-1" {
			t.Fatalf("a second owner's lease while the first holds it = %+v, %v, %v", c, held, err)
		}
		wantCode(t, tx.Webhooks().Advance(ctx, "ci", "node-2", 7), paddock.CodeConflict)
		if _, held, err = tx.Webhooks().Lease(ctx, "ci", "node-1", now.Add(time.Second), now.Add(40*time.Second)); err != nil || !held {
			t.Fatalf("the holder's renewal = %v, %v", held, err)
		}
		if err := tx.Webhooks().Advance(ctx, "ci", "node-1", first[0].ID+5); err != nil {
			t.Fatal(err)
		}
		if err := tx.Webhooks().Advance(ctx, "ci", "node-1", first[0].ID+2); err != nil {
			t.Fatal(err)
		}
		if c, err := tx.Webhooks().Cursor(ctx, "ci"); err != nil || c.Delivered != first[0].ID+5 {
			t.Fatalf("cursor after advancing to +5 then +2 = %+v, %v", c, err)
		}
		c, held, err = tx.Webhooks().Lease(ctx, "ci", "node-2", now.Add(41*time.Second), now.Add(70*time.Second))
		if err != nil || !held || c.LeaseOwner != "node-2" || c.Delivered != first[0].ID+5 {
			t.Fatalf("a lease taken after expiry = %+v, %v, %v", c, held, err)
		}
		wantCode(t, tx.Webhooks().Advance(ctx, "ci", "node-1", first[0].ID+6), paddock.CodeConflict)
		return nil
	})
	update(t, s, func(tx paddock.Tx) error {
		_, err := tx.AppendEvent(ctx, "a", paddock.EventApproved, nil)
		return err
	})
	update(t, s, func(tx paddock.Tx) error {
		ns, err := tx.Notices(ctx, 0, 0)
		if err != nil || len(ns) != 2 {
			t.Fatalf("notices = %v, %v", ns, err)
		}
		c, _, err := tx.Webhooks().Lease(ctx, "later", "node-1", now, now.Add(time.Minute))
		if err != nil || c.Delivered != ns[1].ID {
			t.Fatalf("a webhook leased after the second notice starts at %+v, %v; want %d", c, err, ns[1].ID)
		}
		return nil
	})
	testWebhookAttempts(t, s)
}

func testWebhookAttempts(t *testing.T, s paddock.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	update(t, s, func(tx paddock.Tx) error {
		for i, a := range []*paddock.WebhookAttempt{
			{Webhook: "ci", Notice: 1, Time: at, Error: "connection refused"},
			{Webhook: "ci", Notice: 1, Time: at.Add(time.Second), Status: 500},
			{Webhook: "later", Notice: 1, Time: at, Status: 204, Delivered: true},
			{Webhook: "ci", Notice: 1, Time: at.Add(2 * time.Second), Status: 200, Delivered: true},
			{Webhook: "ci", Notice: 2, Time: at.Add(3 * time.Second), Status: 202, Delivered: true},
		} {
			if err := tx.Webhooks().RecordAttempt(ctx, a); err != nil {
				return err
			}
			if want := []int{1, 2, 1, 3, 1}[i]; a.Attempt != want {
				t.Fatalf("attempt %d numbered %d, want %d", i, a.Attempt, want)
			}
		}
		return nil
	})
	s.View(ctx, func(tx paddock.Tx) error {
		as, err := tx.Webhooks().Attempts(ctx, "ci", 3)
		if err != nil || len(as) != 3 {
			t.Fatalf("Attempts(ci, 3) = %v, %v", as, err)
		}
		if a := as[0]; a.Notice != 1 || a.Attempt != 2 || a.Status != 500 || a.Delivered || !a.Time.Equal(at.Add(time.Second)) {
			t.Fatalf("oldest of the latest 3 = %+v", a)
		}
		if a := as[2]; a.Notice != 2 || a.Attempt != 1 || a.Status != 202 || !a.Delivered || a.Webhook != "ci" {
			t.Fatalf("latest = %+v", a)
		}
		all, _ := tx.Webhooks().Attempts(ctx, "ci", 0)
		if len(all) != 4 || all[0].Error != "connection refused" {
			t.Fatalf("all of ci's attempts = %+v", all)
		}
		return nil
	})
	update(t, s, func(tx paddock.Tx) error {
		for i := range paddock.WebhookAttemptsKept + 5 {
			if err := tx.Webhooks().RecordAttempt(ctx, &paddock.WebhookAttempt{Webhook: "ci", Notice: int64(10 + i), Time: at, Status: 500}); err != nil {
				return err
			}
		}
		return nil
	})
	s.View(ctx, func(tx paddock.Tx) error {
		all, err := tx.Webhooks().Attempts(ctx, "ci", 0)
		if err != nil || len(all) != paddock.WebhookAttemptsKept || all[0].Notice != 15 {
			t.Fatalf("after %d more attempts, %d kept (oldest for notice %d), %v; want %d, oldest 15", paddock.WebhookAttemptsKept+5,
				len(all), all[0].Notice, err, paddock.WebhookAttemptsKept)
		}
		other, _ := tx.Webhooks().Attempts(ctx, "later", 0)
		if len(other) != 1 {
			t.Fatalf("another webhook's attempts were pruned: %d left", len(other))
		}
		return nil
	})
}

// BenchAppends measures what a notice adds to an append: b runs an
// ordinary event's AppendEvent and a notable one's (which inserts its
// notice too, and on PostgreSQL takes the notice lock), each as its own
// Update (a durable commit apiece) and 100 to one Update (the insert's
// own cost).
func BenchAppends(b *testing.B, open func(b *testing.B, dir string) paddock.Store) {
	for _, kind := range []struct{ name, typ string }{{"plain", paddock.EventToolCall}, {"notice", paddock.EventJobFinished}} {
		for _, per := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/%d-per-update", kind.name, per), func(b *testing.B) {
				s := open(b, b.TempDir())
				defer s.Close()
				ctx := context.Background()
				if err := s.Update(ctx, func(tx paddock.Tx) error {
					if err := tx.CreateProject(ctx, project("app")); err != nil {
						return err
					}
					return tx.CreateRun(ctx, run("a", "app"))
				}); err != nil {
					b.Fatal(err)
				}
				data := map[string]int{"exit_code": 0}
				b.ResetTimer()
				for i := 0; i < b.N; i += per {
					if err := s.Update(ctx, func(tx paddock.Tx) error {
						for range per {
							if _, err := tx.AppendEvent(ctx, "a", kind.typ, data); err != nil {
								return err
							}
						}
						return nil
					}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
