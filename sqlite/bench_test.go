package sqlite_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/sqlite"
	"github.com/paddock-dev/paddock/storetest"
)

// BenchmarkAppends: what a notice adds to an append (storetest.BenchAppends).
func BenchmarkAppends(b *testing.B) {
	storetest.BenchAppends(b, func(b *testing.B, dir string) paddock.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}

// BenchmarkExecWrites: what a keyed exec writes, one after the other: its
// key's claim (lazy), its two events (durable, together), its kept
// answer (lazy).
func BenchmarkExecWrites(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Update(ctx, func(tx paddock.Tx) error {
		if err := tx.CreateProject(ctx, &paddock.Project{Name: "app", Root: "/src/app", Fingerprint: "f", CreatedAt: time.Now()}); err != nil {
			return err
		}
		return tx.CreateRun(ctx, &paddock.Run{ID: "r", Project: "app", Access: paddock.AccessWrite, CreatedAt: time.Now()})
	}); err != nil {
		b.Fatal(err)
	}
	answer := bytes.Repeat([]byte("x"), 1600)
	exec := map[string]any{"argv": []string{"true"}, "exit_code": 0, "duration_ms": 2}
	i := 0
	for b.Loop() {
		i++
		key := fmt.Sprintf("k%d", i)
		if err := paddock.UpdateLazy(ctx, s, func(tx paddock.Tx) error {
			_, err := tx.CallKeys().Claim(ctx, &paddock.CallRecord{Key: key, Request: "req", Owner: "o", CreatedAt: time.Now()})
			return err
		}); err != nil {
			b.Fatal(err)
		}
		if _, err := paddock.AppendEvents(ctx, s, "r", []paddock.EventDraft{{Type: paddock.EventExec, Data: exec}, {Type: "sandbox.enforcement", Data: exec}}); err != nil {
			b.Fatal(err)
		}
		if err := paddock.UpdateLazy(ctx, s, func(tx paddock.Tx) error {
			return tx.CallKeys().Finish(ctx, key, "o", 200, answer)
		}); err != nil {
			b.Fatal(err)
		}
	}
}
