package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// TestAppendEventsInOneBatch: events appended in one batch are stored as
// Update's AppendEvent stores them (seqs in order, after those before,
// their data as sent); a run that is not there is not_found and nothing
// is written; an event that makes a notice gets its notice; and a node
// marked lost writes nothing and is told so (ErrFenced), as Update's
// fence tells it.
func TestAppendEventsInOneBatch(t *testing.T) {
	ns := nodes(t, 2, 30*time.Second)
	a, b := ns[0], ns[1]
	ctx := context.Background()
	if _, ok := paddock.Store(a).(paddock.EventAppender); !ok {
		t.Fatal("the PostgreSQL store appends events without a batch")
	}
	mkRun(t, a, "app", "r-1", paddock.StateActive)
	before, err := paddock.AppendEvents(ctx, a, "r-1", []paddock.EventDraft{{Type: "test.one", Data: map[string]int{"n": 1}}})
	if err != nil {
		t.Fatal(err)
	}
	// The same three through Update (viewOnly hides the batch) and in one
	// batch: stored alike.
	drafts := []paddock.EventDraft{{Type: "test.a", Data: map[string]string{"path": "x"}}, {Type: "test.b"}, {Type: "test.c", Data: []int{1, 2}}}
	viaUpdate, err := paddock.AppendEvents(ctx, viewOnly{a}, "r-1", drafts)
	if err != nil {
		t.Fatal(err)
	}
	viaBatch, err := paddock.AppendEvents(ctx, a, "r-1", drafts)
	if err != nil {
		t.Fatal(err)
	}
	if len(viaBatch) != 3 || viaBatch[0].Seq != before[0].Seq+4 || viaBatch[2].Seq != viaBatch[0].Seq+2 {
		t.Fatalf("seqs: before %d, through Update %+v, in a batch %+v", before[0].Seq, viaUpdate, viaBatch)
	}
	var stored []*paddock.Event
	if err := b.View(ctx, func(tx paddock.Tx) (err error) { stored, err = tx.Events(ctx, "r-1", 0, 100); return err }); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 7 {
		t.Fatalf("%d events stored, want 7", len(stored))
	}
	for i, e := range viaBatch {
		s, u := stored[4+i], viaUpdate[i]
		if e.Seq != s.Seq || e.Type != s.Type || string(e.Data) != string(s.Data) || !e.Time.Equal(s.Time) || string(u.Data) != string(e.Data) {
			t.Fatalf("event %d: answered %+v, stored %+v, through Update %+v", i, e, s, u)
		}
	}
	// No such run.
	if _, err := paddock.AppendEvents(ctx, a, "r-none", drafts); !paddock.IsCode(err, paddock.CodeNotFound) {
		t.Fatalf("a run that is not there: %v", err)
	}
	// A notice's event, with others: its notice is in the outbox.
	if _, err := paddock.AppendEvents(ctx, a, "r-1", []paddock.EventDraft{{Type: "test.d"}, {Type: paddock.EventSubmitted, Data: map[string]string{"id": "cs"}}}); err != nil {
		t.Fatal(err)
	}
	var notices []*paddock.Notice
	if err := b.View(ctx, func(tx paddock.Tx) (err error) { notices, err = tx.Notices(ctx, 0, 10); return err }); err != nil {
		t.Fatal(err)
	}
	if len(notices) != 1 || notices[0].Type != paddock.EventSubmitted || notices[0].Seq != viaBatch[2].Seq+2 {
		t.Fatalf("notices %+v", notices)
	}
	// a is marked lost: its batch is fenced, nothing of it stored.
	markLost(t, a, b)
	_, err = paddock.AppendEvents(ctx, a, "r-1", drafts)
	if !errors.Is(err, paddock.ErrFenced) || !paddock.IsCode(err, paddock.CodeNodeLost) {
		t.Fatalf("a lost node's batch: %v", err)
	}
	var last []*paddock.Event
	b.View(ctx, func(tx paddock.Tx) (err error) { last, err = tx.Events(ctx, "r-1", 0, 100); return err })
	if got := fmt.Sprintf("%d %s", len(last), last[len(last)-1].Type); got != "10 run.node_lost" {
		t.Fatalf("after the fenced batch: %s", got)
	}
}
