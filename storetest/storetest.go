// Package storetest is the conformance suite every paddock.Store must pass.
// A backend's test calls Run with a function that opens its store on a
// directory; opening twice on the same directory must reach the same data.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// Opener opens the store under test on dir.
type Opener func(t *testing.T, dir string) paddock.Store

// Run runs the whole suite.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"Projects", testProjects},
		{"Runs", testRuns},
		{"Transitions", testTransitions},
		{"EventSeq", testEventSeq},
		{"EventsAppendedTogether", testEventsTogether},
		{"RollbackLeavesNothing", testRollback},
		{"ConcurrentAppends", testConcurrentAppends},
		{"Locks", testLocks},
		{"DurableAcrossReopen", testReopen},
		{"DeleteProjectCascades", testDeleteProject},
		{"RunTokens", testRunTokens},
		{"Jobs", testJobs},
		{"ConcurrentFailuresStayApart", testConcurrentFailures},
		{"CancelledCallersStayApart", testCancelledCallers},
		{"Agents", testAgents},
		{"AccessRequests", testAccessRequests},
		{"Flows", testFlows},
		{"OrderWithinASecond", testOrderWithinASecond},
		{"Notices", testNotices},
		{"NoticesInCommitOrder", testNoticesInCommitOrder},
		{"Webhooks", testWebhooks},
		{"Principals", testPrincipals},
		{"Tokens", testTokens},
		{"ApprovalPolicy", testApprovalPolicy},
		{"CallKeys", testCallKeys},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

func fresh(t *testing.T, open Opener) (paddock.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s := open(t, dir)
	t.Cleanup(func() { s.Close() })
	return s, dir
}

func update(t *testing.T, s paddock.Store, fn func(paddock.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

func wantCode(t *testing.T, err error, code paddock.Code) {
	t.Helper()
	if !paddock.IsCode(err, code) {
		t.Fatalf("error = %v, want code %s", err, code)
	}
}

func project(name string) *paddock.Project {
	return &paddock.Project{Name: name, Root: "/src/" + name, Fingerprint: "fp-" + name, CreatedAt: time.Now().UTC()}
}

func run(id, proj string) *paddock.Run {
	now := time.Now().UTC()
	return &paddock.Run{ID: id, Project: proj, CreatedAt: now, Workspace: &paddock.Workspace{
		ID: "w-" + id, RunID: id, Kind: paddock.KindClone, Root: "/state/workspaces/" + id, Fingerprint: "fp",
		BaseRef: "main", BaseRevision: "0123456789abcdef0123456789abcdef01234567", Branch: "main",
		State: paddock.StateRequested, CleanupPolicy: paddock.CleanupOnReject, CreatedAt: now, UpdatedAt: now,
	}}
}

func seed(t *testing.T, s paddock.Store, proj string, runIDs ...string) {
	t.Helper()
	update(t, s, func(tx paddock.Tx) error {
		ctx := context.Background()
		if _, err := tx.Project(ctx, proj); paddock.IsCode(err, paddock.CodeNotFound) {
			if err := tx.CreateProject(ctx, project(proj)); err != nil {
				return err
			}
		}
		for _, id := range runIDs {
			if err := tx.CreateRun(ctx, run(id, proj)); err != nil {
				return err
			}
		}
		return nil
	})
}

func testProjects(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app")
	err := s.Update(ctx, func(tx paddock.Tx) error { return tx.CreateProject(ctx, project("app")) })
	wantCode(t, err, paddock.CodeConflict)
	dupRoot := project("other")
	dupRoot.Root = "/src/app"
	err = s.Update(ctx, func(tx paddock.Tx) error { return tx.CreateProject(ctx, dupRoot) })
	wantCode(t, err, paddock.CodeConflict)
	seed(t, s, "lib")
	custom := project("custom")
	custom.Protected = []string{"secrets/**", ".envrc"}
	custom.AttributionAllow = []string{"robot-generated"}
	custom.Caches = []paddock.Cache{{Name: "go-mod", Mode: "ro", Path: "/srv/mod"}, {Name: "npm", Mode: "rw"}}
	update(t, s, func(tx paddock.Tx) error { return tx.CreateProject(ctx, custom) })
	s.View(ctx, func(tx paddock.Tx) error {
		p, _ := tx.Project(ctx, "custom")
		if len(p.Protected) != 2 || p.Protected[0] != "secrets/**" || len(p.AttributionAllow) != 1 {
			t.Fatalf("protected = %v", p.Protected)
		}
		if len(p.Caches) != 2 || p.Caches[0] != custom.Caches[0] || p.Caches[1] != custom.Caches[1] {
			t.Fatalf("caches = %+v", p.Caches)
		}
		if p, _ := tx.Project(ctx, "app"); p.Protected != nil {
			t.Fatalf("default protected = %v, want nil", p.Protected)
		}
		return nil
	})
	// Settings change in place; name, root and fingerprint stay.
	update(t, s, func(tx paddock.Tx) error {
		p, err := tx.Project(ctx, "custom")
		if err != nil {
			return err
		}
		p.Protected, p.AttributionAllow = nil, []string{"generated-with", "credit-trailer"}
		p.Caches = nil
		p.Root, p.Fingerprint = "/elsewhere", "other"
		return tx.UpdateProject(ctx, p)
	})
	s.View(ctx, func(tx paddock.Tx) error {
		p, _ := tx.Project(ctx, "custom")
		if p.Protected != nil || len(p.AttributionAllow) != 2 || p.AttributionAllow[1] != "credit-trailer" || p.Caches != nil ||
			p.Root != "/src/custom" || p.Fingerprint != "fp-custom" {
			t.Fatalf("updated project = %+v", p)
		}
		return nil
	})
	err = s.Update(ctx, func(tx paddock.Tx) error { return tx.UpdateProject(ctx, project("nope")) })
	wantCode(t, err, paddock.CodeNotFound)
	update(t, s, func(tx paddock.Tx) error { return tx.DeleteProject(ctx, "custom") })
	s.View(ctx, func(tx paddock.Tx) error {
		ps, err := tx.Projects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 2 || ps[0].Name != "app" || ps[1].Name != "lib" {
			t.Fatalf("projects = %+v", ps)
		}
		p, err := tx.Project(ctx, "app")
		if err != nil || p.Root != "/src/app" || p.Fingerprint != "fp-app" || p.CreatedAt.IsZero() {
			t.Fatalf("project = %+v, %v", p, err)
		}
		_, err = tx.Project(ctx, "nope")
		wantCode(t, err, paddock.CodeNotFound)
		return nil
	})
	err = s.Update(ctx, func(tx paddock.Tx) error { return tx.DeleteProject(ctx, "nope") })
	wantCode(t, err, paddock.CodeNotFound)
}

func testRuns(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "r1", "r2")
	seed(t, s, "lib", "r3")
	err := s.Update(ctx, func(tx paddock.Tx) error { return tx.CreateRun(ctx, run("r1", "app")) })
	wantCode(t, err, paddock.CodeConflict)
	// A run with no workspace (access none).
	update(t, s, func(tx paddock.Tx) error {
		return tx.CreateRun(ctx, &paddock.Run{ID: "r0", Project: "app", Access: paddock.AccessNone, Secrets: []string{"API_TOKEN"}, IncludeIgnored: true, CreatedAt: time.Now(),
			ReviewOf: &paddock.ReviewOf{Run: "r1", Hash: "sha256:ab", Commit: "c0ffee", Skipped: []string{".git/x"}}})
	})
	s.View(ctx, func(tx paddock.Tx) error {
		r, err := tx.Run(ctx, "r0")
		if err != nil || r.Workspace != nil || r.Access != paddock.AccessNone || len(r.Secrets) != 1 || r.Secrets[0] != "API_TOKEN" || !r.IncludeIgnored {
			t.Fatalf("run without workspace = %+v, %v", r, err)
		}
		if rv := r.ReviewOf; rv == nil || rv.Run != "r1" || rv.Hash != "sha256:ab" || rv.Commit != "c0ffee" || len(rv.Skipped) != 1 {
			t.Fatalf("what a review run reviews = %+v", rv)
		}
		r, _ = tx.Run(ctx, "r1")
		if r.Access != paddock.AccessWrite || r.ReviewOf != nil {
			t.Fatalf("default access = %q, review of %+v", r.Access, r.ReviewOf)
		}
		return nil
	})
	update(t, s, func(tx paddock.Tx) error { return tx.MarkRunRemoved(ctx, "r0") })
	err = s.Update(ctx, func(tx paddock.Tx) error { return tx.CreateRun(ctx, run("r9", "ghost")) })
	wantCode(t, err, paddock.CodeNotFound)

	update(t, s, func(tx paddock.Tx) error { return tx.MarkRunRemoved(ctx, "r2") })
	s.View(ctx, func(tx paddock.Tx) error {
		r, err := tx.Run(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		want := run("r1", "app").Workspace
		w := r.Workspace
		if w == nil || w.ID != want.ID || w.Kind != want.Kind || w.Root != want.Root || w.BaseRevision != want.BaseRevision ||
			w.Branch != "main" || w.State != paddock.StateRequested || w.CleanupPolicy != paddock.CleanupOnReject {
			t.Fatalf("workspace = %+v", w)
		}
		all, _ := tx.Runs(ctx, paddock.RunFilter{})
		if len(all) != 2 {
			t.Fatalf("listed %d runs without removed, want 2", len(all))
		}
		all, _ = tx.Runs(ctx, paddock.RunFilter{Removed: true})
		if len(all) != 4 {
			t.Fatalf("listed %d runs with removed, want 4", len(all))
		}
		app, _ := tx.Runs(ctx, paddock.RunFilter{Project: "lib"})
		if len(app) != 1 || app[0].ID != "r3" {
			t.Fatalf("runs of lib = %+v", app)
		}
		removed, _ := tx.Run(ctx, "r2")
		if removed.RemovedAt.IsZero() {
			t.Fatal("removed run has no removed_at")
		}
		_, err = tx.Run(ctx, "zz")
		wantCode(t, err, paddock.CodeNotFound)
		return nil
	})
}

func testTransitions(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "r1")
	path := []paddock.WorkspaceState{paddock.StatePreparing, paddock.StateReady, paddock.StateActive,
		paddock.StateCheckpointed, paddock.StateRetained}
	for _, to := range path {
		update(t, s, func(tx paddock.Tx) error {
			r, err := tx.Run(ctx, "r1")
			if err != nil {
				return err
			}
			if to == paddock.StateCheckpointed {
				r.Workspace.Checkpoint = &paddock.Checkpoint{At: time.Now().UTC(), Digest: "d", Files: 3, Reason: "test"}
			}
			return paddock.Transition(ctx, tx, r.Workspace, to, "step")
		})
	}
	// Retained is a hard stop: nothing leads to cleanup, and the failed attempt leaves no event.
	err := s.Update(ctx, func(tx paddock.Tx) error {
		r, _ := tx.Run(ctx, "r1")
		return paddock.Transition(ctx, tx, r.Workspace, paddock.StateCleanupPending, "try")
	})
	wantCode(t, err, paddock.CodeConflict)
	s.View(ctx, func(tx paddock.Tx) error {
		r, _ := tx.Run(ctx, "r1")
		w := r.Workspace
		if w.State != paddock.StateRetained || w.RetainedAt.IsZero() || w.Checkpoint == nil || w.Checkpoint.Files != 3 {
			t.Fatalf("workspace = %+v", w)
		}
		evs, _ := tx.Events(ctx, "r1", 0, 0)
		if len(evs) != len(path) || r.LastSeq != int64(len(path)) {
			t.Fatalf("%d events, last_seq %d; want %d", len(evs), r.LastSeq, len(path))
		}
		var d paddock.TransitionData
		json.Unmarshal(evs[4].Data, &d)
		if d.From != paddock.StateCheckpointed || d.To != paddock.StateRetained || evs[4].Type != paddock.TransitionEvent {
			t.Fatalf("last event = %s %s", evs[4].Type, evs[4].Data)
		}
		ws, _ := tx.Workspaces(ctx, paddock.StateRetained)
		if len(ws) != 1 || ws[0].RunID != "r1" {
			t.Fatalf("workspaces(retained) = %+v", ws)
		}
		ws, _ = tx.Workspaces(ctx, paddock.StateReady, paddock.StateActive)
		if len(ws) != 0 {
			t.Fatalf("workspaces(ready, active) = %+v", ws)
		}
		return nil
	})
}

func testEventSeq(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "a", "b")
	for i := 0; i < 5; i++ {
		update(t, s, func(tx paddock.Tx) error {
			if _, err := tx.AppendEvent(ctx, "a", "x", map[string]int{"i": i}); err != nil {
				return err
			}
			_, err := tx.AppendEvent(ctx, "b", "y", nil)
			return err
		})
	}
	err := s.Update(ctx, func(tx paddock.Tx) error { _, err := tx.AppendEvent(ctx, "nope", "x", nil); return err })
	wantCode(t, err, paddock.CodeNotFound)
	s.View(ctx, func(tx paddock.Tx) error {
		for _, id := range []string{"a", "b"} {
			evs, err := tx.Events(ctx, id, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			checkSeqs(t, evs, 1, 5)
		}
		evs, _ := tx.Events(ctx, "a", 2, 2)
		checkSeqs(t, evs, 3, 2)
		if string(evs[0].Data) != `{"i":2}` || evs[0].Type != "x" || evs[0].Time.IsZero() {
			t.Fatalf("event = %+v", evs[0])
		}
		evs, _ = tx.Events(ctx, "a", 5, 0)
		if evs == nil || len(evs) != 0 {
			t.Fatalf("events after the last = %v, want empty non-nil", evs)
		}
		return nil
	})
}

// testEventsTogether: events appended together (paddock.AppendEvents,
// which a store may do in fewer statements or round trips than one
// AppendEvent each) take the run's next seqs in their order, keep their
// types and data, and file the notable ones as notices; appended to a
// run that is not there, they are not found and nothing is written.
func testEventsTogether(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "a")
	drafts := []paddock.EventDraft{
		{Type: "x", Data: map[string]int{"i": 1}},
		{Type: paddock.EventSubmitted, Data: map[string]string{"hash": "h1"}},
		{Type: "y"},
	}
	update(t, s, func(tx paddock.Tx) error { _, err := tx.AppendEvent(ctx, "a", "first", nil); return err })
	got, err := paddock.AppendEvents(ctx, s, "a", drafts)
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, got, 2, 3)
	_, err = paddock.AppendEvents(ctx, s, "nope", drafts)
	wantCode(t, err, paddock.CodeNotFound)
	update(t, s, func(tx paddock.Tx) error { _, err := tx.AppendEvent(ctx, "a", "last", nil); return err })
	s.View(ctx, func(tx paddock.Tx) error {
		evs, err := tx.Events(ctx, "a", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkSeqs(t, evs, 1, 5)
		for i, want := range []string{"first", "x", paddock.EventSubmitted, "y", "last"} {
			if evs[i].Type != want {
				t.Errorf("event %d is %s, want %s", i+1, evs[i].Type, want)
			}
		}
		if string(evs[1].Data) != `{"i":1}` || evs[3].Data != nil {
			t.Errorf("data: %s and %s, want {\"i\":1} and none", evs[1].Data, evs[3].Data)
		}
		ns, err := tx.Notices(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ns) != 1 || ns[0].Type != paddock.EventSubmitted || ns[0].Seq != 3 {
			t.Errorf("notices %+v, want the one submitted event at seq 3", ns)
		}
		return nil
	})
}

func checkSeqs(t *testing.T, evs []*paddock.Event, first int64, n int) {
	t.Helper()
	if len(evs) != n {
		t.Fatalf("%d events, want %d", len(evs), n)
	}
	for i, e := range evs {
		if e.Seq != first+int64(i) {
			t.Fatalf("event %d has seq %d, want %d", i, e.Seq, first+int64(i))
		}
	}
}

func testRollback(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "a")
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx paddock.Tx) error {
		r, _ := tx.Run(ctx, "a")
		if err := paddock.Transition(ctx, tx, r.Workspace, paddock.StatePreparing, ""); err != nil {
			return err
		}
		tx.AppendEvent(ctx, "a", "x", nil)
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("update error = %v, want boom", err)
	}
	update(t, s, func(tx paddock.Tx) error { _, err := tx.AppendEvent(ctx, "a", "after", nil); return err })
	s.View(ctx, func(tx paddock.Tx) error {
		r, _ := tx.Run(ctx, "a")
		if r.Workspace.State != paddock.StateRequested {
			t.Fatalf("state = %s after rollback", r.Workspace.State)
		}
		evs, _ := tx.Events(ctx, "a", 0, 0)
		checkSeqs(t, evs, 1, 1) // the rolled-back seqs were not consumed
		if evs[0].Type != "after" {
			t.Fatalf("event = %s", evs[0].Type)
		}
		return nil
	})
}

func testConcurrentAppends(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "a", "b")
	const workers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := "a"
				if i%2 == 1 {
					id = "b"
				}
				errs <- s.Update(ctx, func(tx paddock.Tx) error {
					_, err := tx.AppendEvent(ctx, id, fmt.Sprintf("w%d", w), nil)
					return err
				})
			}
		}()
	}
	// Readers run beside the writers and must only ever see gap-free prefixes.
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			s.View(ctx, func(tx paddock.Tx) error {
				evs, err := tx.Events(ctx, "a", 0, 0)
				if err != nil {
					errs <- err
					return nil
				}
				for i, e := range evs {
					if e.Seq != int64(i+1) {
						errs <- fmt.Errorf("reader saw seq %d at %d", e.Seq, i)
						return nil
					}
				}
				return nil
			})
		}
	}()
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s.View(ctx, func(tx paddock.Tx) error {
		for _, id := range []string{"a", "b"} {
			evs, _ := tx.Events(ctx, id, 0, 0)
			checkSeqs(t, evs, 1, workers*each/2)
		}
		return nil
	})
}

func testLocks(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "a", "b")
	lock := func(run string) error {
		return s.Update(ctx, func(tx paddock.Tx) error {
			return tx.AcquireLock(ctx, &paddock.Lock{Project: "app", RunID: run, AcquiredAt: time.Now()})
		})
	}
	if err := lock("a"); err != nil {
		t.Fatal(err)
	}
	if err := lock("a"); err != nil {
		t.Fatalf("re-acquire by holder: %v", err)
	}
	wantCode(t, lock("b"), paddock.CodeBusy)
	s.View(ctx, func(tx paddock.Tx) error {
		l, _ := tx.Lock(ctx, "app")
		p, _ := tx.Project(ctx, "app")
		if l == nil || l.RunID != "a" || p.Lock == nil || p.Lock.RunID != "a" {
			t.Fatalf("lock = %+v, project lock = %+v", l, p.Lock)
		}
		return nil
	})
	update(t, s, func(tx paddock.Tx) error {
		if ok, err := tx.ReleaseLock(ctx, "app", "b"); ok || err != nil {
			t.Fatalf("release by non-holder = %v, %v", ok, err)
		}
		if ok, err := tx.ReleaseLock(ctx, "app", "a"); !ok || err != nil {
			t.Fatalf("release by holder = %v, %v", ok, err)
		}
		return nil
	})
	if err := lock("b"); err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
}

func testReopen(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	ctx := context.Background()
	seed(t, s, "app", "a")
	update(t, s, func(tx paddock.Tx) error { _, err := tx.AppendEvent(ctx, "a", "x", nil); return err })
	s.Close()
	s = open(t, dir)
	defer s.Close()
	update(t, s, func(tx paddock.Tx) error { _, err := tx.AppendEvent(ctx, "a", "y", nil); return err })
	s.View(ctx, func(tx paddock.Tx) error {
		evs, _ := tx.Events(ctx, "a", 0, 0)
		checkSeqs(t, evs, 1, 2)
		return nil
	})
}

func testDeleteProject(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "a")
	update(t, s, func(tx paddock.Tx) error {
		tx.AppendEvent(ctx, "a", "x", nil)
		if err := tx.AccessRequests().Create(ctx, &paddock.AccessRequest{ID: "q1", RunID: "a", Kind: paddock.AccessTool, Tool: "edit",
			Reason: "r", State: paddock.RequestPending, CreatedAt: time.Now().UTC()}); err != nil {
			return err
		}
		return tx.AcquireLock(ctx, &paddock.Lock{Project: "app", RunID: "a", AcquiredAt: time.Now()})
	})
	update(t, s, func(tx paddock.Tx) error { return tx.DeleteProject(ctx, "app") })
	s.View(ctx, func(tx paddock.Tx) error {
		_, err := tx.Run(ctx, "a")
		wantCode(t, err, paddock.CodeNotFound)
		ws, _ := tx.Workspaces(ctx)
		evs, _ := tx.Events(ctx, "a", 0, 0)
		reqs, _ := tx.AccessRequests().List(ctx, "a")
		if len(ws) != 0 || len(evs) != 0 || len(reqs) != 0 {
			t.Fatalf("left %d workspaces, %d events, %d access requests", len(ws), len(evs), len(reqs))
		}
		return nil
	})
	seed(t, s, "app", "a") // the name and the run id are free again
}

func testRunTokens(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "a", "b")
	update(t, s, func(tx paddock.Tx) error { return tx.SetRunToken(ctx, "a", "hash-a") })
	err := s.Update(ctx, func(tx paddock.Tx) error { return tx.SetRunToken(ctx, "b", "hash-a") })
	if err == nil {
		t.Fatal("two runs share a token")
	}
	err = s.Update(ctx, func(tx paddock.Tx) error { return tx.SetRunToken(ctx, "zz", "h") })
	wantCode(t, err, paddock.CodeNotFound)
	s.View(ctx, func(tx paddock.Tx) error {
		id, err := tx.RunByToken(ctx, "hash-a")
		if err != nil || id != "a" {
			t.Fatalf("run by token = %q, %v", id, err)
		}
		_, err = tx.RunByToken(ctx, "nope")
		wantCode(t, err, paddock.CodeNotFound)
		return nil
	})
}

func testJobs(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "a", "b")
	job := func(id, run string) *paddock.Job {
		return &paddock.Job{ID: id, RunID: run, Kind: paddock.JobExec, State: paddock.JobRunning, Owner: "d1",
			LeaseUntil: time.Now().Add(time.Minute), Request: []byte(`{"argv":["true"]}`), CreatedAt: time.Now()}
	}
	update(t, s, func(tx paddock.Tx) error { return tx.CreateJob(ctx, job("j1", "a")) })
	err := s.Update(ctx, func(tx paddock.Tx) error { return tx.CreateJob(ctx, job("j2", "a")) })
	wantCode(t, err, paddock.CodeBusy) // one running job per run
	update(t, s, func(tx paddock.Tx) error { return tx.CreateJob(ctx, job("j3", "b")) })
	update(t, s, func(tx paddock.Tx) error {
		j, err := tx.Job(ctx, "j1")
		if err != nil {
			return err
		}
		code := 3
		j.State, j.ExitCode, j.EndedAt, j.Reason = paddock.JobFailed, &code, time.Now(), "exit 3"
		return tx.UpdateJob(ctx, j)
	})
	update(t, s, func(tx paddock.Tx) error { return tx.CreateJob(ctx, job("j2", "a")) }) // free again
	s.View(ctx, func(tx paddock.Tx) error {
		j, _ := tx.Job(ctx, "j1")
		if j.State != paddock.JobFailed || j.ExitCode == nil || *j.ExitCode != 3 || j.EndedAt.IsZero() || string(j.Request) != `{"argv":["true"]}` {
			t.Fatalf("job = %+v", j)
		}
		jobs, _ := tx.Jobs(ctx, "a", "")
		running, _ := tx.Jobs(ctx, "", paddock.JobRunning)
		if len(jobs) != 2 || len(running) != 2 {
			t.Fatalf("%d jobs of a, %d running", len(jobs), len(running))
		}
		_, err := tx.Job(ctx, "nope")
		wantCode(t, err, paddock.CodeNotFound)
		return nil
	})
}

// testConcurrentFailures: among concurrent updates (which a store may commit
// together), one that fails or panics changes nothing and costs the others
// nothing.
func testConcurrentFailures(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "a")
	// Alone first (a store may commit a lone update otherwise than a
	// batch): a refused and a panicking update leave nothing.
	for i, fail := range []func() error{func() error { return errors.New("refused") }, func() error { panic("boom") }} {
		if err := s.Update(ctx, func(tx paddock.Tx) error {
			if _, err := tx.AppendEvent(ctx, "a", "alone", nil); err != nil {
				return err
			}
			return fail()
		}); err == nil {
			t.Fatalf("a failing update alone (%d) succeeded", i)
		}
	}
	const n = 200
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Update(ctx, func(tx paddock.Tx) error {
				if _, err := tx.AppendEvent(ctx, "a", fmt.Sprintf("e%d", i), nil); err != nil {
					return err
				}
				switch i % 4 {
				case 1:
					return errors.New("refused")
				case 2:
					panic("boom")
				}
				return nil
			})
		}()
	}
	wg.Wait()
	okCount := 0
	for i, err := range errs {
		if (i%4 == 0 || i%4 == 3) != (err == nil) {
			t.Fatalf("update %d: %v", i, err)
		}
		if err == nil {
			okCount++
		}
	}
	s.View(ctx, func(tx paddock.Tx) error {
		evs, _ := tx.Events(ctx, "a", 0, 0)
		checkSeqs(t, evs, 1, okCount)
		for _, e := range evs {
			var i int
			fmt.Sscanf(e.Type, "e%d", &i)
			if i%4 == 1 || i%4 == 2 {
				t.Fatalf("a failed update's event %s was kept", e.Type)
			}
		}
		return nil
	})
}

// testCancelledCallers: callers whose contexts are cancelled at random
// moments (while queued, between statements, inside a long one) get their
// context's error and leave nothing behind, and the writers that share their
// commit (a store may batch concurrent updates) all succeed with their data
// kept. A statement interrupted by its caller's cancellation must not take a
// shared transaction down with it.
func testCancelledCallers(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	seed(t, s, "app", "ok", "cancel")
	testGaveUpCaller(t, s)
	span := seedScratch(t, s)
	results := raceCancellations(s, span)
	checkCancellations(t, results, countCancelEvents(t, s))
}

// The race of testCancelledCallers: cancelRounds rounds of cancelGroup
// callers of each kind; an appender appends cancelEach events, a deleter
// deletes one of cancelGroup projects of cancelScratchEvents events.
const cancelRounds, cancelGroup, cancelEach, cancelScratchEvents = 24, 8, 8, 500

// The kinds of caller in the race.
const (
	writer   = iota // never cancelled
	appender        // cancelled while it waits its turn or between its statements
	deleter         // cancelled inside its long statement, and rolls back anyway
)

// errKeep is what a deleter's update returns: roll the deletion back.
var errKeep = errors.New("roll back the deletion")

// cancelResult is what one caller's update returned.
type cancelResult struct {
	round, k, kind int
	err            error
}

// testGaveUpCaller: a caller that gives up while its fn runs is told so,
// and nothing of its fn is kept, even if every statement of it succeeded.
func testGaveUpCaller(t *testing.T, s paddock.Store) {
	bg := context.Background()
	gaveUp, stop := context.WithCancel(bg)
	err := s.Update(gaveUp, func(tx paddock.Tx) error {
		if _, err := tx.AppendEvent(gaveUp, "cancel", "gave-up", nil); err != nil {
			return err
		}
		stop()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("an update whose caller gave up returned %v, want its context's error", err)
	}
	s.View(bg, func(tx paddock.Tx) error {
		if evs, _ := tx.Events(bg, "cancel", 0, 0); len(evs) != 0 {
			t.Fatalf("an update whose caller gave up left %d events", len(evs))
		}
		return nil
	})
}

// seedScratch makes the deleters' projects and returns how long, in
// microseconds, a deletion takes here (a race-detector build is many times
// slower): the cancellations are spread over that span.
func seedScratch(t *testing.T, s paddock.Store) (span int) {
	bg := context.Background()
	// Each deleter deletes a project with many events, a statement long
	// enough that its cancellation lands inside it, and then rolls back, so
	// that the project is there again for the next round.
	for k := 0; k < cancelGroup; k++ {
		name := fmt.Sprintf("scratch-%d", k)
		seed(t, s, name, name+"-run")
		update(t, s, func(tx paddock.Tx) error {
			for i := 0; i < cancelScratchEvents; i++ {
				if _, err := tx.AppendEvent(bg, name+"-run", "x", nil); err != nil {
					return err
				}
			}
			return nil
		})
	}
	start := time.Now()
	err := s.Update(bg, func(tx paddock.Tx) error {
		if err := tx.DeleteProject(bg, "scratch-0"); err != nil {
			return err
		}
		return errKeep
	})
	if !errors.Is(err, errKeep) {
		t.Fatalf("deleting a scratch project: %v", err)
	}
	return int(time.Since(start)/time.Microsecond) + 1
}

// raceCancellations runs the rounds of writers, appenders and deleters,
// each round's callers at once, and returns what each update returned.
func raceCancellations(s paddock.Store, span int) []cancelResult {
	bg := context.Background()
	var results []cancelResult
	var mu sync.Mutex
	for round := 0; round < cancelRounds; round++ {
		var wg sync.WaitGroup
		for k := 0; k < 3*cancelGroup; k++ {
			kind := k % 3
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, stop := context.WithCancel(bg)
				defer stop()
				key := fmt.Sprintf("%d-%d", round, k)
				var fn func(tx paddock.Tx) error
				switch kind {
				case writer:
					fn = func(tx paddock.Tx) error {
						_, err := tx.AppendEvent(ctx, "ok", key, nil)
						return err
					}
				case appender:
					// Cancelled while it waits its turn or between its statements.
					time.AfterFunc(time.Duration(rand.IntN(2*span))*time.Microsecond, stop)
					fn = func(tx paddock.Tx) error {
						for i := 0; i < cancelEach; i++ {
							if _, err := tx.AppendEvent(ctx, "cancel", key, nil); err != nil {
								return err
							}
						}
						return nil
					}
				case deleter:
					fn = func(tx paddock.Tx) error {
						time.AfterFunc(time.Duration(rand.IntN(span))*time.Microsecond, stop)
						if err := tx.DeleteProject(ctx, fmt.Sprintf("scratch-%d", k/3)); err != nil {
							return err
						}
						return errKeep
					}
				}
				err := s.Update(ctx, fn)
				mu.Lock()
				results = append(results, cancelResult{round, k, kind, err})
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	return results
}

// countCancelEvents counts the events of runs "ok" and "cancel" by type
// (each caller's key), checking that their seqs have no gaps and that
// every scratch project is whole again.
func countCancelEvents(t *testing.T, s paddock.Store) map[string]map[string]int {
	bg := context.Background()
	counts := map[string]map[string]int{}
	s.View(bg, func(tx paddock.Tx) error {
		for _, run := range []string{"ok", "cancel"} {
			evs, err := tx.Events(bg, run, 0, cancelRounds*cancelGroup*cancelEach)
			if err != nil {
				t.Fatal(err)
			}
			counts[run] = map[string]int{}
			for i, e := range evs {
				if e.Seq != int64(i+1) {
					t.Fatalf("run %s: event %d has seq %d", run, i, e.Seq)
				}
				counts[run][e.Type]++
			}
		}
		for k := 0; k < cancelGroup; k++ {
			evs, err := tx.Events(bg, fmt.Sprintf("scratch-%d-run", k), 0, 2*cancelScratchEvents)
			if err != nil || len(evs) != cancelScratchEvents {
				t.Fatalf("scratch-%d: %d events, %v; a rolled-back deletion was kept", k, len(evs), err)
			}
		}
		return nil
	})
	return counts
}

// checkCancellations checks each caller's result against the events it
// left, and that cancellation really raced the updates.
func checkCancellations(t *testing.T, results []cancelResult, counts map[string]map[string]int) {
	cancelled := 0
	var problems []string
	for _, r := range results {
		key := fmt.Sprintf("%d-%d", r.round, r.k)
		bad := func(format string, args ...any) {
			problems = append(problems, fmt.Sprintf("round %d, caller %d: ", r.round, r.k)+fmt.Sprintf(format, args...))
		}
		switch {
		case r.kind == writer && r.err != nil:
			bad("a writer never cancelled failed: %v", r.err)
		case r.kind == writer && counts["ok"][key] != 1:
			bad("a writer succeeded but left %d events", counts["ok"][key])
		case r.kind == appender && r.err == nil && counts["cancel"][key] != cancelEach:
			bad("succeeded but left %d of %d events", counts["cancel"][key], cancelEach)
		case r.kind == appender && r.err != nil && counts["cancel"][key] != 0:
			bad("failed (%v) but left %d events", r.err, counts["cancel"][key])
		case r.err != nil && !errors.Is(r.err, context.Canceled) && !errors.Is(r.err, errKeep):
			bad("failed with %v, want its context's error", r.err)
		case r.kind == deleter && r.err == nil:
			bad("a deletion that returns an error was committed")
		}
		if errors.Is(r.err, context.Canceled) {
			cancelled++
		}
	}
	if len(problems) > 0 {
		t.Fatalf("%d of %d updates went wrong, first:\n%s", len(problems), len(results), strings.Join(problems[:min(len(problems), 10)], "\n"))
	}
	// The test means something only if cancellation really raced the updates.
	if cancelled == 0 || cancelled == cancelRounds*cancelGroup*2 {
		t.Fatalf("%d of %d cancellable callers were cancelled; the delays no longer race the updates", cancelled, cancelRounds*cancelGroup*2)
	}
	t.Logf("%d of %d cancellable callers were cancelled", cancelled, cancelRounds*cancelGroup*2)
}

func testAgents(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	def := paddock.AgentDefinition{Name: "tester", Workspace: "write", Tools: []string{"read", "exec"},
		Tool: map[string]paddock.ToolRule{"exec": {Allow: []string{"go test"}}}}
	rec := &paddock.AgentRecord{Definition: def, Hash: def.Hash(), Source: "name = \"tester\"\n", UpdatedAt: time.Now().UTC()}
	update(t, s, func(tx paddock.Tx) error { return tx.PutAgent(ctx, rec) })
	// A run keeps its copy whatever happens to the stored definition.
	seed(t, s, "app")
	r := run("r1", "app")
	r.Agent, r.AgentHash = &def, def.Hash()
	update(t, s, func(tx paddock.Tx) error { return tx.CreateRun(ctx, r) })
	def2 := def
	def2.Tools = []string{"read"}
	update(t, s, func(tx paddock.Tx) error {
		return tx.PutAgent(ctx, &paddock.AgentRecord{Definition: def2, Hash: def2.Hash(), UpdatedAt: time.Now().UTC()})
	})
	s.View(ctx, func(tx paddock.Tx) error {
		got, err := tx.Agent(ctx, "tester")
		if err != nil || got.Hash != def2.Hash() || len(got.Definition.Tools) != 1 {
			t.Fatalf("agent after replace = %+v, %v", got, err)
		}
		all, err := tx.Agents(ctx)
		if err != nil || len(all) != 1 {
			t.Fatalf("agents = %v, %v", all, err)
		}
		run, err := tx.Run(ctx, "r1")
		if err != nil || run.AgentHash != def.Hash() || run.Agent == nil || run.Agent.Tool["exec"].Allow[0] != "go test" || run.Agent.Hash() != def.Hash() {
			t.Fatalf("run's copy = %+v, %v", run, err)
		}
		_, err = tx.Agent(ctx, "nobody")
		wantCode(t, err, paddock.CodeNotFound)
		return nil
	})
	update(t, s, func(tx paddock.Tx) error { return tx.DeleteAgent(ctx, "tester") })
	err := s.Update(ctx, func(tx paddock.Tx) error { return tx.DeleteAgent(ctx, "tester") })
	wantCode(t, err, paddock.CodeNotFound)
}

// testOrderWithinASecond: "oldest first" holds for times a fraction of a
// second apart (a store that compares times as text must write them in
// one width).
func testOrderWithinASecond(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "a")
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	update(t, s, func(tx paddock.Tx) error {
		for _, q := range []*paddock.AccessRequest{
			{ID: "q1", RunID: "a", Kind: paddock.AccessTool, Tool: "edit", Reason: "r", State: paddock.RequestPending, CreatedAt: t0.Add(120 * time.Millisecond)},
			{ID: "q2", RunID: "a", Kind: paddock.AccessTool, Tool: "edit", Reason: "r", State: paddock.RequestPending, CreatedAt: t0.Add(100 * time.Millisecond)},
			{ID: "q3", RunID: "a", Kind: paddock.AccessTool, Tool: "edit", Reason: "r", State: paddock.RequestPending, CreatedAt: t0},
		} {
			if err := tx.AccessRequests().Create(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	s.View(ctx, func(tx paddock.Tx) error {
		got, err := tx.AccessRequests().List(ctx, "a")
		if err != nil || len(got) != 3 || got[0].ID != "q3" || got[1].ID != "q2" || got[2].ID != "q1" {
			t.Fatalf("order = %v, %v", ids(got), err)
		}
		return nil
	})
}

func ids(qs []*paddock.AccessRequest) []string {
	var out []string
	for _, q := range qs {
		out = append(out, q.ID)
	}
	return out
}

func testAccessRequests(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "a", "b")
	now := time.Now().UTC()
	r1 := &paddock.AccessRequest{ID: "q1", RunID: "a", Kind: paddock.AccessCommand, Command: []string{"go", "vet"}, Reason: "lint", State: paddock.RequestPending, CreatedAt: now}
	r2 := &paddock.AccessRequest{ID: "q2", RunID: "a", Kind: paddock.AccessNetwork, Domain: "proxy.golang.org", Reason: "modules", State: paddock.RequestPending, CreatedAt: now.Add(time.Second)}
	update(t, s, func(tx paddock.Tx) error {
		if err := tx.AccessRequests().Create(ctx, r1); err != nil {
			return err
		}
		return tx.AccessRequests().Create(ctx, r2)
	})
	err := s.Update(ctx, func(tx paddock.Tx) error { return tx.AccessRequests().Create(ctx, r1) })
	wantCode(t, err, paddock.CodeConflict)
	err = s.Update(ctx, func(tx paddock.Tx) error {
		return tx.AccessRequests().Create(ctx, &paddock.AccessRequest{ID: "q1", RunID: "ghost", State: paddock.RequestPending, CreatedAt: now})
	})
	wantCode(t, err, paddock.CodeNotFound)
	r1.State, r1.DecidedBy, r1.DecidedAt = paddock.RequestGranted, "operator", now
	update(t, s, func(tx paddock.Tx) error { return tx.AccessRequests().Update(ctx, r1) })
	err = s.Update(ctx, func(tx paddock.Tx) error {
		return tx.AccessRequests().Update(ctx, &paddock.AccessRequest{ID: "q9", RunID: "a", State: paddock.RequestDenied})
	})
	wantCode(t, err, paddock.CodeNotFound)
	s.View(ctx, func(tx paddock.Tx) error {
		got, err := tx.AccessRequests().List(ctx, "a")
		if err != nil || len(got) != 2 || got[0].ID != "q1" || got[0].State != paddock.RequestGranted || got[0].Command[1] != "vet" || got[1].Domain != "proxy.golang.org" {
			t.Fatalf("requests = %+v, %v", got, err)
		}
		other, err := tx.AccessRequests().List(ctx, "b")
		if err != nil || len(other) != 0 {
			t.Fatalf("another run's requests = %v, %v", other, err)
		}
		return nil
	})
}

// testFlows: a flow is kept whole, listed per project, written only over
// the version it was read at, and goes with its project.
func testFlows(t *testing.T, open Opener) {
	s, _ := fresh(t, open)
	ctx := context.Background()
	seed(t, s, "app", "a")
	seed(t, s, "lib")
	now := time.Now().UTC()
	f := &paddock.Flow{ID: "f1", Project: "app", Task: "fix it", State: "coding", CreatedAt: now, UpdatedAt: now,
		Workflow: paddock.Workflow{Name: "w", Start: "coding", States: []paddock.WorkflowState{{Name: "coding", Agent: "coder",
			Transitions: []paddock.FlowTransition{{Event: "done", To: "end"}}}, {Name: "end", End: true}}},
		Runs: map[string]string{"coding": "a"}, Events: []paddock.FlowEvent{{Seq: 1, At: now, Type: "flow.started"}}}
	update(t, s, func(tx paddock.Tx) error { return tx.CreateFlow(ctx, f) })
	update(t, s, func(tx paddock.Tx) error {
		return tx.CreateFlow(ctx, &paddock.Flow{ID: "f2", Project: "lib", CreatedAt: now.Add(time.Second)})
	})
	wantCode(t, s.Update(ctx, func(tx paddock.Tx) error { return tx.CreateFlow(ctx, f) }), paddock.CodeConflict)
	wantCode(t, s.Update(ctx, func(tx paddock.Tx) error {
		return tx.CreateFlow(ctx, &paddock.Flow{ID: "f3", Project: "ghost", CreatedAt: now})
	}), paddock.CodeNotFound)
	s.View(ctx, func(tx paddock.Tx) error {
		got, err := tx.Flow(ctx, "f1")
		if err != nil || got.Version != 1 || got.Workflow.States[0].Transitions[0].Event != "done" || got.Runs["coding"] != "a" || len(got.Events) != 1 {
			t.Fatalf("flow f1 = %+v, %v", got, err)
		}
		all, err := tx.Flows(ctx, "")
		if err != nil || len(all) != 2 || all[0].ID != "f1" {
			t.Fatalf("all flows = %v, %v", all, err)
		}
		if app, err := tx.Flows(ctx, "app"); err != nil || len(app) != 1 {
			t.Fatalf("app's flows = %v, %v", app, err)
		}
		_, err = tx.Flow(ctx, "nope")
		wantCode(t, err, paddock.CodeNotFound)
		return nil
	})
	// Two writers read version 1; the second write is refused.
	a, b := *f, *f
	a.Version, a.State = 2, "end"
	b.Version, b.State = 2, "coding"
	update(t, s, func(tx paddock.Tx) error { return tx.UpdateFlow(ctx, &a) })
	wantCode(t, s.Update(ctx, func(tx paddock.Tx) error { return tx.UpdateFlow(ctx, &b) }), paddock.CodeConflict)
	s.View(ctx, func(tx paddock.Tx) error {
		if got, _ := tx.Flow(ctx, "f1"); got.State != "end" || got.Version != 2 {
			t.Fatalf("after the update: %+v", got)
		}
		return nil
	})
	wantCode(t, s.Update(ctx, func(tx paddock.Tx) error {
		g := paddock.Flow{ID: "ghost", Version: 2}
		return tx.UpdateFlow(ctx, &g)
	}), paddock.CodeNotFound)
	// A project's flows go with it.
	update(t, s, func(tx paddock.Tx) error { return tx.DeleteProject(ctx, "lib") })
	s.View(ctx, func(tx paddock.Tx) error {
		_, err := tx.Flow(ctx, "f2")
		wantCode(t, err, paddock.CodeNotFound)
		return nil
	})
}
