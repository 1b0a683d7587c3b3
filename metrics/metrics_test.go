package metrics

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/paddock-dev/paddock"
)

// fakeStore runs each Update's fn on a Tx that appends nowhere, failing
// the transaction with fail, and retrying it once with retry.
type fakeStore struct {
	paddock.Store
	fail  error
	retry bool
}

type fakeTx struct{ paddock.Tx }

func (fakeTx) AppendEvent(ctx context.Context, runID, typ string, data any) (*paddock.Event, error) {
	return &paddock.Event{RunID: runID, Type: typ}, nil
}

func (s *fakeStore) Update(ctx context.Context, fn func(paddock.Tx) error) error {
	if s.retry {
		fn(fakeTx{}) // a first attempt, rolled back (a group commit's retry)
	}
	if err := fn(fakeTx{}); err != nil {
		return err
	}
	return s.fail
}

// TestStoreCountsCommittedEvents: events count once their transaction
// committed, once however often it ran; a rolled back one counts none,
// and only the store's own failures are store errors.
func TestStoreCountsCommittedEvents(t *testing.T) {
	m := New(nil)
	fs := &fakeStore{retry: true}
	s := m.Store(fs)
	appendTwo := func(tx paddock.Tx) error {
		tx.AppendEvent(context.Background(), "r-1", paddock.EventSubmitted, nil)
		_, err := tx.AppendEvent(context.Background(), "r-1", paddock.TransitionEvent, paddock.TransitionData{To: paddock.StateRejected})
		return err
	}
	if err := s.Update(context.Background(), appendTwo); err != nil {
		t.Fatal(err)
	}
	fs.retry = false
	fs.fail = errors.New("disk I/O error")
	s.Update(context.Background(), appendTwo)
	fs.fail = nil
	s.Update(context.Background(), func(tx paddock.Tx) error {
		tx.AppendEvent(context.Background(), "r-1", paddock.EventApproved, nil)
		return paddock.Errorf(paddock.CodeConflict, "refused by its own logic")
	})
	s.Update(context.Background(), func(tx paddock.Tx) error {
		return fmt.Errorf("reading the workspace: %w", os.ErrPermission) // the caller's, not the store's
	})
	for _, c := range []struct {
		got  float64
		want float64
		what string
	}{
		{testutil.ToFloat64(m.events.WithLabelValues(paddock.EventSubmitted)), 1, "submitted events"},
		{testutil.ToFloat64(m.events.WithLabelValues(paddock.EventApproved)), 0, "events of a refused transaction"},
		{testutil.ToFloat64(m.transitions.WithLabelValues(string(paddock.StateRejected))), 1, "rejections"},
		{testutil.ToFloat64(m.storeErrors.WithLabelValues("internal")), 1, "store errors"},
		{float64(testutil.CollectAndCount(m.storeErrors)), 1, "store error series (a refusal is none)"},
		{testutil.ToFloat64(m.storeErrors.WithLabelValues("internal")), 1, "store errors (the caller's own error is none)"},
		{float64(testutil.CollectAndCount(m.storeUpdates)), 3, "transaction outcomes: committed, error, failed"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
}

// lazyStore is a fakeStore that says which of its updates were lazy.
type lazyStore struct {
	fakeStore
	lazy int
}

func (s *lazyStore) UpdateLazy(ctx context.Context, fn func(paddock.Tx) error) error {
	s.lazy++
	return s.Update(ctx, fn)
}

// TestStoreKeepsLazyUpdates: the wrapped store's UpdateLazy goes to the
// store it wraps as UpdateLazy (the daemon's SQLite commits the calls'
// keys without an fsync through it), timed and counted as Update; over
// a store without one it is an Update.
func TestStoreKeepsLazyUpdates(t *testing.T) {
	m := New(nil)
	inner := &lazyStore{}
	s := m.Store(inner)
	appendOne := func(tx paddock.Tx) error {
		_, err := tx.AppendEvent(context.Background(), "r-1", paddock.EventSubmitted, nil)
		return err
	}
	if err := paddock.UpdateLazy(context.Background(), s, appendOne); err != nil || inner.lazy != 1 {
		t.Fatalf("UpdateLazy through the metrics: %v, %d lazy updates below", err, inner.lazy)
	}
	if err := s.Update(context.Background(), appendOne); err != nil || inner.lazy != 1 {
		t.Fatalf("Update through the metrics: %v, %d lazy updates below", err, inner.lazy)
	}
	if got := testutil.ToFloat64(m.events.WithLabelValues(paddock.EventSubmitted)); got != 2 {
		t.Errorf("events counted: %v, want 2", got)
	}
	if err := paddock.UpdateLazy(context.Background(), m.Store(&fakeStore{}), appendOne); err != nil {
		t.Fatalf("UpdateLazy over a store without it: %v", err)
	}
}

// TestStateAtScrape: a scrape reads the state; runs over their disk
// quota's fractions land in the histogram's buckets; a failed read says so.
func TestStateAtScrape(t *testing.T) {
	m := New(nil)
	m.SetSource(func(context.Context) (*State, error) {
		return &State{Runs: []RunCount{{Project: "app", State: "active", N: 2}}, Jobs: map[string]int{"running": 1},
			AccessPending: 3, Queue: map[string]int{"waiting": 1},
			Disk:  []DiskUse{{Used: 10, Quota: 100}, {Used: 95, Quota: 100}, {Used: 100, Quota: 100}},
			Nodes: []NodeLease{{ID: "n1", State: "alive", Age: 2 * time.Second}}}, nil
	})
	want := `
# HELP paddock_run_disk_quota_used_ratio Live overlay runs by the fraction of their disk quota they have written.
# TYPE paddock_run_disk_quota_used_ratio histogram
paddock_run_disk_quota_used_ratio_bucket{le="0.25"} 1
paddock_run_disk_quota_used_ratio_bucket{le="0.5"} 1
paddock_run_disk_quota_used_ratio_bucket{le="0.75"} 1
paddock_run_disk_quota_used_ratio_bucket{le="0.9"} 1
paddock_run_disk_quota_used_ratio_bucket{le="1"} 3
paddock_run_disk_quota_used_ratio_bucket{le="+Inf"} 3
paddock_run_disk_quota_used_ratio_sum 2.05
paddock_run_disk_quota_used_ratio_count 3
# HELP paddock_runs Runs not removed, by project and workspace state.
# TYPE paddock_runs gauge
paddock_runs{project="app",state="active"} 2
# HELP paddock_access_requests_pending Access requests of live runs awaiting a decision.
# TYPE paddock_access_requests_pending gauge
paddock_access_requests_pending 3
# HELP paddock_node_lease_age_seconds Seconds since each node of a shared store last renewed its lease, by node and state.
# TYPE paddock_node_lease_age_seconds gauge
paddock_node_lease_age_seconds{node="n1",state="alive"} 2
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "paddock_run_disk_quota_used_ratio", "paddock_runs",
		"paddock_access_requests_pending", "paddock_node_lease_age_seconds"); err != nil {
		t.Error(err)
	}
	m.SetSource(func(context.Context) (*State, error) { return nil, errors.New("database is locked") })
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP paddock_state_scrape_success 1 if the daemon's state could be read at this scrape, else 0 (the daemon log says why).
# TYPE paddock_state_scrape_success gauge
paddock_state_scrape_success 0
`), "paddock_state_scrape_success", "paddock_runs"); err != nil {
		t.Error(err)
	}
}

// TestWebhookAttempts: attempts are counted by webhook and outcome.
func TestWebhookAttempts(t *testing.T) {
	m := New(nil)
	m.WebhookAttempt("ci", false, time.Second)
	m.WebhookAttempt("ci", true, time.Millisecond)
	m.WebhookAttempt("ci", true, time.Millisecond)
	if n := testutil.CollectAndCount(m.webhooks); n != 2 {
		t.Errorf("%d series, want 2 (ci delivered, ci failed)", n)
	}
}
