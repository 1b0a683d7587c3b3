package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/postgres"
)

// TestAdoptableInUseFirst: a node adopting a lost node's runs takes
// them in the order Adoptable gives, each in about a second; listed
// oldest made first, a run an agent is using waited behind every idle
// run made before it (issue #35). The runs most likely in use come
// first: one whose job was under way when its node was lost, then active
// runs by their last activity (the agent's calls, not the events the loss
// or an earlier adoption's restore appended), then active runs waiting
// on a review, then ready ones, then checkpointed ones.
func TestAdoptableInUseFirst(t *testing.T) {
	ns := nodes(t, 2, 30*time.Second)
	ctx := context.Background()
	lost := ns[1]
	if _, err := lost.Join(ctx, postgres.NodeConfig{ID: "n1", Home: "home-n1", Address: "http://127.0.0.1:1", Capacity: 32, Lease: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	lost.TrustLeaseClock()
	appendEv := func(id, typ string, data any) {
		t.Helper()
		if err := lost.Update(ctx, func(tx paddock.Tx) error {
			_, err := tx.AppendEvent(ctx, id, typ, data)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // each event its own time
	}
	job := func(id string, state paddock.JobState, reason string) {
		t.Helper()
		j := &paddock.Job{ID: "j-" + id, RunID: id, Kind: paddock.JobExec, State: paddock.JobRunning, Owner: "n1", Request: []byte(`{}`),
			CreatedAt: time.Now().UTC(), LeaseUntil: time.Now().Add(time.Minute)}
		if err := lost.Update(ctx, func(tx paddock.Tx) error {
			if err := tx.CreateJob(ctx, j); err != nil || state == paddock.JobRunning {
				return err
			}
			j.State, j.Reason, j.EndedAt, j.LeaseUntil = state, reason, time.Now().UTC(), time.Time{}
			return tx.UpdateJob(ctx, j)
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Made in this order: oldest first.
	runs := []struct {
		id    string
		state paddock.WorkspaceState
	}{
		{"old-ready", paddock.StateReady}, {"adopted-before", paddock.StateActive}, {"idle", paddock.StateActive},
		{"waiting", paddock.StateActive}, {"busy", paddock.StateActive}, {"hot-1", paddock.StateActive},
		{"hot-2", paddock.StateActive}, {"checkpointed", paddock.StateCheckpointed}, {"no-checkpoint", paddock.StateActive},
	}
	for _, r := range runs {
		mkRun(t, lost, "app", r.id, r.state)
		appendEv(r.id, paddock.EventRunCreated, nil)
		if r.id != "no-checkpoint" {
			if err := lost.SaveCheckpoint(ctx, &paddock.RunCheckpoint{RunID: r.id, BaseRevision: "0123456789abcdef0123456789abcdef01234567",
				Hash: "h-" + r.id, TakenAt: time.Now(), Content: []byte("tar")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Their activity, oldest first.
	appendEv("adopted-before", paddock.EventToolCall, map[string]string{"tool": "write"})
	job("idle", paddock.JobInterrupted, "the daemon restarted") // an earlier job, not this loss's
	appendEv("idle", paddock.EventToolCall, map[string]string{"tool": "read"})
	appendEv("busy", paddock.EventToolCall, map[string]string{"tool": "write"})
	job("busy", paddock.JobRunning, "")
	appendEv("waiting", paddock.EventToolCall, map[string]string{"tool": "write"})
	appendEv("waiting", paddock.EventSubmitted, map[string]string{"hash": "h"})
	appendEv("old-ready", paddock.EventBootstrapped, nil)
	appendEv("hot-1", paddock.EventToolCall, map[string]string{"tool": "write"})
	appendEv("hot-2", paddock.EventExec, map[string]string{"argv": "make"})
	// adopted-before was adopted once (its restore's tool calls are the
	// adoption's, not its agent's), and then nobody used it.
	appendEv("adopted-before", paddock.EventAdopted, map[string]string{"from_node": "n9"})
	appendEv("adopted-before", paddock.EventToolCall, map[string]string{"tool": "write"})
	appendEv("adopted-before", paddock.EventToolCall, map[string]string{"tool": "write"})
	appendEv("adopted-before", paddock.EventResumed, map[string]any{"by": "test", "adopted": map[string]any{}})
	appendEv("checkpointed", paddock.EventToolCall, map[string]string{"tool": "write"})
	appendEv("checkpointed", paddock.EventCheckpoint, nil)
	// n1 is lost.
	time.Sleep(2100 * time.Millisecond)
	ns[0].TrustLeaseClock()
	if l, err := ns[0].Reap(ctx); err != nil || len(l) != 1 {
		t.Fatalf("reap: %v %v", l, err)
	}
	// The loss's events, newest of all, say nothing of use.
	appendEvBy := func(s *postgres.Store, id, typ string) {
		if err := s.Update(ctx, func(tx paddock.Tx) error { _, err := tx.AppendEvent(ctx, id, typ, nil); return err }); err != nil {
			t.Fatal(err)
		}
	}
	appendEvBy(ns[0], "old-ready", paddock.EventClusterCheckpoint)
	got, err := ns[0].Adoptable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"busy", "hot-2", "hot-1", "idle", "adopted-before", "waiting", "old-ready", "checkpointed"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("adoptable:\n got %v\nwant %v", got, want)
	}
}
