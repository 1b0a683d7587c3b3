package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/postgres"
	"github.com/paddock-dev/paddock/postgres/pgtest"
	"github.com/paddock-dev/paddock/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.StopShared()
	os.Exit(code)
}

func openStore(t *testing.T, dir string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), pgtest.Need(t).Database(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func open(t *testing.T, dir string) paddock.Store { return openStore(t, dir) }

func TestConformance(t *testing.T) {
	pgtest.Need(t)
	storetest.Run(t, open)
}

func TestSchema(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	if v, err := s.SchemaVersion(context.Background()); err != nil || v != 17 {
		t.Fatalf("schema version = %d, %v", v, err)
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	openStore(t, dir).Close()
	// Pretend a newer paddock migrated this database.
	pgtest.Need(t).Exec(t, dir, `UPDATE paddock_schema SET version = 99`)
	_, err := postgres.Open(context.Background(), pgtest.Need(t).Database(t, dir))
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

// TestNodesStartTogether: nodes that open a fresh database at the same
// moment all succeed, and the schema is made once.
func TestNodesStartTogether(t *testing.T) {
	dir := t.TempDir()
	dsn := pgtest.Need(t).Database(t, dir)
	const nodes = 6
	stores := make([]*postgres.Store, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = postgres.Open(context.Background(), dsn)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	if v, err := stores[0].SchemaVersion(context.Background()); err != nil || v != 17 {
		t.Fatalf("schema version = %d, %v", v, err)
	}
}

// TestNodesShareSeqs: two nodes (two Stores, two pools) appending to the
// same run leave its seqs gap-free; the run's row lock is what orders them.
func TestNodesShareSeqs(t *testing.T) {
	dir := t.TempDir()
	a, b := openStore(t, dir), openStore(t, dir)
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	err := a.Update(ctx, func(tx paddock.Tx) error {
		if err := tx.CreateProject(ctx, &paddock.Project{Name: "app", Root: "/src/app", Fingerprint: "fp", CreatedAt: time.Now()}); err != nil {
			return err
		}
		return tx.CreateRun(ctx, &paddock.Run{ID: "r", Project: "app", CreatedAt: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers*each)
	for _, s := range []*postgres.Store{a, b} {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					errs <- s.Update(ctx, func(tx paddock.Tx) error {
						_, err := tx.AppendEvent(ctx, "r", fmt.Sprintf("w%d-%d", w, i), nil)
						return err
					})
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	b.View(ctx, func(tx paddock.Tx) error {
		evs, err := tx.Events(ctx, "r", 0, 0)
		if err != nil || len(evs) != 2*workers*each {
			t.Fatalf("%d events, %v", len(evs), err)
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("event %d has seq %d", i, e.Seq)
			}
		}
		return nil
	})
}

// TestRefusalsKeepTheTransaction: a Tx method that answers with a paddock
// error leaves the transaction usable, as SQLite's do, so that a caller
// may handle the answer and go on. PostgreSQL aborts a transaction on any
// failed statement; the store must not let that show.
func TestRefusalsKeepTheTransaction(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	now := time.Now()
	job := func(id, run string) *paddock.Job {
		return &paddock.Job{ID: id, RunID: run, Kind: paddock.JobExec, State: paddock.JobRunning, Owner: "n1",
			Request: []byte(`{}`), CreatedAt: now}
	}
	// One running job, one ended, the project locked by run a.
	err := s.Update(ctx, func(tx paddock.Tx) error {
		if err := tx.CreateProject(ctx, &paddock.Project{Name: "app", Root: "/src/app", Fingerprint: "fp", CreatedAt: now}); err != nil {
			return err
		}
		for _, id := range []string{"a", "b"} {
			if err := tx.CreateRun(ctx, &paddock.Run{ID: id, Project: "app", CreatedAt: now}); err != nil {
				return err
			}
		}
		if err := tx.CreateJob(ctx, job("j1", "a")); err != nil {
			return err
		}
		j2 := job("j2", "a")
		j2.State = paddock.JobSucceeded
		if err := tx.CreateJob(ctx, j2); err != nil {
			return err
		}
		return tx.AcquireLock(ctx, &paddock.Lock{Project: "app", RunID: "a", AcquiredAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	refusals := []struct {
		name string
		code paddock.Code
		fn   func(tx paddock.Tx) error
	}{
		{"duplicate project", paddock.CodeConflict, func(tx paddock.Tx) error {
			return tx.CreateProject(ctx, &paddock.Project{Name: "app", Root: "/src/other", CreatedAt: now})
		}},
		{"duplicate root", paddock.CodeConflict, func(tx paddock.Tx) error {
			return tx.CreateProject(ctx, &paddock.Project{Name: "other", Root: "/src/app", CreatedAt: now})
		}},
		{"duplicate run", paddock.CodeConflict, func(tx paddock.Tx) error {
			return tx.CreateRun(ctx, &paddock.Run{ID: "a", Project: "app", CreatedAt: now})
		}},
		{"run of no project", paddock.CodeNotFound, func(tx paddock.Tx) error {
			return tx.CreateRun(ctx, &paddock.Run{ID: "z", Project: "ghost", CreatedAt: now})
		}},
		{"second running job", paddock.CodeBusy, func(tx paddock.Tx) error { return tx.CreateJob(ctx, job("j3", "a")) }},
		{"job of no run", paddock.CodeNotFound, func(tx paddock.Tx) error { return tx.CreateJob(ctx, job("j4", "ghost")) }},
		{"job made running beside another", paddock.CodeBusy, func(tx paddock.Tx) error {
			j, err := tx.Job(ctx, "j2")
			if err != nil {
				return err
			}
			j.State = paddock.JobRunning
			return tx.UpdateJob(ctx, j)
		}},
		{"lock held by another run", paddock.CodeBusy, func(tx paddock.Tx) error {
			return tx.AcquireLock(ctx, &paddock.Lock{Project: "app", RunID: "b", AcquiredAt: now})
		}},
		{"request of no run", paddock.CodeNotFound, func(tx paddock.Tx) error {
			return tx.AccessRequests().Create(ctx, &paddock.AccessRequest{ID: "q", RunID: "ghost", CreatedAt: now})
		}},
		{"no such event run", paddock.CodeNotFound, func(tx paddock.Tx) error {
			_, err := tx.AppendEvent(ctx, "ghost", "x", nil)
			return err
		}},
	}
	err = s.Update(ctx, func(tx paddock.Tx) error {
		for _, r := range refusals {
			if err := r.fn(tx); !paddock.IsCode(err, r.code) {
				return fmt.Errorf("%s: %v, want code %s", r.name, err, r.code)
			}
			if _, err := tx.AppendEvent(ctx, "a", r.name, nil); err != nil {
				return fmt.Errorf("after %s: %w", r.name, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.View(ctx, func(tx paddock.Tx) error {
		evs, err := tx.Events(ctx, "a", 0, 0)
		if err != nil || len(evs) != len(refusals) {
			t.Fatalf("%d events after the refusals, %v", len(evs), err)
		}
		return nil
	})
}

// TestCancelledCallerKeepsNothing: a caller that gives up inside a
// statement gets its context's error, and the pool it leaves behind still
// serves the next caller.
func TestCancelledCallerKeepsNothing(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	bg := context.Background()
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	err := s.Update(ctx, func(tx paddock.Tx) error {
		if err := tx.CreateProject(ctx, &paddock.Project{Name: "app", Root: "/src/app", CreatedAt: time.Now()}); err != nil {
			return err
		}
		// Stand in for a long statement: any Tx method runs under ctx.
		<-ctx.Done()
		_, err := tx.Projects(ctx)
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("update error = %v, want the context's", err)
	}
	err = s.Update(bg, func(tx paddock.Tx) error {
		ps, err := tx.Projects(bg)
		if err == nil && len(ps) != 0 {
			err = fmt.Errorf("a cancelled update left %d projects", len(ps))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBadDSN(t *testing.T) {
	_, err := postgres.Open(context.Background(), "postgres://paddock:hunter2@[::1/db")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("open of a malformed DSN: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = postgres.Open(ctx, "host=/nonexistent-paddock-socket-dir user=nobody dbname=none connect_timeout=2")
	if err == nil {
		t.Fatal("open of an unreachable server succeeded")
	}
}

// TestOpensWithoutCreatePrivilege: a role that may read and write the
// tables but not create any (the usual role of a service on a shared
// server) opens a database that is already migrated, and writes to it,
// notices and webhooks' attempts included (their ids need no sequence).
func TestOpensWithoutCreatePrivilege(t *testing.T) {
	dir := t.TempDir()
	openStore(t, dir).Close()
	c := pgtest.Need(t)
	dsn := c.Database(t, dir)
	role := "writer_" + dsn[strings.LastIndex(dsn, "=")+1:]
	c.Exec(t, dir, `CREATE ROLE `+role+` LOGIN`)
	c.Exec(t, dir, `REVOKE CREATE ON SCHEMA public FROM PUBLIC`)
	c.Exec(t, dir, `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO `+role)
	ctx := context.Background()
	s, err := postgres.Open(ctx, strings.Replace(dsn, "user="+pgtest.Superuser, "user="+role, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Update(ctx, func(tx paddock.Tx) error {
		if err := tx.CreateProject(ctx, &paddock.Project{Name: "app", Root: "/src/app", CreatedAt: time.Now()}); err != nil {
			return err
		}
		if err := tx.CreateRun(ctx, &paddock.Run{ID: "r", Project: "app", CreatedAt: time.Now()}); err != nil {
			return err
		}
		if _, err := tx.AppendEvent(ctx, "r", paddock.EventJobFinished, nil); err != nil { // a notice, under the advisory lock
			return err
		}
		now := time.Now()
		if _, _, err := tx.Webhooks().Lease(ctx, "ci", "n1", now, now.Add(time.Minute)); err != nil {
			return err
		}
		return tx.Webhooks().RecordAttempt(ctx, &paddock.WebhookAttempt{Webhook: "ci", Notice: 1, Time: now, Status: 500})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEventTimeRoundTrips: the event AppendEvent returns is the one a
// reader gets, although timestamptz keeps only microseconds.
func TestEventTimeRoundTrips(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	var wrote []*paddock.Event
	err := s.Update(ctx, func(tx paddock.Tx) error {
		if err := tx.CreateProject(ctx, &paddock.Project{Name: "app", Root: "/src/app", CreatedAt: time.Now()}); err != nil {
			return err
		}
		if err := tx.CreateRun(ctx, &paddock.Run{ID: "r", Project: "app", CreatedAt: time.Now()}); err != nil {
			return err
		}
		for range 5 {
			e, err := tx.AppendEvent(ctx, "r", "x", nil)
			if err != nil {
				return err
			}
			wrote = append(wrote, e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.View(ctx, func(tx paddock.Tx) error {
		read, err := tx.Events(ctx, "r", 0, 0)
		if err != nil || len(read) != len(wrote) {
			t.Fatalf("%d events, %v", len(read), err)
		}
		for i := range read {
			if !read[i].Time.Equal(wrote[i].Time) {
				t.Fatalf("event %d: written at %v, read at %v", i, wrote[i].Time, read[i].Time)
			}
		}
		return nil
	})
}
